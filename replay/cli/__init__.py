"""The ``specreplay`` command: ``main`` keeps the exit-status contract; replay.cli.parser builds
the parser from the per-topic command modules (``cmd_*.py``) and dispatches to their handlers.

The exit-status contract lives here, for every command: 0 all input used, 1 some input skipped
(each listed on stderr by the command), 2 an error (one line on stderr, never a traceback unless
``--debug`` or SPECREPLAY_DEBUG=1), 130 interrupted. A closed output pipe (``| head``) ends the
command quietly with the status it would have had so far: 0.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence

from replay.util.errors import NoRoundsError, SpecReplayError

from .options import DEBUG_ENV, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, print_notes, print_skipped
from .parser import build_parser, dispatch

__all__ = ["build_parser", "main"]


def debug_requested(argv: Sequence[str]) -> bool:
    """--debug anywhere before a ``--``, or SPECREPLAY_DEBUG set: known before parsing can fail
    (every command accepts --debug too, so it may follow the command name)."""
    if os.environ.get(DEBUG_ENV, "").strip() not in ("", "0"):
        return True
    for arg in argv:
        if arg == "--":
            return False  # what follows is positional values, even one spelled --debug
        if arg == "--debug":
            return True
    return False


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = debug_requested(argv)
    try:
        return dispatch(argv)
    except NoRoundsError as exc:  # why nothing could be replayed comes first, then the one error line
        print_notes(exc.notes, exc.label)
        print_skipped(exc.skipped, exc.label)
        return _fail(f"specreplay: error: {exc}", debug)
    except SpecReplayError as exc:
        return _fail(f"specreplay: error: {exc}", debug)
    except KeyboardInterrupt:
        print("specreplay: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OK
    except OSError as exc:
        # The machine said no (disk full, permission, a path that vanished): not our bug, one line.
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"specreplay: error: {where}{exc.strerror or exc}", debug)
    except Exception as exc:  # noqa: BLE001 - the contract: one line, exit 2, never a traceback
        msg = " ".join(str(exc).split())  # one line, whatever the exception's text
        what = f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__
        return _fail(f"specreplay: internal error: {what} (run with --debug for the traceback)", debug)


def _fail(line: str, debug: bool) -> int:
    if debug:
        traceback.print_exc(file=sys.stderr)
    print(line, file=sys.stderr)
    return EXIT_ERROR


def _silence_stdout() -> None:
    """The reader went away: point stdout at /dev/null so the exit-time flush does not complain."""
    if sys.stdout is not sys.__stdout__ or sys.__stdout__ is None:
        return  # in-process callers (tests) own sys.stdout; leave their file descriptors alone
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())
    except OSError:
        pass
