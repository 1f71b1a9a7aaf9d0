"""Speed of the analysis commands' loading: the batch path against the scalar reference path.

    python bench/analysis_speed.py            # the run recorded in docs/benchmarks.md
    python bench/analysis_speed.py --quick    # a smoke run in seconds

What ``stats`` / ``plot`` / ``compare`` / ``report`` do before their own work: replay every round
and build the round and node tables. Old path (still the reference): ``tests.reference_runs.load_reference``
(replay_directory, round by round) + ``build_tables`` (tables from RoundResults). New path:
``analysis.tables.runs.load_run`` (replay_run with analysis.tables.batch per batch, the node
metrics' counts taken from the batch arrays on the way: analysis.tables.node_counts). Also timed:
``all_metrics`` on the new tables. ``compare`` (``--only compare`` runs just this part): the old
command replayed the run round by round (load_reference) and each config on every RoundResult
(replay.testing.compare_reference.compare_configs); the new one re-reads the run in batches and replays every
config on the arrays (analysis.compare.batch.compare_run); both frames are checked equal. Likewise
the gamma strategies (replay.testing.compare_reference.simulate_strategies on RoundResults against
compare_batch.simulate_run_strategies; equal results checked). Inputs: a packed run of the article's config
[[6],[2,2],[1,1]]/[1,2,2] (replay.testing.batch_synth, 5% early stops), a directory of half as many
rounds (.npz files, replay.testing.synth.write_synthetic_run) and the bundled
sample_dumps/synthetic_article directory (300 rounds, .npz files). Both paths run in this
process, interleaved (old, new, old, new, ...) after one warm-up each; printed: median seconds of
each path, the range, and the ratio old/new (median, with the range of the per-pair ratios).
Both paths' tables are checked equal before timing.
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):  # run as a script from a checkout without installing
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from analysis.compare.batch import compare_run, simulate_run_strategies  # noqa: E402
from analysis.compare.subtree import contained_configs  # noqa: E402
from analysis.cost.model import CostModel  # noqa: E402
from analysis.report.options import default_comparison_configs  # noqa: E402
from analysis.tables.build import Tables, _typed, build_tables  # noqa: E402
from analysis.tables.metrics import all_metrics  # noqa: E402
from analysis.tables.runs import load_run  # noqa: E402
from replay.core.config import TreeConfig  # noqa: E402
from replay.io.packed.pack import pack_batches  # noqa: E402
from replay.testing.batch_synth import synth_run  # noqa: E402
from replay.testing.compare_reference import compare_configs, simulate_strategies  # noqa: E402
from replay.testing.synth import write_synthetic_run  # noqa: E402
from replay.testing.table_rows import node_table, round_table  # noqa: E402
from tests.reference_runs import load_reference  # noqa: E402

ARTICLE = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])


def timed(fn) -> float:
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def interleaved(old, new, repeats: int) -> tuple[list[float], list[float]]:
    """Warm-up once each, then ``repeats`` pairs old, new (so drift hits both alike)."""
    old()
    new()
    a, b = [], []
    for _ in range(repeats):
        a.append(timed(old))
        b.append(timed(new))
    return a, b


def row(name: str, old: list[float], new: list[float]) -> str:
    ratios = [o / n for o, n in zip(old, new)]
    return (
        f"| {name} | {statistics.median(old):.3f} ({min(old):.3f}-{max(old):.3f}) "
        f"| {statistics.median(new):.3f} ({min(new):.3f}-{max(new):.3f}) "
        f"| {statistics.median(ratios):.1f}x ({min(ratios):.1f}-{max(ratios):.1f}) |"
    )


def tables_old(path: str):
    ref = load_reference(path, "run", progress=False)
    rounds, nodes = _typed(round_table(ref.results, "run", ref.config)), _typed(node_table(ref.results, "run"))
    return Tables(rounds, nodes, {"run": ref.config})


def tables_new(path: str):
    return build_tables([load_run(path, "run", progress=False)])


def compare_old(path: str, configs):
    """What ``compare`` did: the run's RoundResults by the scalar replay, each config round by round."""
    ref = load_reference(path, "run", progress=False)
    return compare_configs(ref.results, ref.config, configs, CostModel.default())


