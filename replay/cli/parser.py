"""The ``specreplay`` parser: one subcommand per handler of the command modules, and dispatch.

Each module in COMMAND_MODULES exposes ``register(subparsers)``; a command's parser sets
``func`` (args -> exit code), named ``run_<command>`` (tests/test_cli_conventions.py). Modules
that need torch import it inside ``func``, so ``--help`` and the offline commands never load it.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import errno
import importlib
import io
import os
import sys
from collections.abc import Iterator

from replay.io.sources import check_outside_inputs
from replay.util.errors import OutputPathError
from replay.util.pathcheck import FILE, output_kind
from replay.util.version import package_version

from .options import (
    DUMP,
    GIVEN,
    ExitStatus,
    FileOutput,
    HelpFormatter,
    OnceStore,
    check_vocab_size_use,
    exit_status_help,
    int_arg,
)
from .status import DEBUG_ENV, EXIT_ERROR, EXIT_OK

COMMAND_MODULES = (
    "replay.cli.cmd_replay",
    "replay.cli.cmd_scale",
    "replay.cli.cmd_analysis",
    "replay.cli.cmd_compare",
    "replay.cli.cmd_recommend",
    "replay.cli.cmd_live",
    "replay.cli.cmd_sweep",
    "replay.cli.cmd_models",
)


MAIN_EPILOG = """\
examples:
  specreplay replay sample_dumps/article_round       # start here: one round's tree and accepted path
  specreplay stats sample_dumps/synthetic_article
  specreplay COMMAND --help                          # each command's options, defaults and examples

Conventions: DUMP is a dump directory or a packed run; -o/--output names what a command writes;
--json prints one JSON object or JSON Lines (each command's help says which); --no-progress turns
off the progress bars, which are drawn only when stderr is a terminal.
Stdout holds only results; skip reasons, notes and warnings about the input go to stderr.
"""
MAIN_EXITS = ExitStatus(error=f"; --debug or {DEBUG_ENV}=1 adds the traceback")


class OneLineParser(argparse.ArgumentParser):
    """argparse with usage errors on one line (exit 2): the CLI's error contract holds for them too.

    Every command's help is formatted alike (replay.cli.options.HelpFormatter: epilogs as written,
    defaults shown), whichever of argparse's two plain formatters a command module names.
    """

    def __init__(self, *args, **kwargs):
        if kwargs.get("formatter_class") in (None, argparse.HelpFormatter, argparse.RawDescriptionHelpFormatter):
            kwargs["formatter_class"] = HelpFormatter
        super().__init__(*args, **kwargs)
        self.register("type", int, int_arg)  # every type=int option: an int64 or a usage error naming it
        for name in (None, "store"):  # every option that takes a value: once (OnceStore)
            self.register("action", name, OnceStore)

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        parsed, extras = super().parse_known_args(args, namespace)
        vars(parsed).pop(GIVEN, None)  # OnceStore's record of what was given, not an option
        return parsed, extras

    def _parse_known_args(self, arg_strings, *rest, **kwargs):
        self.typed_words = tuple(arg_strings)  # for option_as_typed
        try:
            return super()._parse_known_args(arg_strings, *rest, **kwargs)
        except argparse.ArgumentError as exc:
            action = next(
                (a for a in self._actions if exc.argument_name and argparse._get_action_name(a) == exc.argument_name),
                None,
            )
            if action is not None:
                exc.argument_name = option_as_typed(self, action)
            raise

    def _get_values(self, action: argparse.Action, arg_strings):
        self.last_words = tuple(arg_strings)  # the words as typed, for OnceStore's message
        return super()._get_values(action, arg_strings)

    def _get_value(self, action: argparse.Action, arg_string: str):
        """An option given an empty value (``--grid ""``) would do nothing, or what leaving it out
        does: refused (docs/cli.md), as every other option that would do nothing."""
        if action.option_strings and not arg_string.strip():
            raise argparse.ArgumentError(action, f"empty value {arg_string!r}: give a value or leave the option out")
        return super()._get_value(action, arg_string)

    def error(self, message: str):
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}{self._list_hint(message)} (see {self.prog} --help)\n")

    def _list_hint(self, message: str) -> str:
        """A missing DUMP after an option that takes a list: the list took it (``--configs X DUMP``)."""
        lists = [a.option_strings[-1] for a in self._actions if a.option_strings and a.nargs in ("+", "*")]
        if not (lists and message.startswith("the following arguments are required") and DUMP in message):
            return ""
        return (
            f"; an option that takes a list ({', '.join(lists)}) takes every word after it, a DUMP too: "
            "put DUMP before it, or end the list with --"
        )


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="specreplay",
        description="Replay, analyse and regenerate tree speculative decoding dumps.",
        epilog=MAIN_EPILOG + exit_status_help(MAIN_EXITS),
    )
    parser.exit_status = MAIN_EXITS  # type: ignore[attr-defined]  # as add_command records a command's
    parser.add_argument("--version", action=VersionAction, help="print the version and exit")
    parser.add_argument("--debug", action="store_true", help=f"print the traceback of an error (also: {DEBUG_ENV}=1)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")  # subparsers inherit OneLineParser
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


class VersionAction(argparse.Action):
    """``--version``: looked up only when asked (package metadata is a directory scan)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"specreplay {package_version()}")
        parser.exit(EXIT_OK)


