"""The conventions every ``specreplay`` command's options follow, in one place.

- Inputs: a dump directory or packed run is the positional ``DUMP`` (``DUMP ...`` when several).
- Outputs: ``-o/--output`` names where a command writes. Old spellings (``--out``, ``--table``,
  ``--export``) stay as hidden aliases of the same option, so existing scripts keep working; they
  are not shown in ``--help``, and an error names the spelling typed (replay.cli.parser.option_as_typed).
- ``--json`` says in its help whether it prints one JSON object or JSON Lines.
- ``--no-progress`` on every command that can draw a progress bar (bars need a terminal anyway:
  replay.util.progress.progress_enabled).
- ``--help`` shows every non-empty default (HelpFormatter).
- A command is declared with add_command (its help line, description, examples, handler
  ``run_<command>``); commands that read dumps share add_dump_options / options_from_args.
- Skipped inputs are listed one per stderr line (print_skipped; a long listing is folded by reason) and
  give exit status 1; notes and
  warnings about how the files were read go to stderr too (print_reading), and so does the one note
  that confirms what a command wrote (note_written). Stdout keeps only results.
- Not one round replayed is an error (exit 2) in every command (require_rounds): the skip reasons
  are listed first, then one error line, with a "did you mean validate_..." hint for near-miss names.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from replay.core.config_grammar import parse_spec
from replay.core.json_figures import figures_text
from replay.core.temperature import format_temperature
from replay.core.vocab import LAYOUTS
from replay.engine.options import ReplayOptions
from replay.io.dumpnames import INT64_MAX, INT64_MIN, fits_int64, parse_round_key
from replay.io.formats.matrix_io import RawSpec
from replay.io.skipped import Skipped, why_no_rounds
from replay.io.step0 import parse_offset
from replay.util.errors import NoRoundsError, SpecReplayError
from replay.util.file_formats import FileFormats
from replay.util.pathcheck import output_file
from replay.util.words import counted

from .status import DEBUG_ENV

# The exit-status contract of every command (replay.cli.main keeps it).

DUMP = "DUMP"  # the one name of a dump directory or packed run, in every command's usage line
DUMP_HELP = "dump directory, or a packed run (specreplay pack)"
JSON_LINES_HELP = "print JSON Lines, one round per line"
JSON_OBJECT_HELP = "print one JSON object on stdout"
NO_PROGRESS_HELP = "no progress bar on stderr (bars are drawn only when stderr is a terminal)"
OUTPUT_OPTIONS = ("-o", "--output")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Text with line breaks (epilogs: examples) as written, one-paragraph descriptions wrapped to
    the terminal; ``(default: X)`` after every option whose default is worth saying (not None, not
    False) unless its help already says it."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text.strip():
            return super()._fill_text(text, width, indent)
        return argparse.HelpFormatter._fill_text(self, text, width, indent)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            action.option_strings
            and default not in (None, False, argparse.SUPPRESS)
            and "default" not in text
            and text is not argparse.SUPPRESS
        ):
            text += " (default: %(default)s)"
        return text


# A listing longer than this is folded by reason: unfolded, a run of 10^5 rounds without validate
# scores prints 100,001 identical lines (17 MB of stderr) that hide the one line that matters.
SKIP_LINES_LIMIT = 20
SKIP_LINES_PER_REASON = 3  # shown in full before a folded reason's count


LEFT_OUT = ": rounds, or a DUMP of which not one round could be replayed (the other DUMPs are used)"  # status 1 of a command of several DUMPs


@dataclass(frozen=True)
class ExitStatus:
    """The statuses one command can exit with (docs/cli.md "Exit status"); add_command puts them in its
    --help, worded by exit_status_help. ``skipped``: what status 1 lists beyond "each listed on
    stderr", None where the command reads no input it could skip (no status 1); ``error``: what
    status 2 adds; ``rounds``: what it does with rounds ("replayed"), not one of them an error; None
    where it reads no rounds."""

    skipped: str | None = ""
    error: str = ""
    rounds: str | None = "replayed"


RUNS_ONLY = ExitStatus(None, rounds=None)  # a command that reads no dump: done, an error, or interrupted


def exit_status_help(exits: ExitStatus) -> str:
    """The one wording of every command's "Exit status" paragraph, wrapped as the epilogs are."""
    parts = ["0 all input used" if exits.skipped is not None else "0 done"]
    if exits.skipped is not None:
        parts.append(f"1 some input skipped, each listed on stderr{exits.skipped}")
    rounds = f"; not one round {exits.rounds} is an error too, its skip reasons listed first" if exits.rounds else ""
    parts += [f"2 error (one line on stderr{exits.error}{rounds})", "130 interrupted"]
    return textwrap.fill(f"Exit status: {'; '.join(parts)}.", width=100) + "\n"


