"""The ``specreplay`` command: a thin dispatcher over per-topic command modules.

Each module in COMMAND_MODULES exposes ``register(subparsers)``; a command's parser sets
``func`` (args -> exit code). Modules that need torch import it inside ``func``, so ``--help`` and
the offline commands never load it.

The exit-status contract lives here, for every command: 0 all input used, 1 some input skipped
(each listed on stderr by the command), 2 an error (one line on stderr, never a traceback unless
``--debug`` or SPECREPLAY_DEBUG=1), 130 interrupted. A closed output pipe (``| head``) ends the
command quietly with the status it would have had so far: 0.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from typing import Sequence

from .options import HelpFormatter
from ..errors import SpecReplayError
from ..version import package_version

COMMAND_MODULES = (
    "replay.cli.cmd_replay",
    "replay.cli.cmd_scale",
    "replay.cli.cmd_analysis",
    "replay.cli.cmd_recommend",
    "replay.cli.cmd_live",
    "replay.cli.cmd_models",
)

EXIT_OK, EXIT_SKIPPED, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130
DEBUG_ENV = "SPECREPLAY_DEBUG"

MAIN_EPILOG = """\
examples:
  specreplay replay sample_dumps/article_round       # start here: one round's tree and accepted path
  specreplay stats sample_dumps/synthetic_article
  specreplay COMMAND --help                          # each command's options, defaults and examples

Conventions: DUMP is a dump directory or a packed run; -o/--output names what a command writes;
--json prints one JSON object or JSON Lines (each command's help says which); --no-progress turns
off the progress bars, which are drawn only when stderr is a terminal.
Exit status: 0 all input used, 1 some input skipped (each listed on stderr), 2 error (one line on
stderr; --debug or SPECREPLAY_DEBUG=1 adds the traceback), 130 interrupted.
"""


class OneLineParser(argparse.ArgumentParser):
    """argparse with usage errors on one line (exit 2): the CLI's error contract holds for them too.

    Every command's help is formatted alike (replay.cli.options.HelpFormatter: epilogs as written,
    defaults shown), whichever of argparse's two plain formatters a command module names.
    """

    def __init__(self, *args, **kwargs):
        if kwargs.get("formatter_class") in (None, argparse.HelpFormatter, argparse.RawDescriptionHelpFormatter):
            kwargs["formatter_class"] = HelpFormatter
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="specreplay",
        description="Replay, analyse and regenerate tree speculative decoding dumps.",
        epilog=MAIN_EPILOG,
    )
    parser.add_argument("--version", action=VersionAction, help="print the version and exit")
    parser.add_argument("--debug", action="store_true", help=f"print the traceback of an error (also: {DEBUG_ENV}=1)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")  # subparsers inherit OneLineParser
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # a package not installed yet is fine; a broken import inside a module is not
            if exc.name is None or not name.startswith(exc.name):
                raise
            continue
        module.register(sub)
    return parser


class VersionAction(argparse.Action):
    """``--version``: looked up only when asked (package metadata is a directory scan)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"specreplay {package_version()}")
        parser.exit(EXIT_OK)


def debug_requested(argv: Sequence[str]) -> bool:
    """--debug before the command name, or SPECREPLAY_DEBUG set: known before parsing can fail."""
    if os.environ.get(DEBUG_ENV, "").strip() not in ("", "0"):
        return True
    for arg in argv:
        if arg == "--debug":
            return True
        if not arg.startswith("-"):
            return False  # the command name: later tokens belong to the command
    return False


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = debug_requested(argv)
    try:
        return _dispatch(argv)
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


def _dispatch(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        print("specreplay: error: no command given (see the list above)", file=sys.stderr)
        return EXIT_ERROR
    return int(args.func(args) or 0)


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

