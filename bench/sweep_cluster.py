"""Wall time of the same sweep of tiny random models on 1 and on 3 local Dask workers, side by
side in one run. A benchmark, not a test.

    PYTHONPATH=. python bench/sweep_cluster.py --out bench/results/sweep_cluster.json

Both clusters start first and stay up (idle workers cost nothing). The timing is the harness's
own (replay/live/timing.py): a warm-up sweep on each cluster (every worker imports torch and loads
the pair once), then ``--repeats`` passes, each sweeping the grid once on each cluster into a fresh
directory, in an order rotated per pass; the wall-time ratio 3 workers / 1 worker is taken pass
by pass (median, min, max). Also measured: Dask's cost per task (a no-op task's round trip, and
its throughput) against the wall time of one config task - why a task is a whole config.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from replay.live.generate import DecodeOptions
from replay.live.models.random_weights import build_model
from replay.live.sweep.cluster import PairSpec, run_sweep_on_cluster, start_local_cluster
from replay.live.sweep.directory import OUTCOME_COLUMNS
from replay.live.sweep.grid import config_name, parse_grid
from replay.live.timing import time_methods
from replay.testing.tiny import noisy_copy, save_hf_dir, tiny_config

GRID = "6,2x2,1x1;1,1,1,1;4,2x1,1;2,1x1;3,1;8;2,2x2;1,1,1@0|0.8"  # 9 configs: 3 rounds of 3 workers
PROMPTS = [[1, 2, 3, 4], [50, 7, 8], [9, 10, 11, 12, 13]]


def tiny_pair(root: Path) -> PairSpec:
    target = build_model(tiny_config("qwen2"), seed=0, name="bench-target")
    draft = noisy_copy(target, 0.05, seed=1, name="bench-draft")
    save_hf_dir(target, root / "target")
    save_hf_dir(draft, root / "draft")
    return PairSpec(str(root / "draft"), str(root / "target"), "cpu", threads=1)


def same_outcomes(dirs: list[Path], names: list[str]) -> bool:
    """Every sweep has the same outcome columns (nodes, rounds, acceptance, ...), whatever its workers."""
    import pandas as pd

    tables = [pd.read_parquet(d / "results.parquet")[list(OUTCOME_COLUMNS)] for d in dirs]
    return all(t["name"].tolist() == names and t.equals(tables[0]) for t in tables)


def dask_overhead(client, n: int = 100) -> dict[str, float]:
    """Seconds per no-op task: submitted and awaited one at a time, and mapped all at once."""
    t = time.perf_counter()
    for i in range(n):
        client.submit(int, i, pure=False).result()
    round_trip = (time.perf_counter() - t) / n
    t = time.perf_counter()
    client.gather(client.map(int, range(3 * n), pure=False))
    return {"round_trip_s": round_trip, "throughput_s_per_task": (time.perf_counter() - t) / (3 * n)}


def main(argv: list[str] | None = None) -> int:
    from distributed import Client

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--grid", default=GRID)
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3, help="timed passes (each sweeps on both clusters)")
    p.add_argument("--sweep-repeats", type=int, default=1, help="the sweeps' own --repeats")
    p.add_argument("--out", default="bench/results/sweep_cluster.json")
    args = p.parse_args(argv)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    configs = parse_grid(args.grid)[0]
    options = DecodeOptions(args.max_new_tokens)
    work = Path(tempfile.mkdtemp(prefix="sweep_cluster_"))
    pair = tiny_pair(work / "models")
    task_s: dict[str, list[float]] = {"1 worker": [], "3 workers": []}

    t0 = time.perf_counter()
    with start_local_cluster(1) as c1, start_local_cluster(3) as c3, Client(c1) as one, Client(c3) as three:
        log(f"clusters up in {time.perf_counter() - t0:.1f} s")
        clients = {"1 worker": one, "3 workers": three}
        count = iter(range(10**6))

        def sweep(label: str):
            def run(_prompt: int, repeat: int) -> int:
                out = work / f"sweep-{next(count)}-{label.replace(' ', '')}"
                res = run_sweep_on_cluster(
                    clients[label],
                    pair,
                    configs,
                    PROMPTS,
                    options,
                    out,
                    args.sweep_repeats,
                    on_done=lambda o: task_s[label].append(o.seconds) if repeat >= 0 else None,
                )
                log(f"pass {repeat}: {label}: {len(res.computed)} configs")
                return len(res.computed)

            return run

        timing = time_methods({k: sweep(k) for k in clients}, 1, args.repeats)
        overhead = dask_overhead(three)
    wall = {m.name: m.seconds for m in timing.methods}
    identical = same_outcomes(sorted(work.glob("sweep-*")), [config_name(c) for c in configs])
    ratios = [b / a for a, b in zip(wall["1 worker"], wall["3 workers"])]
    result = {
        "command": "PYTHONPATH=. python bench/sweep_cluster.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "configs": len(configs),
        "prompts": len(PROMPTS),
        "max_new_tokens": args.max_new_tokens,
        "sweep_repeats": args.sweep_repeats,
        "cpus": os.cpu_count(),
        "wall_s": wall,
        "wall_ratio_3_over_1": {
            "median": statistics.median(ratios),
            "min": min(ratios),
            "max": max(ratios),
            "passes": ratios,
        },
        "task_s_median": {k: statistics.median(v) for k, v in task_s.items() if v},
        "identical_outcomes": identical,
        "dask_overhead": overhead,
        "timing": timing.to_json(),
        "load_before": asdict(timing.load_before),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"wall time per sweep ({len(configs)} configs x {len(PROMPTS)} prompts, {args.max_new_tokens} tokens):")
    for k, v in wall.items():
        print(f"  {k:9s} median {statistics.median(v):6.2f} s  (passes: {', '.join(f'{s:.2f}' for s in v)})")
    r = result["wall_ratio_3_over_1"]
    print(f"ratio 3 workers / 1 worker: median {r['median']:.2f} (min {r['min']:.2f}, max {r['max']:.2f}); ideal 0.33")
    print(
        f"one config task: median {result['task_s_median']} s; Dask no-op task: round trip "
        f"{overhead['round_trip_s'] * 1e3:.1f} ms, throughput {overhead['throughput_s_per_task'] * 1e3:.1f} ms/task"
    )
    print(
        f"same outcome columns in all {len(list(work.glob('sweep-*')))} sweeps (1 and 3 workers): {'yes' if identical else 'NO'}"
    )
    print(
        f"machine: {os.cpu_count()} CPUs, load {timing.load_before.load_1m:.2f} before, CPUs busy {timing.cpu_busy_percent}%"
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