def skipped_lines(skipped: Sequence[Skipped], labelled: bool = False) -> list[str]:
    """The listing of skipped inputs: one line each up to SKIP_LINES_LIMIT; beyond, each reason's
    first SKIP_LINES_PER_REASON inputs in full, then one line counting the rest with their first
    and last names, reasons in the order they first occur. An entry that skips nothing (a
    disagreement with the manifest) is never folded. ``labelled``: a run label comes before each
    line (Skipped.line_under)."""
    if len(skipped) <= SKIP_LINES_LIMIT:
        return [s.line_under(labelled) for s in skipped]
    groups: list[list[Skipped]] = []
    by_reason: dict[str, list[Skipped]] = {}
    for s in skipped:
        kind = _reason_kind(s.reason)
        if s.skips_nothing:  # a group of its own: the folded line words its entries as skipped inputs
            groups.append([s])
        elif kind in by_reason:
            by_reason[kind].append(s)
        else:
            by_reason[kind] = [s]
            groups.append(by_reason[kind])
    lines = []
    for group in groups:
        lines += [s.line_under(labelled) for s in group[:SKIP_LINES_PER_REASON]]
        rest = group[SKIP_LINES_PER_REASON:]
        if len(rest) == 1:
            lines.append(rest[0].line_under(labelled))
        elif rest:
            same = "" if all(s.reason == rest[0].reason for s in rest) else ", up to the names and numbers in it"
            lines.append(
                f"skipped {len(rest):,} more for the same reason{same} ({rest[0].what} … {rest[-1].what}): {rest[0].reason}"
            )
    return lines


def _reason_kind(reason: str) -> str:
    """A reason with its file names and numbers blanked: the reasons of one kind, round after round,
    differ only there (each names its own file, round and row)."""
    return re.sub(r"\d+", "#", re.sub(r"\S*/\S*", "PATH", reason))


def print_skipped(skipped: Iterable[Skipped], label: str | None = None) -> None:
    """The listing that goes with exit status 1 (skipped_lines), on stderr; ``label`` names the run
    when there are several."""
    run = f"{label}: " if label else ""
    for line in skipped_lines(list(skipped), labelled=bool(label)):
        print(f"specreplay: {run}{line}", file=sys.stderr)


def note_files_left(out_dir: str | Path, written: Iterable[str | Path]) -> None:
    """One note when ``out_dir`` holds files this run did not write (an earlier run's, or the
    user's): they stay as they were, and are not this run's output."""
    from replay.util.atomic import not_written

    left = not_written(out_dir, {Path(w).name for w in written})
    if left:
        shown = ", ".join(left[:3]) + (f", … ({len(left)} in all)" if len(left) > 3 else "")
        note_on_stderr(f"note: {out_dir} also holds file(s) this run did not write, left as they were: {shown}")


def note_written(
    path: str | Path, what: str = "", listing: Iterable[str] = (), files: Sequence[str | Path] = ()
) -> None:
    """How every command confirms what it wrote, one note on stderr (stdout is the command's answer,
    and may be the very file written: parser.dispatch): "wrote [WHAT to ]PATH[: LISTING]". ``what``
    says how much (rows, rounds); ``listing`` adds facts about it (pack's groups, size and sha256);
    ``files``, written into the directory ``path``, are counted and named in the same one line."""
    if files:
        path, what, listing = f"{Path(path)}/", what or counted(len(files), "file"), [Path(f).name for f in files]
    shown = ", ".join(listing)
    note_on_stderr(f"wrote {what + ' to ' if what else ''}{path}{': ' + shown if shown else ''}")


def note_on_stderr(line: str) -> None:
    """One note line on stderr, as every command prints its notes."""
    print_notes([line])


def print_notes(lines: Iterable[str], label: str | None = None) -> None:
    """Notes and warnings about how the input was read ("note: ...", "warning: ..."), one per stderr line."""
    run = f"{label}: " if label else ""
    for line in lines:
        print(f"specreplay: {run}{line}", file=sys.stderr)


