"""Sweeps on a Dask cluster (distributed.LocalCluster-like, worker processes on this machine):
the same table and dumps as the local sweep whatever the number of workers, and nothing lost or
doubled when a worker or the client is SIGKILLed mid-sweep. Timings are never compared."""

import importlib
import json
import os
import signal
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.live_fixtures import kill_sweep_after_rows, live_qwen_pair  # noqa: F401

distributed = pytest.importorskip("distributed")

from analysis.report.sweep_plots import pareto_front  # noqa: E402
from replay.cli import main  # noqa: E402
from replay.live.generate import DecodeOptions  # noqa: E402
from replay.live.models.load import load_pair  # noqa: E402
from replay.live.sweep.cluster import PairSpec, run_sweep_on_cluster, start_local_cluster  # noqa: E402
from replay.live.sweep.directory import OUTCOME_COLUMNS  # noqa: E402
from replay.live.sweep.grid import config_name, parse_grid  # noqa: E402
from replay.live.sweep.runner import run_local_sweep  # noqa: E402
from replay.testing.sweep_commit import staging_owner  # noqa: E402
from replay.testing.tiny import save_hf_dir  # noqa: E402

ROOT = Path(__file__).parents[1]
GRID = "6,2x2,1x1;1,1,1,1;4,2x1,1;2,1x1;1,1,1@0|0.8"
CONFIGS = parse_grid(GRID)[0]
NAMES = [config_name(c) for c in CONFIGS]
PROMPTS = [[1, 2, 3, 4], [50, 7, 8]]
OPTIONS = DecodeOptions(max_new_tokens=10)
WORKERS = 3


