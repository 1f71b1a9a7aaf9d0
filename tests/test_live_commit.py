"""Result directories committed atomically and at most once; staging areas of dead owners cleared,
those of live owners left alone. No torch."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from replay.live.sweep.commit import clear_stale, commit, staged
from replay.testing.sweep_commit import is_committed, staging_owner

ROOT = Path(__file__).parents[1]


def test_first_commit_wins_and_a_duplicate_leaves_no_trace(tmp_path):
    with staged(tmp_path, "cfg") as first, staged(tmp_path, "cfg") as second:
        (first.path / "row.json").write_text("first")
        (second.path / "row.json").write_text("second")
        (second.path / "extra").write_text("only in the second run")
        assert not is_committed(tmp_path, "cfg")
        assert commit(first) is True
        assert commit(second) is False
    assert is_committed(tmp_path, "cfg")
    assert sorted(p.name for p in (tmp_path / "cfg").iterdir()) == ["row.json"]
    assert (tmp_path / "cfg" / "row.json").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg"]  # staging dirs and locks are gone


def test_a_failed_task_leaves_nothing(tmp_path):
    try:
        with staged(tmp_path, "cfg") as stage:
            (stage.path / "half").write_text("x")
            raise RuntimeError("task failed")
    except RuntimeError:
        pass
    assert list(tmp_path.iterdir()) == []


def test_clear_stale_removes_only_dead_owners(tmp_path):
    # A child process stages a result and is SIGKILLed mid-task: its lock dies with it.
    code = textwrap.dedent(f"""
        import time
        from replay.live.sweep.commit import staged
        with staged({str(tmp_path)!r}, "dead") as s:
            (s.path / "half").write_text("x")
            print("ready", flush=True)
            time.sleep(600)
    """)
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        lock = next(tmp_path.glob(".staging-dead-*.lock"))
        assert staging_owner(lock)[1] == child.pid
        with staged(tmp_path, "alive") as alive:
            (alive.path / "work").write_text("in progress")
            assert clear_stale(tmp_path) == []  # both owners alive
            child.send_signal(signal.SIGKILL)
            child.wait()
            removed = clear_stale(tmp_path)
            assert [p.name for p in removed] == [lock.name[: -len(".lock")]]
            assert not lock.exists() and not removed[0].exists()
            assert (alive.path / "work").is_file()  # this process still owns it
            assert commit(alive)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alive"]
