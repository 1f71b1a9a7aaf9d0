"""An interrupt once a command's output is in place is no error; one before leaves the earlier output.

Ctrl-C during ``report``'s last moments exited 130 "interrupted" although the complete new report
had already been moved in. The commit point is staged_directory's last rename (replay.util.atomic),
which ``report``, ``stats -o`` and ``plot -o`` all write through."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

import replay.util.atomic as atomic
from replay.cli import main
from replay.core.config_grammar import parse_config_text
from replay.testing.synth import write_synthetic_run

TREE = parse_config_text("[3]|[2,2]")


@pytest.fixture(autouse=True)
def sigint_reaches_this_process():
    """A real SIGINT raises here as in a fresh process: a command's first interrupt leaves SIGINT
    ignored and blocked for the rest of its process (interrupt._first_interrupt), so an earlier test
    in this pytest process would otherwise swallow this test's os.kill and let it pass unexercised."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a pending SIGINT is dropped, not raised
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupt(*_args, **_kwargs):
    raise KeyboardInterrupt


def _report(tmp_path: Path) -> tuple[Path, Path]:
    dump = write_synthetic_run(tmp_path / "dump", TREE, 4, seed=3)
    dump = tmp_path / "dump"
    out = tmp_path / "rep"
    assert main(["report", str(dump), "-o", str(out), "--no-progress"]) == 0
    return dump, out


def _listed_files(out: Path) -> list[str]:
    return json.loads((out / ".specreplay-report.json").read_text())["files"]


def test_an_interrupt_right_after_the_last_rename_exits_0_with_the_new_report(tmp_path, monkeypatch, capsys):
    dump, out = _report(tmp_path)
    (out / "index.html").write_text("the earlier report", encoding="utf-8")
    monkeypatch.setattr(atomic, "_remove_old", _interrupt)  # the step after the swap's last rename
    assert main(["report", str(dump), "-o", str(out), "--no-progress"]) == 0
    assert capsys.readouterr().err.splitlines()[-1:] == [
        "specreplay: interrupted after the output was in place: it is complete (its summary is not printed)"
    ]  # told, not silent
    assert (out / "index.html").read_text(encoding="utf-8") != "the earlier report"
    assert all((out / f).is_file() for f in _listed_files(out))


def test_an_interrupt_before_the_commit_exits_130_and_keeps_the_earlier_report(tmp_path, monkeypatch, capsys):
    dump, out = _report(tmp_path)
    (out / "index.html").write_text("the earlier report", encoding="utf-8")
    monkeypatch.setattr(atomic, "_final_dir_mode", _interrupt)  # the commit's first step, before any rename
    assert main(["report", str(dump), "-o", str(out), "--no-progress"]) == 130
    assert "specreplay: interrupted" in capsys.readouterr().err
    assert (out / "index.html").read_text(encoding="utf-8") == "the earlier report"
    assert all((out / f).is_file() for f in _listed_files(out))


@pytest.mark.parametrize("command", ["stats", "plot"])
def test_stats_and_plot_exit_0_when_interrupted_once_their_files_are_in(tmp_path, monkeypatch, command):
    dump = write_synthetic_run(tmp_path / "dump", TREE, 4, seed=3)
    dump = tmp_path / "dump"
    out = tmp_path / "out"
    commit = atomic.commit_output

    def commit_then_interrupt() -> None:
        commit()
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic, "commit_output", commit_then_interrupt)
    assert main([command, str(dump), "-o", str(out), "--no-progress"]) == 0
    assert sorted(p.name for p in out.iterdir())


SWALLOWED = """
import os, signal, sys
import replay.util.atomic as atomic
from replay.cli import main

class Swallows:
    def __del__(self):  # Python hands an exception raised here to sys.unraisablehook: lost
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(100_000):
            pass

def swallow_then(mode):
    def wrapped(path):
        Swallows()
        return mode(path)
    return wrapped

atomic._final_dir_mode = swallow_then(atomic._final_dir_mode)
sys.argv = ["specreplay", "report", sys.argv[1], "-o", sys.argv[2], "--no-progress"]
sys.exit(main())
"""


def test_an_interrupt_that_python_swallowed_still_stops_the_command_before_its_output(tmp_path):
    """A SIGINT whose KeyboardInterrupt is raised inside a __del__ (or a gc or weakref callback) cannot
    propagate; the command must not then replace the earlier output and exit 0 (a flaky two-SIGINT
    test caught it at start-up, where library objects are collected)."""
    import subprocess
    import sys

    dump, out = _report(tmp_path)
    (out / "index.html").write_text("the earlier report", encoding="utf-8")
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-c", SWALLOWED, str(dump), str(out)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    assert (proc.returncode, proc.stderr.splitlines()) == (130, ["specreplay: interrupted"])
    assert (out / "index.html").read_text(encoding="utf-8") == "the earlier report"


def _sigint_once_renamed_to(out: Path, monkeypatch) -> None:
    """A real SIGINT to this process the moment a rename puts something at ``out``: the interrupt
    lands between a staged directory's last rename and whatever the command does next."""
    for name in ("rename", "replace"):
        original = getattr(os, name)

        def renamed(src, dst, *args, _original=original, **kwargs):
            _original(src, dst, *args, **kwargs)
            if Path(dst) == out:
                os.kill(os.getpid(), signal.SIGINT)

        monkeypatch.setattr(os, name, renamed)


@pytest.mark.parametrize("force", [False, True])
def test_pack_exits_0_when_interrupted_once_its_run_is_in_place(tmp_path, monkeypatch, capsys, force):
    """pack's own staging directory (.OUT.packing-PID) commits as every staged directory does."""
    dump = tmp_path / "dump"
    write_synthetic_run(dump, TREE, 4, seed=3)
    out = tmp_path / "pk"
    if force:
        assert main(["pack", str(dump), "-o", str(out), "--no-progress"]) == 0
    _sigint_once_renamed_to(out, monkeypatch)
    argv = ["pack", str(dump), "-o", str(out), "--no-progress", *(["--force"] if force else [])]
    assert main(argv) == 0
    monkeypatch.undo()
    assert (
        capsys.readouterr().err.splitlines()[-1]
        == "specreplay: interrupted after the output was in place: it is complete (its summary is not printed)"
    )
    assert main(["verify-pack", str(out)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dump", "pk"]  # no staging or old run left


def test_pack_interrupted_before_its_commit_exits_130_and_writes_nothing(tmp_path, monkeypatch, capsys):
    dump = tmp_path / "dump"
    write_synthetic_run(dump, TREE, 4, seed=3)
    monkeypatch.setattr(atomic, "commit_output", _interrupt)  # never reached: the interrupt is earlier
    monkeypatch.setattr(atomic, "stop_if_interrupted", _interrupt)
    assert main(["pack", str(dump), "-o", str(tmp_path / "pk"), "--no-progress"]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dump"]
