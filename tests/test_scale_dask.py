"""Many packed runs through Dask on a local cluster: one partition per run, pandas answers."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from replay.core.config import TreeConfig
from replay.io.packed.pack import pack_batches
from replay.testing.batch_synth import synth_run

SCALE_EXTRAS = "needs dask (the scale extras): pip install 'specreplay[scale]'"
dd = pytest.importorskip("dask.dataframe", reason=SCALE_EXTRAS)
distributed = pytest.importorskip("distributed", reason=SCALE_EXTRAS)

from analysis.tables.dask_tables import accepted_length_histogram, rounds_frame, run_table, summarize_runs  # noqa: E402

ARTICLE = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])
DEEP = TreeConfig.from_lists([[8], [3, 2, 1], [2, 2, 1], [1, 1, 1], [1, 1]], [1, 3, 3, 3, 2])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet")
    paths = []
    for k, (cfg, rounds) in enumerate([(ARTICLE, 3000), (ARTICLE, 1500), (DEEP, 2000)]):
        path = root / f"host{k}.run"
        pack_batches(
            synth_run(cfg, rounds, seed=k, early_stop_rate=0.1),
            path,
            block_rounds=1024,
            manifest={"config": cfg.to_json()},
        )
        paths.append(str(path))
    return paths


def test_local_cluster_matches_pandas(runs):
    expected = pd.concat([run_table(p) for p in runs], ignore_index=True)
    with distributed.LocalCluster(
        n_workers=2, processes=False, threads_per_worker=1, dashboard_address=None
    ) as cluster:
        with distributed.Client(cluster):
            frame = rounds_frame(runs)
            assert frame.npartitions == len(runs)
            summary = summarize_runs(frame).compute().sort_index()
            hist = accepted_length_histogram(frame).compute().sort_index()
            blocks = rounds_frame(runs, partition="block")
            assert blocks.npartitions > len(runs)  # one per 1024-round block of every group
            assert len(blocks) == len(expected)
    want = summarize_runs(expected).sort_index()
    pd.testing.assert_frame_equal(summary, want, check_dtype=False, check_index_type=False)
    pd.testing.assert_series_equal(
        hist, accepted_length_histogram(expected).sort_index(), check_dtype=False, check_index_type=False
    )
    assert summary.loc[runs[2], "rounds"] == 2000 and summary["mean_acceptance_length"].gt(1).all()
    assert list(frame.columns) == list(expected.columns)


def test_replay_never_imports_dask():
    code = "import sys, replay.cli, replay.engine.runs, replay.cli.cmd_scale; sys.exit('dask' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