def print_grid_skipped(skipped: Iterable[str]) -> None:
    """The grid combinations a --grid list left out (each with its reason), on stderr."""
    print_notes(f"skipped grid combination {s}" for s in skipped)


def print_json(body: dict) -> None:
    """A command's --json output: one JSON object on stdout (JSON_OBJECT_HELP), its numbers by
    replay.core.json_figures' rule."""
    sys.stdout.write(figures_text(body, indent=1) + "\n")


def add_json_csv(p: argparse.ArgumentParser, json_help: str, csv_help: str) -> None:
    """--json (one JSON object) or --csv, one of them."""
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help=JSON_OBJECT_HELP + json_help)
    out.add_argument("--csv", action="store_true", help=csv_help)


def print_reading(rep, label: str | None = None) -> None:
    """Everything a replay has to say about its input, on stderr: its warnings, then each skip."""
    print_notes(getattr(rep, "warnings", ()), label)
    print_skipped(rep.skipped, label)


def sampled_run_note(manifest, directory: str) -> str | None:
    """The note that a greedy replay of a run sampled at T > 0 (its manifest's ``temperature``) is a
    counterfactual: the accepted and committed tokens the run itself had are those the target drew."""
    t = manifest.temperature
    if t is None or not t > 0:
        return None
    return (
        f"note: {manifest.path or 'manifest.json'} records a run sampled at T = {format_temperature(t)} (field temperature): this "
        "replay is the greedy walk (a child is accepted when it is the target's top-1), so its accepted and "
        f"committed tokens are not the ones the run committed; `specreplay replay {shlex.quote(directory)} --temperature "
        f"{format_temperature(t)}` "
        "gives the expected acceptance at the run's T"
    )


def no_rounds_error(
    where: str, skipped: Sequence[Skipped], notes: Sequence[str] = (), label: str | None = None
) -> NoRoundsError:
    """The error of a run without a single replayed round (exit 2 in every command); replay.cli.main
    lists ``notes`` and ``skipped`` on stderr before its line."""
    return NoRoundsError(f"{where}: no round could be replayed{why_no_rounds(skipped)}", skipped, tuple(notes), label)


def no_rounds_in_runs(dirs: Sequence[str], temperature: float | None = None) -> SpecReplayError:
    """The error when none of several runs has a round to use (each run's reasons listed on stderr
    before it; one run: no_rounds_error), in every command: "no round could be replayed [at T = 0.7] in A, B"."""
    at = "" if temperature is None else f" at T = {format_temperature(temperature)}"
    return SpecReplayError(f"no round could be replayed{at} in {', '.join(dirs)} (reasons listed above)")


def require_rounds(rep, replayed: int) -> None:
    """Raise no_rounds_error unless ``replayed`` rounds of ``rep`` (a RunReplay) > 0."""
    if not replayed:
        raise no_rounds_error(rep.directory, rep.skipped, getattr(rep, "warnings", ()))


def add_command(
    sub: argparse._SubParsersAction,
    name: str,
    func: Callable[[argparse.Namespace], int],
    *,
    help: str,
    description: str,
    epilog: str,
    exits: ExitStatus,
) -> argparse.ArgumentParser:
    """One command: its line in the command list (``help``), its ``--help`` text (description,
    then the epilog with its examples, as written, then its exit statuses) and its handler ``run_<name>``."""
    epilog += exit_status_help(exits)
    p = sub.add_parser(name, help=help, description=description, epilog=epilog, formatter_class=HelpFormatter)
    p.exit_status = exits  # type: ignore[attr-defined]  # what its help says (tests/test_cli_conventions.py)
    p.set_defaults(func=func)
    # SUPPRESS: the command's --debug sets the flag but its absence never clears the top-level one
    p.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help=f"print the traceback of an error (also: {DEBUG_ENV}=1)",
    )
    return p


def add_dump_input(
    p: argparse.ArgumentParser, dest: str = "dir", many: bool = False, help: str = DUMP_HELP
) -> argparse.Action:
    """The positional input: ``DUMP``, or ``DUMP ...`` with ``many``."""
    return p.add_argument(dest, nargs="+" if many else None, metavar=DUMP, help=help)