def compare_new(run, configs):
    return compare_run(run, configs, CostModel.default())


def compare_rows(inputs: dict[str, str], repeats: int) -> None:
    print(
        "\n| compare (after load_run) | old: scalar replay + subtree per round (s) | new: batch arrays (s) | old/new |\n|---|---|---|---|"
    )
    for name, (path, which) in inputs.items():
        run = load_run(path, "run", progress=False)
        configs = (
            default_comparison_configs(run.config)
            if which == "default"
            else [run.config] + contained_configs(run.config)
        )
        for a, b in zip(compare_old(path, configs), compare_new(run, configs)):
            pd.testing.assert_frame_equal(a, b, check_exact=True)
        label = f"{name}, {len(configs)} configs ({'default' if which == 'default' else '--contained'})"
        print(
            row(label, *interleaved(lambda: compare_old(path, configs), lambda: compare_new(run, configs), repeats)),
            flush=True,
        )


def strategies_old(path: str):
    ref = load_reference(path, "run", progress=False)
    return simulate_strategies(ref.results, ref.config, [0, 1, 2, 3, 4], CostModel.default(), 1, None, ref.config.gamma)


def strategies_new(run):
    return simulate_run_strategies(run, run.config, [0, 1, 2, 3, 4], CostModel.default(), 1, None)


def strategies_row(name: str, path: str, repeats: int) -> None:
    run = load_run(path, "run", progress=False)
    assert strategies_old(path) == strategies_new(run)
    print(
        row(
            f"{name}, gamma strategies 0-4",
            *interleaved(lambda: strategies_old(path), lambda: strategies_new(run), repeats),
        ),
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=6000, help="rounds of the packed run (default 6000)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="600 rounds, 2 repeats")
    ap.add_argument(
        "--only",
        choices=["tables", "compare"],
        help="time only the tables (and all_metrics) or only compare",
    )
    args = ap.parse_args()
    rounds, repeats = (600, 2) if args.quick else (args.rounds, args.repeats)
    print(f"python {platform.python_version()}, numpy {np.__version__}, pandas {pd.__version__}, {platform.machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        packed = str(Path(tmp) / "run")
        pack_batches(
            synth_run(ARTICLE, rounds, seed=3, early_stop_rate=0.05),
            packed,
            manifest={"config": ARTICLE.to_json(), "layout": "all"},
        )
        directory = Path(tmp) / "dir"
        dir_rounds = rounds // 2
        write_synthetic_run(directory, ARTICLE, dir_rounds, seed=4, early_stop_rate=0.05)
        inputs = {
            f"packed run, {rounds} rounds": packed,
            f"directory, {dir_rounds} rounds (.npz)": str(directory),
            "directory, 300 rounds (sample_dumps/synthetic_article)": str(ROOT / "sample_dumps" / "synthetic_article"),
        }
        if args.only != "tables":
            compare_rows(
                {
                    f"packed run, {rounds} rounds": (packed, "default"),
                    "directory, 300 rounds (sample_dumps/synthetic_article)": (
                        str(ROOT / "sample_dumps" / "synthetic_article"),
                        "contained",
                    ),
                },
                repeats,
            )
            strategies_row(f"packed run, {rounds} rounds", packed, repeats)
        if args.only == "compare":
            return
        print(
            "\n| load + round and node tables | old: scalar replay + tables (s) | new: batch path (s) | old/new |\n|---|---|---|---|"
        )
        for name, path in inputs.items():
            a, b = tables_old(path), tables_new(path)
            pd.testing.assert_frame_equal(a.rounds, b.rounds, check_exact=True)
            pd.testing.assert_frame_equal(a.nodes, b.nodes, check_exact=True)
            print(row(name, *interleaved(lambda: tables_old(path), lambda: tables_new(path), repeats)), flush=True)
        tables = tables_new(packed)
        t = [timed(lambda: all_metrics(tables)) for _ in range(repeats)]
        print(
            f"\nall_metrics on the new tables ({rounds} rounds): median {statistics.median(t):.3f} s ({min(t):.3f}-{max(t):.3f})"
        )


if __name__ == "__main__":
    main()