def dispatch(argv: list[str]) -> int:
    """Parse ``argv`` and run its command's handler; its return value is the exit status."""
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:  # told by the command that was typed, with its option nearest to each typo
        chosen = _chosen(parser, args)
        chosen.error(f"unrecognized arguments: {' '.join(extras)}{_nearest_options(chosen, extras)}")
    if not getattr(args, "func", None):
        parser.print_help()
        print("specreplay: error: no command given (see the list above)", file=sys.stderr)
        return EXIT_ERROR
    chosen = _chosen(parser, args)
    outputs, dumps = _outputs_and_dumps(chosen, args)
    check_outside_inputs(outputs, dumps)
    files = check_file_formats(chosen, args)
    check_vocab_size_use(args)
    with naming_outputs([value for _, value, _ in outputs]):
        if any(is_stdout(path) for path in files):  # the pipe reads the file alone; the command's text goes aside
            with contextlib.redirect_stdout(sys.stderr):
                return int(args.func(args) or 0)
        return int(args.func(args) or 0)


# errors only a write gives: about the outputs, whichever file of theirs was being written
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


@contextlib.contextmanager
def naming_outputs(paths: list[str]) -> Iterator[None]:
    """A write error without a file name (a full disk: ENOSPC from a write; WRITE_ERRNOS) names the
    command's output paths, ``paths``, as every write error does (docs/cli.md, "Output paths"): the
    writer that failed may be any of the commands' own (a packed run, a report page, a staged table).
    Other unnamed OSErrors (a download's network error) say nothing of the outputs and pass."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or not paths or exc.errno not in WRITE_ERRNOS:
            raise
        raise OutputPathError(f"{' or '.join(paths)}: cannot be written: {exc.strerror or exc}") from exc


def check_file_formats(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """Every output file given names one of the formats its option writes (FileOutput), before any
    work (a usage error otherwise); the output files given."""
    files = []
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if value is not None and output_kind(action.type) == FILE:
            if not isinstance(action, FileOutput):
                raise TypeError(
                    f"{parser.prog} {action.option_strings}: an output file declares its formats (FileOutput)"
                )
            if action.formats.named(value) is None:
                parser.error(f"argument {option_as_typed(parser, action)}: {action.formats.refusal(value)}")
            files.append(value)
    return files


def option_as_typed(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """How a usage error names ``action``: "-o/--output", as argparse does, unless the words parsed
    gave it only by a hidden alias (replay.cli.options.add_hidden_alias): then that alias, the
    option the user typed (``--table``), not one the user never wrote."""
    aliases = [s for s, a in parser._option_string_actions.items() if a is action and s not in action.option_strings]
    words = getattr(parser, "typed_words", ())

    def typed(option: str) -> bool:
        return any(w == option or w.startswith(option + "=") for w in words)

    if aliases and not any(typed(s) for s in action.option_strings):
        return next((s for s in aliases if typed(s)), "/".join(action.option_strings))
    return argparse._get_action_name(action) or action.dest


def is_stdout(path: str) -> bool:
    """Whether ``path`` is this process's stdout itself (``-o /dev/stdout``, or the file stdout is
    redirected to)."""
    try:
        mine, theirs = os.stat(path), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        return False
    return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)


def _nearest_options(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """'; --temprature: did you mean --temperature?' for each unknown option that is close to one of
    the command's. Words after ``--`` are positionals to argparse: an option there is told as such (one
    of the command's own is left over only there, argparse dropping the ``--`` it ended a list with)."""
    every = {o for a in parser._actions for o in a.option_strings}
    known = [o for o in every if o.startswith("--")]
    cut = extras.index("--") if "--" in extras else len(extras)
    hints, positional = [], []
    for i, word in enumerate(extras):
        name = word.split("=", 1)[0]
        if word.startswith("-") and word != "--" and (i > cut or name in every):
            positional.append(word)
        elif word.startswith("--") and i < cut:
            near = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
            hints += [f"{name}: did you mean {near[0]}?"] if near else []
    if positional:
        hints.append(f"words after -- are not options: {' '.join(positional)} (put options before --)")
    return "".join(f"; {h}" for h in hints)


def _chosen(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command parser that ``args`` came from (``models fetch`` is two levels down)."""
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, subs[0].dest, None) if subs else None
        if name is None:
            return parser
        parser = subs[0].choices[name]


def _outputs_and_dumps(parser: argparse.ArgumentParser, args: argparse.Namespace):
    """Every output option given (declared by its type, replay.util.pathcheck) and every DUMP value."""
    outputs, dumps = [], []
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if value is None:
            continue
        kind = output_kind(action.type)
        if kind is not None:
            outputs.append(("/".join(action.option_strings), value, kind))
        elif action.metavar == DUMP and not action.option_strings:
            dumps.extend(value if isinstance(value, list) else [value])
    return outputs, dumps