def add_output(
    p: argparse.ArgumentParser,
    type: Callable[[str], str],
    help: str,
    *,
    dest: str,
    metavar: str,
    required: bool = False,
    aliases: Sequence[str] = (),
    formats: FileFormats | None = None,
) -> argparse.Action:
    """``-o/--output`` stored in ``dest``; ``aliases`` are the command's old spellings, hidden;
    ``formats``: those of an output file (add_output_file)."""
    file = {"action": FileOutput, "formats": formats} if formats else {}
    action = p.add_argument(
        *OUTPUT_OPTIONS, dest=dest, type=type, metavar=metavar, required=required, help=help, **file
    )
    add_hidden_alias(p, action, *aliases)
    return action


def add_output_file(p: argparse.ArgumentParser, *flags: str, formats: FileFormats, **kwargs) -> argparse.Action:
    """An option naming a file the command writes, in one of ``formats`` (FileOutput)."""
    return p.add_argument(*flags, type=output_file, action=FileOutput, formats=formats, **kwargs)


def add_hidden_alias(p: argparse.ArgumentParser, action: argparse.Action, *aliases: str) -> None:
    """Let ``aliases`` set ``action`` too, without listing them in usage or help; an error names
    an alias only when it is what the user typed (replay.cli.parser.option_as_typed).

    A second, help-suppressed action would break ``required=True`` (argparse would count only the
    visible one as given), so the old spelling is routed to the same action instead.
    """
    for alias in aliases:
        if alias in p._option_string_actions:
            raise ValueError(f"{p.prog}: alias {alias} is already an option")
        p._option_string_actions[alias] = action


def writing_bar(args: argparse.Namespace, what: str):
    """The "writing WHAT" bar of a command's output phase (replay.util.progress.progress_while): on a
    terminal's stderr only, never with --no-progress."""
    from replay.util.progress import progress_enabled, progress_while

    return progress_while(f"writing {what}", progress_enabled(args.no_progress))


def add_no_progress(p: argparse.ArgumentParser) -> argparse.Action:
    return p.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)


def int_arg(text: str) -> int:
    """argparse type of every ``type=int`` option (OneLineParser registers it for int): an integer
    that an int64 holds, as every count, seed and offset becomes one; a larger one would be taken
    and then wrap or name files that cannot exist. A non-integer keeps argparse's "invalid int value"."""
    value = int(text)
    if not fits_int64(value):
        raise argparse.ArgumentTypeError(f"expected an integer from {INT64_MIN} to {INT64_MAX}, got {value}")
    return value


def at_least_one(text: str) -> int:
    """argparse type of a count (--top N, --ema-window N): an integer of at least 1. 0 or -2 would
    otherwise be taken quietly (``--top -2`` would show all configs but two)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer of at least 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer of at least 1, got {value}")
    if value > INT64_MAX:
        raise argparse.ArgumentTypeError(f"expected an integer from 1 to {INT64_MAX}, got {value}")
    return value


def gamma_threshold_arg(text: str) -> float | None:
    """``--gamma-threshold X``: a gammaThreshold (replay.core.config.gamma_threshold_problem); 0, the
    config grammar's "off", is no simulated stop (None), as when the option is not given."""
    from replay.core.config import gamma_threshold_problem

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}") from None
    problem = gamma_threshold_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(problem.replace("must be", "expected"))
    return value or None


def temperature_arg(text: str) -> float:
    """``--temperature T``: replay.core.temperature.check_temperature, as argparse reports a bad value."""
    from replay.core.temperature import check_temperature

    try:
        return check_temperature(text)
    except ValueError as exc:  # its words, less the "temperature: " argparse's "argument --temperature:" says
        raise argparse.ArgumentTypeError(str(exc).removeprefix("temperature: ")) from None


def add_sampling_options(p: argparse.ArgumentParser) -> None:
    """``--temperature`` / ``--vocab-size``: sampling-mode replay (docs/analysis.md "Sampling-mode replay")."""
    p.add_argument(
        "--temperature",
        type=temperature_arg,
        default=None,
        metavar="T",
        help="expected acceptance when the target samples at temperature T (0 = greedy), with bounds "
        "where the dump's top-K scores do not determine it; needs scores on the validate rows, or "
        "node_logprobs recorded at T (exact; docs/dump-format.md)",
    )
    p.add_argument(
        "--vocab-size",
        type=at_least_one,
        default=None,
        metavar="V",
        help="the target's vocabulary size: bounds the unrecorded tail (needed for lower bounds at T > 1); "
        "default: manifest.json's vocab_size, and a different value is an error; only with --temperature",
    )
    p.set_defaults(vocab_needs_temperature=True)  # check_vocab_size_use: --vocab-size alone does nothing


