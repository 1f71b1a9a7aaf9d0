"""The ``specreplay`` command: ``main`` keeps the exit-status contract; replay.cli.parser builds
the parser from the per-topic command modules (``cmd_*.py``) and dispatches to their handlers.

The exit statuses are docs/cli.md's ("Exit status"), for every command. A closed output pipe
(``| head``) ends the command quietly with exit 0.
"""

from __future__ import annotations

import io
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from replay.util.errors import PRINTABLE, NoRoundsError, SpecReplayError
from replay.util.interrupt import forget_committed, ignore_interrupts, interrupt_once, interrupted, output_committed

from .status import DEBUG_ENV, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK

__all__ = ["build_parser", "main"]

# The parser and the commands are imported inside main, after the SIGINT rule is in place: a Ctrl-C
# during those imports is then one line and exit 130 like any other.


def __getattr__(name: str) -> Any:
    if name == "build_parser":
        from .parser import build_parser

        return build_parser
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    if argv is None:  # the command's own process (in-process callers keep their SIGINT handling and streams)
        interrupt_once()
        show_undecodable_names()
        try:
            code = _main(sys.argv[1:])
        finally:
            ignore_interrupts()  # the command is done: it exits as it said, whatever arrives during shutdown
        if interrupted() and code != EXIT_INTERRUPTED and not output_committed():  # one Python had to swallow
            _say("specreplay: interrupted")
            code = EXIT_INTERRUPTED
        if code == EXIT_INTERRUPTED:
            _exit_now(code)
        return code
    return _main(argv)


def show_undecodable_names() -> None:
    """A file name's undecodable bytes print as ``\\xff`` on stdout and stderr (replay.util.errors.PRINTABLE),
    as labels and messages show them, instead of raw bytes on one stream and ``\\udcff`` on the other."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors=PRINTABLE)


def _exit_now(code: int) -> None:
    """Leave at once with ``code``, the streams flushed: the interrupt's cleanup already ran (finally
    blocks), and CPython's own exit after a KeyboardInterrupt may end the process by SIGINT instead."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _main(argv: Sequence[str]) -> int:
    argv = list(argv)
    debug = debug_requested(argv)
    forget_committed()
    try:
        from .parser import dispatch

        return dispatch(argv)
    except NoRoundsError as exc:  # why nothing could be replayed comes first, then the one error line
        from .options import print_notes, print_skipped

        print_notes(exc.notes, exc.label)
        print_skipped(exc.skipped, exc.label)
        return _fail(f"specreplay: error: {exc}", debug)
    except SpecReplayError as exc:
        return _fail(f"specreplay: error: {exc}", debug)
    except KeyboardInterrupt:
        if output_committed():  # the output is in place and complete: the interrupt came too late to matter
            _say("specreplay: interrupted after the output was in place: it is complete (its summary is not printed)")
            return EXIT_OK
        _say("specreplay: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OK
    except OSError as exc:
        # The machine said no (disk full, permission, a path that vanished): not our bug, one line.
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"specreplay: error: {where}{exc.strerror or exc}", debug)
    except Exception as exc:  # noqa: BLE001 - the contract: one line, exit 2, never a traceback
        if interrupted():  # a Ctrl-C inside a library's import surfaces as its own error (numpy: ImportError)
            _say("specreplay: interrupted")
            return EXIT_INTERRUPTED
        msg = " ".join(str(exc).split())  # one line, whatever the exception's text
        what = f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__
        return _fail(f"specreplay: internal error: {what} (run with --debug for the traceback)", debug)


def _say(line: str) -> None:
    """One line on stderr that nothing can interrupt halfway (a closed stderr is not an error)."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


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