@pytest.fixture(scope="module")
def model_dir(live_qwen_pair, tmp_path_factory):
    draft, target = live_qwen_pair
    d = tmp_path_factory.mktemp("cluster_models")
    save_hf_dir(target, d / "target")
    save_hf_dir(draft, d / "draft")
    (d / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    return d


@pytest.fixture(scope="module")
def pair(model_dir):
    return PairSpec(str(model_dir / "draft"), str(model_dir / "target"), "cpu", threads=1)


@pytest.fixture(scope="module")
def local_reference(client, model_dir, tmp_path_factory):
    """The in-process sweep: the models loaded from the same files as the workers load (computed
    after the cluster started, while its workers import torch)."""
    draft, target = load_pair(model_dir / "draft", model_dir / "target")
    out = tmp_path_factory.mktemp("local_sweep")
    run_local_sweep(draft, target, CONFIGS, PROMPTS, OPTIONS, out, repeats=1)
    return out


@pytest.fixture(scope="module")
def client():
    with start_local_cluster(WORKERS) as cluster, distributed.Client(cluster) as c:
        c.wait_for_workers(WORKERS)
        # Every worker imports torch and transformers in the background while the test goes on
        # (a function of the installed package: workers cannot import this test module in CI).
        warm = [
            c.submit(importlib.import_module, "replay.live.sweep.runner", workers=[w], pure=False)
            for w in c.scheduler_info()["workers"]
        ]
        yield c
        del warm


def outcomes(out: Path) -> pd.DataFrame:
    return pd.read_parquet(out / "results.parquet")[list(OUTCOME_COLUMNS)]


def assert_same_sweep(out: Path, reference: Path) -> None:
    """Same table (outcome columns), same Pareto front on acceptance, same dump files byte for
    byte, same rounds in every manifest; one committed directory per config, no staging left."""
    got, want = outcomes(out), outcomes(reference)
    pd.testing.assert_frame_equal(got, want)
    assert got["name"].tolist() == NAMES
    assert pareto_front(got)["name"].tolist() == pareto_front(want)["name"].tolist()
    assert sorted(p.name for p in (out / "dumps").iterdir()) == sorted(NAMES)  # no .staging-* left
    for name in NAMES:
        a, b = out / "dumps" / name, reference / "dumps" / name
        files = sorted(p.name for p in a.iterdir())
        assert files == sorted(p.name for p in b.iterdir())
        for f in files:
            if f.endswith(".npz"):
                assert (a / f).read_bytes() == (b / f).read_bytes(), f"{name}/{f}"
        ma, mb = (json.loads((d / "manifest.json").read_text()) for d in (a, b))
        assert ma["sequences"] == mb["sequences"]
        strip = lambda rounds: [{k: v for k, v in r.items() if not k.endswith("_time_s")} for r in rounds]  # noqa: E731
        assert strip(ma["rounds"]) == strip(mb["rounds"])


@pytest.mark.slow
def test_three_workers_give_the_local_sweep(client, pair, local_reference, tmp_path):
    seen = []
    result = run_sweep_on_cluster(client, pair, CONFIGS, PROMPTS, OPTIONS, tmp_path, repeats=1, on_done=seen.append)
    assert sorted(result.computed) == sorted(NAMES) and result.skipped == () and result.duplicates == ()
    assert sorted(o.name for o in seen) == sorted(NAMES)
    assert_same_sweep(tmp_path, local_reference)
    table = pd.read_parquet(tmp_path / "results.parquet")
    assert set(table["worker"]) <= {f"w{i}" for i in range(WORKERS)} and set(table["device"]) == {"cpu"}
    assert table["session"].nunique() == 1 and (table["baseline_tokens_per_s"] > 0).all()
    for _, row in table.iterrows():  # each row's speedup is against the baseline timed beside it
        m = json.loads((tmp_path / "dumps" / row["name"] / "manifest.json").read_text())
        assert m["sweep"]["worker"] == row["worker"]
        t = m["totals"]["timing"]["methods"]
        rate = {k: v["tokens"][0] / v["seconds"][0] for k, v in t.items()}
        assert row["speedup"] == pytest.approx(rate["speculative"] / rate["target-only"])


@pytest.mark.slow
def test_a_worker_killed_mid_task_loses_nothing(client, pair, local_reference, tmp_path):
    box = {}
    runner = threading.Thread(
        target=lambda: box.update(
            result=run_sweep_on_cluster(client, pair, CONFIGS, PROMPTS, OPTIONS, tmp_path, repeats=1)
        )
    )
    runner.start()
    victim, deadline = None, time.time() + 120
    while victim is None and time.time() < deadline and runner.is_alive():
        for lock in (tmp_path / "dumps").glob(".staging-*.lock"):
            owner = staging_owner(lock)
            if owner is not None:
                victim = (lock.name, owner[1])
                os.kill(owner[1], signal.SIGKILL)  # the worker process itself, mid-task
                break
        time.sleep(0.005)
    runner.join(timeout=300)
    assert victim is not None, "no task was caught running"
    assert not runner.is_alive()
    if "result" not in box:  # Dask gave up on the task: --resume finishes it
        box["result"] = run_sweep_on_cluster(client, pair, CONFIGS, PROMPTS, OPTIONS, tmp_path, repeats=1, resume=True)
    # The killed task ran again elsewhere; its half-written staging directory was cleared.
    killed_config = next(n for n in NAMES if victim[0].startswith(f".staging-{n}-"))
    assert (tmp_path / "dumps" / killed_config / "row.json").is_file()
    assert_same_sweep(tmp_path, local_reference)
    client.wait_for_workers(WORKERS, timeout=120)  # the nanny restarted the killed worker


@pytest.mark.slow
def test_a_killed_client_resumes_without_redoing_or_doubling(client, model_dir, local_reference, tmp_path):
    address = client.scheduler.address
    args = [
        "sweep",
        "--draft",
        str(model_dir / "draft"),
        "--target",
        str(model_dir / "target"),
        "--prompts",
        str(model_dir / "prompts.jsonl"),
        "--grid",
        GRID,
        "--max-new-tokens",
        str(OPTIONS.max_new_tokens),
        "--out",
        str(tmp_path / "sw"),
        "--repeats",
        "1",
        "--threads",
        "1",
        "--no-cost-curve",
        "--scheduler",
        address,
    ]
    dumps = tmp_path / "sw" / "dumps"
    before = kill_sweep_after_rows(args, dumps, rows=2, timeout_s=180)
    assert 2 <= len(before) < len(NAMES)

    assert main(args + ["--resume"]) == 0
    # Configs committed before the kill were not touched; tasks still running when the client died
    # may commit after it, and then the resumed run finds them done (kept) or loses the race
    # (duplicate, discarded): either way one row per config.
    for name, row in before.items():
        assert ((dumps / name / "row.json").read_bytes(), (dumps / name / "row.json").stat().st_mtime_ns) == row
    assert_same_sweep(tmp_path / "sw", local_reference)


@pytest.mark.slow
def test_cluster_options_are_checked_before_anything_starts(model_dir, tmp_path, capsys):
    base = [
        "sweep",
        "--draft",
        str(model_dir / "draft"),
        "--target",
        str(model_dir / "target"),
        "--prompts",
        str(model_dir / "prompts.jsonl"),
        "--grid",
        "2",
        "--max-new-tokens",
        "4",
        "--out",
        str(tmp_path / "s"),
    ]
    assert main(base + ["--workers", "2", "--devices", "cuda:0"]) == 2
    assert "--workers 2 but 1 --devices" in capsys.readouterr().err
    assert main(base + ["--workers", "0"]) == 2
    assert "at least 1" in capsys.readouterr().err
    assert main(base + ["--scheduler", "tcp://127.0.0.1:1", "--devices", "cuda:0"]) == 2
    assert "SPECREPLAY_DEVICE" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()