def check_vocab_size_use(args: argparse.Namespace) -> None:
    """Refuse --vocab-size without --temperature on a command whose only use of it is the sampling
    replay (add_sampling_options): the greedy replay never reads it (docs/cli.md: options that would do nothing are refused)."""
    if getattr(args, "vocab_needs_temperature", False) and args.vocab_size is not None and args.temperature is None:
        raise SpecReplayError(
            f"--vocab-size {args.vocab_size} without --temperature: the vocabulary size only bounds the sampling "
            "replay's tail; add --temperature T, or drop --vocab-size"
        )


def refuse_at_temperature(given: list[str], why: str) -> None:
    """Options that would do nothing with --temperature (``given``, their flags): refused before any work."""
    if given:
        flags = " and ".join(given)
        raise SpecReplayError(f"{flags} with --temperature: {why}; drop {flags} or --temperature")


def sampling_vocab(args: argparse.Namespace, manifest) -> int | None:
    """--vocab-size, else the manifest's vocab_size (replay.engine.sampling.vocab_size_of); exit 2 when they differ."""
    from replay.engine.sampling import vocab_size_of

    return vocab_size_of(args.vocab_size, manifest.vocab_size, manifest.path)


def vocab_sizes_json(used: dict[str, int | None]) -> int | None | dict[str, int | None]:
    """The vocab_size a --json body reports: the one every run used, else run label -> its own."""
    values = set(used.values())
    return next(iter(values)) if len(values) <= 1 and used else (dict(used) if used else None)


def print_unrecorded_temperature(command: str, temperature: float, manifest) -> None:
    """The note of a T > 0 the manifest records no node_logprobs for while it records some at other
    temperatures: every round then has the top-K bounds, not the exact values."""
    from replay.core.sampling_recorded import recorded_column

    recorded = manifest.node_logprob_temperatures
    if recorded and temperature > 0 and recorded_column(temperature, recorded) is None:
        print(
            f"specreplay {command}: note: manifest.json records node_logprobs at T = "
            f"{', '.join(format_temperature(float(r)) for r in recorded)}, not at T = {format_temperature(temperature)}: "
            "the numbers are the top-K bounds (the exact ones need one of those temperatures as recorded)",
            file=sys.stderr,
        )


def print_missing_node_logprobs(
    command: str, temperature: float, manifest, missing: int, gaps: tuple[Sequence[str], Sequence[str]] | None = None
) -> None:
    """The note of rounds that fell back to the top-K bounds at a T whose node_logprobs the manifest
    lists. ``gaps``: the names of those rounds, (in the parents layout, whose rows are not tree
    nodes; without node_logprobs in their validate file or packed block), to say which and why."""
    from replay.core.sampling_recorded import recorded_column

    print_unrecorded_temperature(command, temperature, manifest)
    if not missing or recorded_column(temperature, manifest.node_logprob_temperatures) is None:
        return
    why = ""
    if gaps is not None and any(gaps):
        parents, without = gaps
        parts = [f"{len(parents)} in the parents layout, where validate row n is not tree node n ({_some(parents)})"]
        parts += [f"{len(without)} without node_logprobs in their validate file or packed run ({_some(without)})"]
        why = ": " + "; ".join(p for p, names in zip(parts, gaps) if names)
    print(
        f"specreplay {command}: note: manifest.json records node_logprobs at T = {format_temperature(temperature)}, but "
        f"{missing} round(s) here carry none, so their numbers are the top-K bounds{why}",
        file=sys.stderr,
    )


def _some(names: Sequence[str], shown: int = 3) -> str:
    """The first rounds of a list, and how many more: "round 1_2, round 3_4, and 5 more"."""
    head = ", ".join(f"round {n}" for n in names[:shown])
    return head + (f", and {len(names) - shown} more" if len(names) > shown else "")


def print_needs_vocab(command: str, temperature: float) -> None:
    """The note of a run above T = 1 without a vocabulary size (its lower bounds are refused)."""
    print(
        f"specreplay {command}: note: at T = {format_temperature(temperature)} > 1 the lower bounds need the vocabulary size "
        "(--vocab-size V, or vocab_size in manifest.json): a lower bound fed by a validate row with an unnamed tail "
        "is 0 (refused; a row with a zero cell has no tail and keeps its bounds); the upper bounds stand",
        file=sys.stderr,
    )


