"""The exit-status contract of every command: 0 all input used, 1 some input skipped (each listed),
2 error with ONE line on stderr naming the option or file, never a traceback (``--debug`` shows it).

Commands are discovered from ``build_parser()``, so a new command is walked automatically through a
missing input path, a bad output path, an unknown option and an invalid value. The live commands
must refuse bad paths before importing torch (checked in a subprocess).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import replay.util.pathcheck as pathcheck
from replay.cli import build_parser, main
from replay.cli.options import DUMP, skipped_lines
from replay.core.config import TreeConfig
from replay.engine.runs import replay_run
from replay.io.dumpwrite import MANIFEST_NAME, StepRecord, write_round
from replay.io.skipped import Skipped
from replay.testing.replayer import replay_directory
from replay.testing.synth import write_synthetic_run
from replay.util.errors import OutputPathError
from replay.util.pathcheck import DIRECTORY, check_output, input_file, output_file, output_kind

ROOT = Path(__file__).resolve().parent.parent
ARTICLE = ROOT / "sample_dumps" / "article_round"
SYNTH = ROOT / "sample_dumps" / "synthetic_article"
SMALL = TreeConfig.from_lists([[2], [1, 1]], [1, 2])
INTERNAL = "specreplay: internal error: ValueError: boom (run with --debug for the traceback)"
# Directories that take no new entry, even from root: /proc (ENOENT), /sys (EPERM / EACCES).
REFUSING_DIRS = [d for d in ("/proc", "/sys") if os.path.isdir(d)]
# Options that write; each must be declared with an output type (so it is checked before any work).
OUTPUT_DESTS = {"out", "output", "export", "plot", "per_round", "table"}


# --- helpers ------------------------------------------------------------------------------------


def leaf_commands() -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    found = []

    def walk(parser, path):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            found.append((path, parser))
            return
        for name, child in subs[0].choices.items():
            walk(child, path + (name,))

    walk(build_parser(), ())
    return found


LEAVES = leaf_commands()
LEAF_IDS = [" ".join(p) for p, _ in LEAVES]


def is_live(parser: argparse.ArgumentParser) -> bool:
    return parser.get_default("func").__module__ in (
        "replay.cli.cmd_live",
        "replay.cli.cmd_sweep",
        "replay.cli.cmd_models",
    )


def required_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    acts = [a for a in parser._actions if a.required or not a.option_strings]
    for group in parser._mutually_exclusive_groups:
        if group.required:
            acts.append(group._group_actions[0])
    return [a for a in acts if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


def value_for(action: argparse.Action, tmp: Path, valid_inputs: bool, valid_files: bool = False) -> str:
    """A value the parser accepts; path-like values are missing paths unless valid_inputs (valid_files:
    only the input files that the parser itself checks exist, so a command's own checks are reached)."""
    if action.choices is not None:
        return str(next(iter(action.choices)))
    if action.type is int:
        return "1"
    if action.type is float:
        return "0.5"
    if output_kind(action.type):
        (tmp / "out").mkdir(exist_ok=True)  # an output's parent must exist (replay.util.pathcheck)
    if output_kind(action.type) == DIRECTORY:
        return str(tmp / "out" / action.dest)
    if action.type is output_file:  # named for a format it writes (replay.cli.options.FileOutput)
        return str(tmp / "out" / f"{action.dest}{action.formats.suffixes[0]}")
    if valid_inputs and not action.option_strings and action.dest in ("dir", "dirs"):
        return str(ARTICLE)
    if (valid_inputs or valid_files) and action.type is input_file:
        f = tmp / "exists.txt"
        f.write_text("1 2 3\n")
        return str(f)
    return str(tmp / "missing" / action.dest)


def skeleton(
    parser: argparse.ArgumentParser, tmp: Path, valid_inputs: bool = False, skip=None, valid_files: bool = False
) -> list[str]:
    argv: list[str] = []
    for action in required_actions(parser):
        if action is skip:
            continue
        value = value_for(action, tmp, valid_inputs, valid_files)
        argv += ([action.option_strings[-1]] if action.option_strings else []) + [value]
    return argv


def call(capsys, argv: list[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own exits (usage errors) keep their status
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, *needles):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)


def subprocess_cli(argv):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("SPECREPLAY_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "replay.cli", *map(str, argv)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


# --- the walk over every command ------------------------------------------------------------------


def test_walk_finds_every_command():
    names = set(LEAF_IDS)
    assert {"replay", "pack", "verify-pack", "batch", "stats", "plot", "compare", "report", "recommend"} <= names
    assert {"generate", "sweep", "cost-curve", "models fetch", "models list"} <= names


@pytest.mark.parametrize("path,parser", LEAVES, ids=LEAF_IDS)
def test_every_output_option_is_checked_up_front(path, parser):
    for action in parser._actions:
        if (
            action.choices is None
            and action.dest in OUTPUT_DESTS
            or (path == ("models", "fetch") and action.dest == "dir")
        ):
            assert output_kind(action.type), (
                f"{' '.join(path)} {action.option_strings}: declare it with output_dir/output_file"
            )


@pytest.mark.parametrize("path,parser", LEAVES, ids=LEAF_IDS)
def test_missing_input_path_is_one_line_exit_2(path, parser, tmp_path, capsys):
    argv = skeleton(parser, tmp_path)
    if str(tmp_path / "missing") not in " ".join(argv):
        # no required path: the first optional path-like option gets an existing file instead of a directory
        action = next(a for a in parser._actions if a.type in (Path, input_file) or output_kind(a.type))
        (tmp_path / "afile").write_text("x")
        argv += [action.option_strings[-1], str(tmp_path / "afile")]
        needle = str(tmp_path / "afile")
    else:
        needle = str(tmp_path / "missing")
    code, out, err = call(capsys, [*path, *argv])
    assert_one_line_error(code, err, needle)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*")), "wrote output before failing"


WRITERS = [(p, parser) for p, parser in LEAVES if any(output_kind(a.type) for a in parser._actions)]


def test_commands_with_outputs_are_found():
    assert {
        "pack",
        "batch",
        "stats",
        "plot",
        "compare",
        "report",
        "generate",
        "sweep",
        "cost-curve",
        "models fetch",
    } == {" ".join(p) for p, _ in WRITERS}


@pytest.mark.parametrize("path,parser", WRITERS, ids=[" ".join(p) for p, _ in WRITERS])
def test_bad_output_path_names_the_option(path, parser, tmp_path, capsys):
    outputs = [a for a in parser._actions if output_kind(a.type)]
    afile = tmp_path / "afile"
    afile.write_text("x")
    (tmp_path / "adir").mkdir()
    for action in outputs:
        bad_values = [afile / "sub" / "x.csv"]  # under a file: cannot be created
        bad_values.append(afile if output_kind(action.type) == DIRECTORY else tmp_path / "adir")  # wrong kind
        # refused whatever the permission bits say (root may write anywhere they allow): tried for real
        bad_values += [Path(d) / "x" / "y.csv" for d in REFUSING_DIRS] + [Path(d) / "y.csv" for d in REFUSING_DIRS]
        for bad in bad_values:
            argv = skeleton(parser, tmp_path, valid_inputs=True, skip=action)
            code, _, err = call(capsys, [*path, *argv, action.option_strings[-1], str(bad)])
            assert_one_line_error(code, err, action.option_strings[-1], str(bad))


@pytest.mark.parametrize("path,parser", LEAVES, ids=LEAF_IDS)
def test_unknown_option_is_one_line_exit_2(path, parser, tmp_path, capsys):
    argv = skeleton(parser, tmp_path, valid_inputs=True)
    code, _, err = call(capsys, [*path, *argv, "--no-such-option"])
    assert_one_line_error(code, err, "--no-such-option")


def checked_option(parser: argparse.ArgumentParser) -> argparse.Action | None:
    """The first option whose value argparse checks (a number or a choice)."""
    typed = [a for a in parser._actions if a.option_strings and a.type in (int, float)]
    with_choices = [a for a in parser._actions if a.option_strings and a.choices is not None and a.nargs != 0]
    return (typed or with_choices or [None])[0]


TYPED = [(p, parser) for p, parser in LEAVES if checked_option(parser) is not None]


def test_commands_with_checked_values_are_found():
    assert {" ".join(p) for p, _ in LEAVES} - {" ".join(p) for p, _ in TYPED} == {"verify-pack", "models list"}


@pytest.mark.parametrize("path,parser", TYPED, ids=[" ".join(p) for p, _ in TYPED])
def test_invalid_value_is_one_line_exit_2(path, parser, tmp_path, capsys):
    action = checked_option(parser)
    argv = skeleton(parser, tmp_path, valid_inputs=True, skip=action)
    code, _, err = call(capsys, [*path, *argv, action.option_strings[-1], "not-a-value"])
    assert_one_line_error(code, err, action.option_strings[-1], "not-a-value")


LIVE = [(p, parser) for p, parser in LEAVES if is_live(parser)]


@pytest.mark.slow
@pytest.mark.parametrize("path,parser", LIVE, ids=[" ".join(p) for p, _ in LIVE])
def test_live_commands_fail_before_importing_torch(path, parser, tmp_path):
    """In a fresh interpreter: bad paths and options end with exit 2 before torch is imported."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    cases = [skeleton(parser, tmp_path) + (["--dir", str(afile)] if path[0] == "models" else [])]
    if any(a.type is input_file for a in parser._actions):  # past the parser: the command's own checks
        cases.append(skeleton(parser, tmp_path, valid_files=True))
    outputs = [a for a in parser._actions if output_kind(a.type)]
    if outputs:
        cases.append(
            skeleton(parser, tmp_path, valid_inputs=True, skip=outputs[0])
            + [outputs[0].option_strings[-1], str(afile / "x")]
        )
    cases.append(skeleton(parser, tmp_path, valid_inputs=True) + ["--no-such-option"])
    driver = (
        "import json, sys\n"
        "from replay.cli import main\n"
        "try:\n    code = main(json.loads(sys.argv[1]))\n"
        "except SystemExit as exc:\n    code = exc.code\n"
        "print(json.dumps({'code': code, 'torch': 'torch' in sys.modules}))\n"
    )
    for argv in cases:
        res = subprocess.run(
            [sys.executable, "-c", driver, json.dumps([*path, *argv])],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
            timeout=120,
        )
        report = json.loads(res.stdout.strip().splitlines()[-1])
        assert report == {"code": 2, "torch": False}, (argv, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr, res.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", "{tmp}/missing"],
        ["plot", str(ARTICLE), "-o", "{tmp}/afile"],
        ["stats", str(ARTICLE), "--export", "{tmp}/afile/x"],
        ["compare", str(ARTICLE), "--plot", "{tmp}/afile/x.png"],
        [
            "generate",
            "--pair",
            "x",
            "--config",
            "{tmp}/missing.json",
            "--prompts",
            "{tmp}/afile",
            "--max-new-tokens",
            "2",
            "--out",
            "{tmp}/o",
        ],
        ["models", "fetch", "--dir", "{tmp}/afile"],
        ["replay", str(ARTICLE), "--no-such-option"],
        ["no-such-command"],
    ],
)
def test_as_a_user_runs_it_one_line_no_traceback(argv, tmp_path):
    (tmp_path / "afile").write_text("x")
    r = subprocess_cli([a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr


# --- unexpected exceptions, interrupts, closed pipes ----------------------------------------------


def _boom(args):
    raise ValueError("boom")


def test_unexpected_exception_is_exit_2_one_line(monkeypatch, capsys):
    monkeypatch.delenv("SPECREPLAY_DEBUG", raising=False)
    monkeypatch.setattr("replay.cli.cmd_replay.run_replay", _boom)
    code, _, err = call(capsys, ["replay", str(ARTICLE)])
    assert code == 2 and err.strip() == INTERNAL


@pytest.mark.parametrize("how", ["option", "option after the command", "env"])
def test_debug_shows_the_traceback(how, monkeypatch, capsys):
    monkeypatch.setattr("replay.cli.cmd_replay.run_replay", _boom)
    if how == "env":
        monkeypatch.setenv("SPECREPLAY_DEBUG", "1")
        argv = ["replay", str(ARTICLE)]
    else:
        monkeypatch.delenv("SPECREPLAY_DEBUG", raising=False)
        argv = ["--debug", "replay", str(ARTICLE)] if how == "option" else ["replay", str(ARTICLE), "--debug"]
    code, _, err = call(capsys, argv)
    assert code == 2
    assert err.startswith("Traceback (most recent call last):") and "ValueError: boom" in err
    assert err.strip().splitlines()[-1] == INTERNAL


def test_every_command_accepts_debug_after_its_name(monkeypatch):
    parser = build_parser()
    commands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)][0].choices
    for name, sub in commands.items():
        if sub._subparsers is None or getattr(sub, "_defaults", {}).get("func"):
            assert any("--debug" in a.option_strings for a in sub._actions), name


def test_debug_after_a_double_dash_is_a_value_not_the_option(monkeypatch):
    from replay.cli import debug_requested

    monkeypatch.delenv("SPECREPLAY_DEBUG", raising=False)
    assert debug_requested(["replay", "x", "--debug"])
    assert not debug_requested(["replay", "--", "--debug"])


def test_debug_traceback_also_for_user_errors(capsys, tmp_path):
    code, _, err = call(capsys, ["--debug", "replay", str(tmp_path / "missing")])
    assert code == 2 and "Traceback" in err and err.strip().splitlines()[-1].startswith("specreplay: error: ")


def test_unexpected_exception_in_a_real_process():
    code = (
        "import sys, replay.cli.cmd_replay as c\n"
        "def boom(args):\n    raise ValueError('boom')\n"
        "c.run_replay = boom\n"
        "from replay.cli import main\n"
        f"sys.exit(main(['replay', {str(ARTICLE)!r}]))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("SPECREPLAY_DEBUG", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
    assert r.returncode == 2 and r.stderr.strip() == INTERNAL


def test_keyboard_interrupt_is_130(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr("replay.cli.cmd_replay.run_replay", interrupted)
    code, _, err = call(capsys, ["replay", str(ARTICLE)])
    assert code == 130 and err.strip() == "specreplay: interrupted"


def test_os_error_is_one_line_naming_the_file(monkeypatch, capsys):
    def disk_full(args):
        raise OSError(28, "No space left on device", "/data/out.csv")

    monkeypatch.setattr("replay.cli.cmd_replay.run_replay", disk_full)
    code, _, err = call(capsys, ["replay", str(ARTICLE)])
    assert code == 2 and err.strip() == "specreplay: error: /data/out.csv: No space left on device"


@pytest.mark.slow
def test_closed_pipe_ends_quietly():
    """`specreplay replay DIR --json | head -1`: the reader leaves early; no traceback, no noise."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "replay.cli", "replay", str(SYNTH), "--json"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    first = proc.stdout.readline()
    proc.stdout.close()  # 300 JSON lines (> the 64 KiB pipe buffer): the writer hits the closed pipe
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0
    assert json.loads(first)["round"] and err == ""


# --- output paths -------------------------------------------------------------------------------


def test_check_output_rules(tmp_path, monkeypatch):
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert check_output(tmp_path / "new", pathcheck.DIRECTORY) == tmp_path / "new"
    assert check_output(tmp_path, pathcheck.DIRECTORY) == tmp_path
    assert check_output(afile, pathcheck.FILE) == afile  # overwriting a file is fine
    assert check_output(tmp_path / "x.csv", pathcheck.FILE) == tmp_path / "x.csv"
    (tmp_path / "made.json").mkdir()
    assert check_output(tmp_path / "made.json", pathcheck.DIRECTORY) == tmp_path / "made.json"  # exists: used
    for path, kind, message in [
        (afile, pathcheck.DIRECTORY, "exists and is not a directory"),
        (afile / "x", pathcheck.DIRECTORY, f"cannot be created: {afile} is not a directory"),
        (tmp_path, pathcheck.FILE, "is a directory; expected a file name"),
        (afile / "x.csv", pathcheck.FILE, f"{afile} is not a directory"),
        (afile / "a" / "x.csv", pathcheck.FILE, f"cannot be created: {afile} is not a directory"),
        ("", pathcheck.FILE, "empty path"),
        # nothing but the output's own directory is made (a typo'd parent once appeared at /)
        (tmp_path / "new" / "x.csv", pathcheck.FILE, f"directory {tmp_path}/new does not exist \\(create it first\\)"),
        (tmp_path / "new" / "deeper", pathcheck.DIRECTORY, f"directory {tmp_path}/new does not exist"),
        (tmp_path / "tables.json", pathcheck.DIRECTORY, "ends in .json like a file: this option takes a directory"),
    ]:
        with pytest.raises(OutputPathError, match=message):
            check_output(path, kind)
    assert not (tmp_path / "new").exists()  # checking creates nothing
    # permission bits: root may write anywhere, so the rule is checked against a denying access()
    monkeypatch.setattr(pathcheck.os, "access", lambda p, mode: Path(p) != tmp_path)
    with pytest.raises(OutputPathError, match=f"no permission to write in {tmp_path}"):
        check_output(tmp_path / "new", pathcheck.DIRECTORY)
    with pytest.raises(OutputPathError, match=f"no permission to write in {tmp_path}"):
        check_output(tmp_path / "x.png", pathcheck.FILE)

    # a read-only file system refuses root too: the message names it, not permissions
    class ReadOnly:
        f_flag = pathcheck.os.ST_RDONLY

    monkeypatch.setattr(pathcheck.os, "statvfs", lambda p: ReadOnly())
    for path, kind in [(tmp_path / "new", pathcheck.DIRECTORY), (tmp_path / "x.png", pathcheck.FILE)]:
        with pytest.raises(OutputPathError, match=f"{tmp_path} is on a read-only file system"):
            check_output(path, kind)


@pytest.mark.parametrize(
    "argv,option",
    [
        (["plot", str(ARTICLE), "-o", "{afile}"], "-o/--output"),
        (["report", str(ARTICLE), "-o", "{afile}"], "-o/--output"),
        (["stats", str(ARTICLE), "-o", "{afile}"], "-o/--output"),
        (["stats", str(ARTICLE), "--export", "{afile}"], "--export"),  # a hidden alias, named as typed
        (["compare", str(ARTICLE), "--plot", "{afile}/x.png"], "--plot"),
        (["compare", str(ARTICLE), "--per-round", "{afile}/x.csv"], "--per-round"),
        (["batch", str(ARTICLE), "-o", "{afile}/x.csv"], "-o/--output"),
        (["batch", str(ARTICLE), "--table", "{afile}/x.csv"], "--table"),  # a hidden alias, named as typed
        (["pack", str(ARTICLE), "-o", "{afile}"], "-o/--output"),
        (["pack", str(ARTICLE), "--out", "{afile}"], "--out"),  # a hidden alias, named as typed
    ],
)
def test_outputs_onto_a_file_fail_before_any_work(argv, option, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    code, out, err = call(capsys, [a.replace("{afile}", str(afile)) for a in argv])
    assert_one_line_error(code, err, f"argument {option}: {afile}")
    assert out == "" and sorted(p.name for p in tmp_path.iterdir()) == ["afile"] and afile.read_text() == "x"


def test_check_output_tries_for_real(tmp_path):
    """Permission bits let root write in /proc; the check makes a temporary entry, as the write will."""
    assert REFUSING_DIRS, "no /proc or /sys on this machine"
    for d in REFUSING_DIRS:
        with pytest.raises(OutputPathError, match=f"{d}/r.parquet: cannot be written: {d} takes no new file"):
            check_output(f"{d}/r.parquet", pathcheck.FILE)
        with pytest.raises(OutputPathError, match=f"{d}/nope: cannot be created: {d} takes no new directory"):
            check_output(f"{d}/nope", pathcheck.DIRECTORY)
    before = sorted(os.listdir(tmp_path))
    check_output(tmp_path / "x.csv", pathcheck.FILE)
    check_output(tmp_path / "a", pathcheck.DIRECTORY)
    assert sorted(os.listdir(tmp_path)) == before  # the trial entries are gone


def test_atomic_write_errors_name_the_users_path(tmp_path):
    from replay.util.atomic import atomic_path

    target = tmp_path / "r.csv"
    for raised in (
        OSError(28, "No space left on device"),  # a failed write names no file
        FileNotFoundError(2, "No such file or directory", None),
    ):
        with pytest.raises(OutputPathError) as info, atomic_path(target) as tmp:
            raised.filename = str(tmp) if isinstance(raised, FileNotFoundError) else None
            raise raised
        assert str(info.value) == f"{target}: cannot be written: {raised.strerror}"
        assert os.listdir(tmp_path) == []  # no temporary left behind
    with pytest.raises(OSError) as info, atomic_path(target):  # an error about another file is not ours to rename
        (tmp_path / "missing-input").read_text()
    assert not isinstance(info.value, OutputPathError) and info.value.filename == str(tmp_path / "missing-input")


def test_a_full_device_is_one_line_naming_it(capsys):
    """/dev/full: every write fails with ENOSPC, as a full disk does. Written in place (renaming a
    temporary over it would replace the device node), and the error names /dev/full."""
    code, _, err = call(capsys, ["compare", str(ARTICLE), "--per-round", "/dev/full", "--no-progress"])
    assert_one_line_error(code, err, "specreplay: error: /dev/full: cannot be written: No space left on device")
    assert os.path.exists("/dev/full") and not os.path.isfile("/dev/full")


def test_a_fifo_output_is_written_into_not_replaced(tmp_path, capsys):
    """A FIFO (as /dev/stdout to a pipe is) keeps being a FIFO, and receives the table."""
    import stat

    fifo = tmp_path / "rounds.csv"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader is there, so the writer's open does not block
    try:
        code, _, err = call(capsys, ["compare", str(ARTICLE), "--per-round", str(fifo), "--no-progress"])
        assert code == 0, err
        assert stat.S_ISFIFO(os.stat(fifo).st_mode)
        assert os.read(reader, 1 << 16).decode().startswith("run,config,round,")
    finally:
        os.close(reader)


def test_batch_writes_its_table_to_a_device_or_fifo_and_takes_the_suffix_in_any_case(tmp_path, capsys):
    """`batch -o /dev/null` and `-o rounds.PARQUET` are taken, not refused ("use a .parquet or .csv
    file name"): devices are written in place (docs/cli.md), and a device or FIFO gets CSV."""
    import pandas as pd

    synth = str(ROOT / "sample_dumps" / "synthetic_article")
    code, _, err = call(capsys, ["batch", synth, "-o", "/dev/null", "--no-progress"])
    assert code == 0, err
    fifo = tmp_path / "rounds"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        code, _, err = call(capsys, ["batch", str(ARTICLE), "-o", str(fifo), "--no-progress"])
        assert code == 0, err
        assert os.read(reader, 1 << 16).decode().startswith("round,key_a,key_b,")
    finally:
        os.close(reader)
    upper = tmp_path / "R.PARQUET"
    code, _, err = call(capsys, ["batch", synth, "-o", str(upper), "--no-progress"])
    assert code == 0, err
    assert pd.read_parquet(upper).shape[0] == 300
    code, out, err = call(capsys, ["batch", synth, "-o", str(tmp_path / "rounds.json")])
    assert_one_line_error(code, err, "rounds.json: use a .parquet or .csv file name")


def test_batch_table_on_stdout_leaves_stdout_to_the_table(tmp_path):
    """`batch -o /dev/stdout > x.csv` writes the CSV alone on stdout (the summary goes to stderr), and
    `-o /dev/stdout | head` ends with exit 0, not "cannot be written: Broken pipe"."""
    import pandas as pd

    # at T the table is ~120 KB: more than a pipe holds, so the early reader breaks the pipe
    argv = [sys.executable, "-m", "replay.cli", "batch", "sample_dumps/synthetic_article", "-o", "/dev/stdout"]
    argv += ["--temperature", "0.7"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with open(tmp_path / "x.csv", "w") as out:
        r = subprocess.run(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 0, r.stderr
    assert pd.read_csv(tmp_path / "x.csv").shape[0] == 300
    assert "summary of sample_dumps/synthetic_article" in r.stderr and "sampling at T = 0.7" in r.stderr
    p = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    head = p.stdout.read(200)  # the reader stops early, as `| head` does
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait() == 0 and head.startswith(b"round,key_a,key_b,") and "Broken pipe" not in err, err


def test_compare_per_round_on_stdout_leaves_stdout_to_the_table(tmp_path):
    """`compare --per-round /dev/stdout > f.csv` holds the per-round CSV alone (the comparison goes to
    stderr), as batch's table does: one rule in dispatch for every output file that is stdout."""
    import pandas as pd

    argv = [sys.executable, "-m", "replay.cli", "compare", "sample_dumps/synthetic_article"]
    argv += ["--configs", "[1]|[1]", "--per-round", "/dev/stdout", "--no-progress"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with open(tmp_path / "f.csv", "w") as out:
        r = subprocess.run(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 0, r.stderr
    table = pd.read_csv(tmp_path / "f.csv")
    assert list(table.columns[:3]) == ["run", "config", "round"] and table.shape[0] == 600
    assert "synthetic_article: 300 rounds" in r.stderr and "specreplay: wrote 600 rows to /dev/stdout" in r.stderr


def test_a_symlinked_output_keeps_the_link(tmp_path, capsys):
    real, link = tmp_path / "real.csv", tmp_path / "latest.csv"
    real.write_text("old\n")
    link.symlink_to(real)
    code, _, err = call(capsys, ["compare", str(ARTICLE), "--per-round", str(link), "--no-progress"])
    assert code == 0, err
    assert link.is_symlink() and real.read_text().startswith("run,config,round,")


def test_unwritable_output_directory(tmp_path, capsys, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(pathcheck.os, "access", lambda p, mode: Path(p) != locked and real_access(p, mode))
    code, _, err = call(capsys, ["plot", str(ARTICLE), "-o", str(locked / "plots")])
    assert_one_line_error(code, err, "-o/--output", f"no permission to write in {locked}")


def test_compare_plot_checks_its_format_before_work(tmp_path, capsys):
    code, out, err = call(capsys, ["compare", str(ARTICLE), "--plot", str(tmp_path / "x.jpeg"), "--no-progress"])
    assert_one_line_error(code, err, "--plot", ".png")
    assert out == "" and not any(tmp_path.iterdir())


@pytest.mark.slow
def test_compare_plot_and_per_round_written(tmp_path, capsys):
    (tmp_path / "p").mkdir(), (tmp_path / "q").mkdir()  # a file output's directory must exist
    code, out, err = call(
        capsys,
        [
            "compare",
            str(ARTICLE),
            "--plot",
            str(tmp_path / "p" / "cmp.svg"),
            "--per-round",
            str(tmp_path / "q" / "rounds.csv"),
            "--no-progress",
        ],
    )
    assert code == 0, err
    assert (tmp_path / "p" / "cmp.svg").read_text().lstrip().startswith("<?xml")
    assert (tmp_path / "q" / "rounds.csv").read_text().startswith("run,")
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == ["cmp.svg"]  # no temporary left beside it


def test_tokenizer_gguf_fails_fast_without_partial_output(tmp_path, capsys):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF" + bytes(64))  # a GGUF header is all the check reads
    out_dir = tmp_path / "plots"
    for cmd in (["plot", str(ARTICLE), "-o", str(out_dir)], ["report", str(ARTICLE), "-o", str(out_dir)]):
        code, out, err = call(capsys, [*cmd, "--tokenizer", str(model), "--no-progress"])
        assert_one_line_error(code, err, f"--tokenizer {model}", "GGUF model file")
        assert out == "" and not out_dir.exists()


def test_tokenizer_garbage_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "tokenizer.json"
    bad.write_bytes(b"\xff\xfe not json")
    code, _, err = call(
        capsys, ["plot", str(ARTICLE), "-o", str(tmp_path / "p"), "--tokenizer", str(bad), "--no-progress"]
    )
    assert_one_line_error(code, err, f"--tokenizer {bad}: not a tokenizer.json")
    assert not (tmp_path / "p").exists()


# --- input directories ----------------------------------------------------------------------------

DUMP_READERS = [
    (p, parser)
    for p, parser in LEAVES
    if any(a.dest in ("dir", "dirs") and not a.option_strings for a in parser._actions)
]


@pytest.mark.parametrize("path,parser", DUMP_READERS, ids=[" ".join(p) for p, _ in DUMP_READERS])
def test_empty_directory_is_an_error(path, parser, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.json").write_text(json.dumps(SMALL.to_json()))  # a config is not a dump
    argv = [str(empty) if v == str(ARTICLE) else v for v in skeleton(parser, tmp_path, valid_inputs=True)]
    code, out, err = call(capsys, [*path, *argv])
    assert_one_line_error(code, err, f"{empty}: no dump files in this directory")


DUMP_INPUTS = [(p, parser) for p, parser in LEAVES if any(a.metavar == DUMP for a in parser._actions)]


def test_dump_inputs_are_found():
    assert {"replay", "pack", "verify-pack", "batch", "stats", "plot", "compare", "report", "recommend"} <= {
        " ".join(p) for p, _ in DUMP_INPUTS
    }


@pytest.mark.parametrize("path,parser", DUMP_INPUTS, ids=[" ".join(p) for p, _ in DUMP_INPUTS])
def test_every_dump_reader_says_a_missing_or_non_directory_input_the_same_way(path, parser, tmp_path, capsys):
    """One wording (replay.io.sources.require_directory): verify-pack said "not a packed run"."""
    dump = next(a for a in parser._actions if a.metavar == DUMP)
    for given, told in (("missing", "no such directory"), ("afile", "not a directory (expected")):
        (tmp_path / "afile").write_text("x")
        argv = [
            str(tmp_path / given) if a == str(tmp_path / "missing" / dump.dest) else a
            for a in skeleton(parser, tmp_path)
        ]
        code, _, err = call(capsys, [*path, *argv])
        assert_one_line_error(code, err, f"{tmp_path / given}: {told}")


def test_parent_of_dump_directories_lists_them(tmp_path, capsys):
    parent = tmp_path / "runs"
    for name in ("b_run", "a_run"):
        shutil.copytree(ARTICLE, parent / name)
    (parent / "notes").mkdir()  # no dumps: not listed
    code, _, err = call(capsys, ["replay", str(parent)])
    assert_one_line_error(
        code,
        err,
        f"{parent}: no dump files directly in this directory",
        "these subdirectories hold dumps: a_run, b_run (",
    )
    assert "notes" not in err and "config" not in err


def test_packed_run_is_a_source(tmp_path, capsys):
    code, _, err = call(capsys, ["pack", str(ARTICLE), "-o", str(tmp_path / "run"), "--no-progress"])
    assert code == 0, err
    code, out, err = call(capsys, ["replay", str(tmp_path / "run"), "--json"])
    assert code == 0 and json.loads(out)["accepted_length"] == 3


# --- manifest round count -------------------------------------------------------------------------


@pytest.fixture
def synth4(tmp_path):
    d = tmp_path / "run"
    rounds = write_synthetic_run(d, SMALL, 4, seed=1)
    return d, [r.key for r in rounds]


def _remove_round(d: Path, key) -> None:
    a, b = key
    gone = [
        p
        for p in d.iterdir()
        if p.name.startswith((f"validate_{a}_{b}.", f"draft_step_0_{a - 1}_{b - 1}.", f"draft_step_1_{a}_{b}."))
    ]
    assert len(gone) == 3
    for p in gone:
        p.unlink()


def test_consistent_manifest_exits_0(synth4, capsys):
    d, keys = synth4
    code, out, err = call(capsys, ["replay", str(d), "--json"])
    assert code == 0 and err == "" and len(out.splitlines()) == 4


def test_round_listed_in_manifest_but_missing(synth4, capsys):
    d, keys = synth4
    _remove_round(d, keys[2])
    name = f"{keys[2][0]}_{keys[2][1]}"
    for cmd in (["replay", str(d), "--json"], ["batch", str(d), "--json"], ["stats", str(d), "--csv", "--no-progress"]):
        code, out, err = call(capsys, cmd)
        assert code == 1, (cmd, err)
        assert f"skipped round {name}: listed in manifest.json but no file of this round is in the directory" in err
    code, out, _ = call(capsys, ["replay", str(d)])
    assert code == 1 and "rounds replayed: 3   skipped: 1" in out


def test_rounds_not_listed_in_manifest(synth4, capsys):
    d, keys = synth4
    extra = (900, 916)  # a second run's round written into the same directory
    ids = np.array([[5, 6]], dtype=np.int64)
    write_round(
        d,
        extra,
        (StepRecord(ids), StepRecord(np.array([[7], [8]], dtype=np.int64))),
        StepRecord(np.array([[5], [7], [9], [1], [2]], dtype=np.int64)),
    )
    code, out, err = call(capsys, ["replay", str(d), "--json"])
    assert code == 1 and len(out.splitlines()) == 5  # the extra round is replayed all the same
    assert (
        "manifest.json disagrees with the files: does not list 1 round found here: 900_916 (it lists 4; replayed anyway"
        in err
    )


def test_stated_round_count(synth4, capsys):
    d, keys = synth4
    body = json.loads((d / "manifest.json").read_text())
    body["rounds"] = 5
    (d / "manifest.json").write_text(json.dumps(body))
    code, _, err = call(capsys, ["replay", str(d), "--json"])
    assert code == 1 and "manifest.json disagrees with the files: states 5 round(s); the file names form 4" in err
    body["rounds"] = 4
    (d / "manifest.json").write_text(json.dumps(body))
    assert call(capsys, ["replay", str(d), "--json"])[0] == 0
    body["rounds"] = "four"
    (d / "manifest.json").write_text(json.dumps(body))
    code, _, err = call(capsys, ["replay", str(d)])
    assert_one_line_error(code, err, "manifest.json (rounds): expected a list of round records or a round count")


MANIFEST_READERS = [(p, parser) for p, parser in DUMP_INPUTS if p != ("verify-pack",)]


@pytest.mark.parametrize("path,parser", MANIFEST_READERS, ids=[" ".join(p) for p, _ in MANIFEST_READERS])
def test_a_round_key_listed_twice_is_flagged_like_a_wrong_round_count(synth4, path, parser, capsys, tmp_path):
    """Every command that reads manifest.json says it once, naming the field and the key (read_manifest's rounds), and exits 1 as for any skipped input."""
    d, keys = synth4
    body = json.loads((d / "manifest.json").read_text())
    body["rounds"].append(dict(body["rounds"][1]))
    (d / "manifest.json").write_text(json.dumps(body))
    argv = [str(d) if v == str(ARTICLE) else v for v in skeleton(parser, tmp_path, valid_inputs=True)]
    code, _, err = call(capsys, [*path, *argv])
    told = f"manifest.json disagrees with the files: rounds lists a round more than once: {keys[1][0]}_{keys[1][1]} (rounds[1].key, rounds[4].key)"
    assert code == 1 and err.count(told) == 1, err


def test_a_manifest_disagreement_is_not_counted_as_a_skipped_file(synth4, capsys):
    """The manifest is read and every round replayed: the summary counts no skipped file; records of
    one round that give two root tokens are an error naming the field."""
    d, keys = synth4
    body = json.loads((d / "manifest.json").read_text())
    body["rounds"].append(dict(body["rounds"][1]))
    (d / "manifest.json").write_text(json.dumps(body))
    code, out, _ = call(capsys, ["replay", str(d), "--summary"])
    assert code == 1 and "rounds replayed: 4   skipped: 0; manifest.json disagrees (each listed on stderr)" in out
    code, out, _ = call(capsys, ["stats", str(d), "--temperature", "0.7", "--no-progress"])
    assert code == 1 and "skipped: 0 at T; manifest.json disagrees\n" in out, out
    code, out, err = call(capsys, ["pack", str(d), "-o", str(d.parent / "packed"), "--no-progress"])
    assert code == 1 and out == "" and "specreplay: skipped: 0; manifest.json disagrees (each listed below" in err
    body["rounds"][-1]["root_token"] = body["rounds"][1]["root_token"] + 1
    (d / "manifest.json").write_text(json.dumps(body))
    code, _, err = call(capsys, ["replay", str(d), "--summary"])
    assert_one_line_error(code, err, "manifest.json (rounds[4].root_token): round")
    assert "expected one root token per round" in err


def test_a_manifest_disagreement_among_many_skips_is_listed_in_full(synth4, capsys):
    """Beyond SKIP_LINES_LIMIT entries the listing folds each reason's rest into one "skipped N more"
    line; the disagreement skips nothing, so it keeps its own line and the count is of rounds only."""
    d, keys = synth4
    body = json.loads((d / "manifest.json").read_text())
    absent = [{"key": [1000 + 20 * k, 1016 + 20 * k], "root_token": 5} for k in range(25)]
    body["rounds"] = body["rounds"][1:] + absent  # keys[0] replayed though not listed: one disagreement
    (d / "manifest.json").write_text(json.dumps(body))
    code, _, err = call(capsys, ["replay", str(d), "--json"])
    listed = err.splitlines()
    assert code == 1 and len(listed) == 5, err
    assert listed[3].startswith("specreplay: skipped 22 more for the same reason (round 1060_1076 … round 1480_1496)")
    assert listed[4].startswith("specreplay: manifest.json disagrees with the files: does not list 1 round found here")


def test_entries_that_skip_nothing_are_never_folded():
    """Several disagreements of one kind among many skips of that kind (a listing the folding
    cannot tell apart by its reason): each disagreement in full, worded as Skipped.line words it."""
    reason = "rounds lists a round more than once: 3_4 (rounds[1].key, rounds[4].key)"
    skips = [Skipped(f"round {k}_{k}", reason) for k in range(25)]
    disagreements = [Skipped(MANIFEST_NAME, reason)] * 4
    lines = skipped_lines(skips[:10] + disagreements + skips[10:])
    assert lines.count(disagreements[0].line) == 4 and disagreements[0].line.startswith("manifest.json disagrees")
    assert lines[3].startswith("skipped 22 more for the same reason (round 3_3 … round 24_24)")
    assert len(lines) == 8


def test_manifest_disagreement_identical_in_every_reader(synth4, tmp_path):
    """replay_directory, the batch replay and a packed run list the same disagreement."""
    from replay.io.packed.pack import pack_directory

    d, keys = synth4
    _remove_round(d, keys[0])
    direct = replay_directory(d)
    assert [s.what for s in direct.skipped] == [f"round {keys[0][0]}_{keys[0][1]}"]
    pack_directory(d, tmp_path / "packed")
    for rep in (replay_run(d), replay_directory(tmp_path / "packed"), replay_run(tmp_path / "packed")):
        assert rep.skipped == direct.skipped


def test_plot_unknown_show_round_writes_nothing(tmp_path, capsys):
    code, out, err = call(capsys, ["plot", str(ARTICLE), "-o", str(tmp_path / "p"), "--round", "1_2", "--no-progress"])
    assert_one_line_error(code, err, "--round 1_2: no such round")
    assert out == "" and not (tmp_path / "p").exists()


def test_internal_error_message_is_one_line_even_for_multiline_text(monkeypatch, capsys):
    def multiline(args):
        raise RuntimeError("first\nsecond")

    monkeypatch.delenv("SPECREPLAY_DEBUG", raising=False)
    monkeypatch.setattr("replay.cli.cmd_replay.run_replay", multiline)
    code, _, err = call(capsys, ["replay", str(ARTICLE)])
    assert (
        code == 2
        and err == "specreplay: internal error: RuntimeError: first second (run with --debug for the traceback)\n"
    )


@pytest.mark.parametrize("argv", [[], ["models"]])
def test_no_command_prints_help_and_one_error_line(argv, capsys):
    code, out, err = call(capsys, argv)
    assert code == 2 and "usage:" in out
    assert_one_line_error(code, err, "no ")


@pytest.mark.parametrize(
    "body,field",
    [
        ({"rounds": [{"key": [124, 140], "root_token": "x"}]}, "rounds[0].root_token"),
        ({"rounds": True}, "rounds"),
        ({"encoding": {"format": "raw", "columns": 16, "dtype": "foo"}}, "encoding.dtype"),
        ({"encoding": {"format": "raw", "columns": 16, "score_dtype": "bar"}}, "encoding.score_dtype"),
        ({"encoding": {"format": "raw", "columns": {"draft": "x"}}}, "encoding.columns"),
    ],
)
def test_bad_manifest_field_is_one_line(body, field, tmp_path, capsys):
    d = tmp_path / "dump"
    shutil.copytree(ARTICLE, d)
    (d / "manifest.json").write_text(json.dumps(body))
    code, _, err = call(capsys, ["replay", str(d)])
    assert_one_line_error(code, err, f"manifest.json ({field}): expected")


# --- one rule for every option: a value given twice, an output file's name and its format ---------

TRIED_VALUES = ("1", "1_2", "0.5", "1,1", "{}")  # for the options whose value is parsed (--round, --cost, ...)


def a_value(action: argparse.Action, tmp: Path) -> str:
    """A value ``action`` takes: a choice, a path value_for makes, or one of TRIED_VALUES its type accepts."""
    if action.choices is not None or output_kind(action.type) or action.type in (None, Path, input_file):
        return value_for(action, tmp, valid_inputs=True, valid_files=True)
    for text in TRIED_VALUES:
        try:
            action.type(text)
            return text
        except (ValueError, TypeError, argparse.ArgumentTypeError):
            continue
    raise AssertionError(f"{action.option_strings}: no value tried is taken")


VALUED = [
    (path, parser, action)
    for path, parser in LEAVES
    for action in parser._actions
    if action.option_strings and action.nargs != 0 and not isinstance(action, argparse._AppendAction)
]


@pytest.mark.parametrize(
    "path,parser,action", VALUED, ids=[f"{' '.join(p)} {a.option_strings[-1]}" for p, _, a in VALUED]
)
def test_an_option_of_one_value_given_twice_is_refused(path, parser, action, tmp_path, capsys):
    """`stats --table summary --table depth_acceptance` printed the last table alone, exit 0:
    argparse keeps the last of two. Every option that takes a value (an --append option such as
    --label takes one per use) is given once, or the command stops naming it and both values."""
    from replay.cli.options import OnceStore

    assert isinstance(action, OnceStore), f"{parser.prog} {action.option_strings}: not taken once"
    flag = action.option_strings[-1]
    value = a_value(action, tmp_path)
    with pytest.raises(SystemExit) as exc:
        parser.parse_known_args([flag, value, flag, value])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert flag in err and f"given more than once ({value}, then {value})" in err, err
    several = action.nargs in ("+", "*") or (isinstance(action.nargs, int) and action.nargs > 1)
    assert err.split("): ", 1)[1].startswith(
        f"give all its values after one {flag}" if several else "give it once ("
    ), err


FILE_OUTPUTS = [
    (p, parser, a) for p, parser in LEAVES for a in parser._actions if output_kind(a.type) == pathcheck.FILE
]


@pytest.mark.parametrize(
    "path,parser,action", FILE_OUTPUTS, ids=[f"{' '.join(p)} {a.option_strings[-1]}" for p, _, a in FILE_OUTPUTS]
)
def test_every_output_file_is_named_for_its_format(path, parser, action, tmp_path, capsys):
    """`compare --per-round pr.txt` wrote CSV into a .txt name while `batch -o r.txt` was refused:
    every option that writes a file takes the suffixes of the formats it writes (any case; a device
    where it writes text), checked before any work, a usage error in argparse's words (as a missing output directory is)."""
    from replay.cli.options import FileOutput

    assert isinstance(action, FileOutput), f"{parser.prog} {action.option_strings}: its formats are not declared"
    flag = "/".join(action.option_strings)
    for suffix in action.formats.suffixes:
        assert action.formats.of(flag, "x" + suffix.upper()) == suffix[1:]
    argv = skeleton(parser, tmp_path, valid_inputs=True, skip=action)
    (tmp_path / "out").mkdir(exist_ok=True)
    wrong = str(tmp_path / "out" / "x.txt")
    code, out, err = call(capsys, [*path, *argv, action.option_strings[-1], wrong])
    assert_one_line_error(
        code, err, f"{parser.prog}: error: argument {flag}: {wrong}: use a ", action.formats.suffixes[-1]
    )
    assert err.rstrip().endswith(f"(see {parser.prog} --help)")
    assert not any((tmp_path / "out").iterdir()), "wrote output before failing"


def test_a_table_s_format_is_named_by_its_suffix_or_is_csv_on_a_device():
    """The one naming rule batch -o is checked by and replay.io.table_files writes by."""
    from replay.io.table_files import TABLE_FORMATS, table_format
    from replay.util.errors import SpecReplayError

    expected = {"r.parquet": "parquet", "r.PARQUET": "parquet", "r.csv": "csv", "r.Csv": "csv"}
    expected |= {"/dev/null": "csv", "/dev/stdout": "csv"}
    for name, fmt in expected.items():
        assert table_format(name) == fmt == TABLE_FORMATS.of("-o", name), name
    for name in ("r.txt", "r.parquet.gz", "r"):
        assert table_format(name) is None
        with pytest.raises(SpecReplayError, match=r"-o .*: use a \.parquet or \.csv file name"):
            TABLE_FORMATS.of("-o", name)