def parse_key(text: str) -> tuple[int, int]:
    """``--round A_B``: replay.io.dumpnames.parse_round_key, as argparse reports a bad value."""
    return _int64_pair(parse_round_key, text, "A and B must be")


def step0_offset_arg(text: str) -> tuple[int, int]:
    """``--step0-offset N`` or ``A,B`` (replay.io.step0.parse_offset), as argparse reports a bad value."""
    return _int64_pair(parse_offset, text, "expected")


def _int64_pair(parse: Callable[[str], tuple[int, int]], text: str, expected: str) -> tuple[int, int]:
    """``parse(text)``, its ValueError and a pair beyond int64 reported as argparse reports a bad value."""
    try:
        pair = parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not fits_int64(*pair):
        raise argparse.ArgumentTypeError(f"{expected} integers from {INT64_MIN} to {INT64_MAX}, got {text!r}")
    return pair


GIVEN = "_specreplay_given"  # namespace entry while parsing: option dest -> its words as typed


class OnceStore(argparse._StoreAction):
    """Every option that takes a value (OneLineParser's "store"), taken once: argparse would keep the
    last of two (``--table summary --table depth_acceptance`` printed one table) and say nothing."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault(GIVEN, {})
        words = " ".join(getattr(parser, "last_words", ()))
        if self.dest in given:
            several = self.nargs in ("+", "*") or (isinstance(self.nargs, int) and self.nargs > 1)
            fix = "give all its values after one " + self.option_strings[-1] if several else "give it once"
            raise argparse.ArgumentError(self, f"given more than once ({given[self.dest]}, then {words}): {fix}")
        given[self.dest] = words
        super().__call__(parser, namespace, values, option_string)


CSV_FORMATS = FileFormats((".csv",), device="csv")  # a table as CSV text
JSON_FORMATS = FileFormats((".json",), device="json")


class FileOutput(OnceStore):
    """An output file option (``type=output_file``) with the formats it writes (FileFormats), checked
    before any work by replay.cli.parser.dispatch."""

    def __init__(self, *args, formats: FileFormats, **kwargs):
        super().__init__(*args, **kwargs)
        self.formats = formats


def add_dump_options(p: argparse.ArgumentParser) -> None:
    """Options shared by every command that reads a dump directory."""
    p.add_argument(
        "--config",
        help="tree config in any config form: tree.json (single tree or {specTree: [...]}), "
        "6,2x2,1x1, [6]|[2,2]|[1,1], inline JSON (docs/config-grammar.md)",
    )
    p.add_argument("--tree", type=int, default=0, help="which specTree entry to use (default: %(default)s)")
    p.add_argument("--layout", choices=LAYOUTS, help="validate layout (default: manifest, else from shapes)")
    add_reading_options(p)


def add_reading_options(p: argparse.ArgumentParser) -> None:
    """How dump files are read (``pack`` records them in the packed run)."""
    p.add_argument(
        "--step0-offset",
        type=step0_offset_arg,
        default=None,
        help="N or A,B: how many positions step 0's name sits before its round (default 1)",
    )
    p.add_argument("--raw", help="read headerless binary: DTYPE:COLS or DTYPE:draft=N,validate=M[:force]")
    p.add_argument(
        "--scores",
        choices=("auto", "prob", "logprob"),
        default=None,
        help="how scores are stored; auto, file by file: log-probabilities when any value is negative or a row "
        "is all 0, else probabilities "
        "(default: the manifest's score_kind, else auto; a packed run's is the one it was packed with)",
    )


def step0_offset_from_args(args: argparse.Namespace) -> tuple[int, int] | None:
    """``--step0-offset N`` or ``A,B`` (step0_offset_arg read it); None when not given (the manifest
    or the default decides)."""
    return args.step0_offset


def options_from_args(args: argparse.Namespace) -> ReplayOptions:
    return ReplayOptions(
        config=parse_spec(args.config, "--config") if args.config else None,
        tree_index=args.tree,
        step0_offset=step0_offset_from_args(args),
        layout=args.layout,
        raw=RawSpec.parse(args.raw) if args.raw else None,
        score_kind=args.scores,
        only_round=getattr(args, "round", None),
    )
