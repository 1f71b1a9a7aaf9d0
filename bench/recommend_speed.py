"""Speed of ``specreplay recommend``: a rounds × budget grid, and the ratio against today's code.

    python bench/recommend_speed.py             # the run recorded in docs/benchmarks.md
    python bench/recommend_speed.py --quick     # a smoke run in seconds (the test suite runs this)

Input: packed runs of the article's config [[6],[2,2],[1,1]]/[1,2,2] generated as arrays
(replay.testing.batch_synth: random draft scores, path-probability selection, 5% early stops, 8 recorded
columns), 10^4 to 10^6 rounds. Each cell runs what the CLI runs with its default settings
(bootstrap 200): ``recommend_runs`` + the text rendering, one thread, the process pinned to one
CPU. Printed, as markdown tables: wall and CPU seconds per cell (median of the repeats, with the
range), the time per phase (statistics pass, search, exact replay of the contained shapes,
bootstrap), and, on the smaller runs, the same cell with the code of ``--baseline-rev`` (today's
``recommend``: the reference replay round by round, loaded from git into a scratch package)
interleaved with the new code, and their ratio: with the default settings, and with
``--bootstrap 0`` on both (budget 16).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # one core: before numpy loads
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):  # run as a script from a checkout without installing
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from analysis.shapes.recommend import recommend_runs  # noqa: E402
from analysis.shapes.recommend_render import render_recommendation  # noqa: E402
from replay.core.config import TreeConfig  # noqa: E402
from replay.io.packed.pack import pack_batches  # noqa: E402
from replay.testing.batch_synth import synth_run  # noqa: E402
from replay.testing.replayer import replay_directory  # noqa: E402

ARTICLE = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])
BASELINE_REV = "d2662ec"  # the shape search as it replayed round by round, before the count tables
BASELINE_MODULES = ("recommend", "shape_model", "shape_search", "subtree", "costmodel")
PHASES = ("statistics", "search", "exact replay", "bootstrap")


def pin_one_cpu() -> str:
    """Pin this process to one CPU of those it may use; returns a description."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[-1]})
        return f"pinned to CPU {cpus[-1]} (of {len(cpus)})"
    except (AttributeError, OSError):
        return "not pinned (no sched_setaffinity)"


def make_run(out: Path, rounds: int, seed: int) -> Path:
    path = out / f"run_{rounds}"
    if not path.exists():
        batches = synth_run(ARTICLE, rounds, seed=seed, early_stop_rate=0.05)
        pack_batches(batches, path, manifest={"config": ARTICLE.to_json(), "layout": "all"})
    return path


MOVES_REV = "f17b429"  # the last revision with replay/util/old_paths.py: its MOVED table maps old module paths to new


def baseline_moves() -> dict[str, str]:
    """Module paths of the baseline (older than the folder move) to today's, from MOVES_REV's table."""
    src = subprocess.run(
        ["git", "show", f"{MOVES_REV}:replay/util/old_paths.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    namespace: dict = {}
    exec(compile(src, "old_paths.py", "exec"), namespace)  # our own repository's file at a fixed revision
    moved = dict(namespace["MOVED"])
    # the per-round references moved to replay/testing after MOVES_REV
    later = {"replay.engine.replayer": "replay.testing.replayer", "replay.engine.rebuild": "replay.testing.rebuild"}
    return {old: later.get(new, new) for old, new in moved.items()} | later


def tolerate_moved_imports(text: str) -> str:
    """The baseline's ``from replay.X import ...`` lines whose names today's package no longer has
    (its CLI glue: replay.commands became replay.cli) are wrapped in try/except: the timed
    functions use only the core modules, which the baseline and today's code share."""
    out = []
    moves = baseline_moves()
    for line in text.splitlines():
        if line.startswith("from replay.") and " import " in line and not line.rstrip().endswith("("):
            module, names = line[len("from ") :].split(" import ", 1)
            module = moves.get(module, module)
            line = f"from {module} import {names}"
            try:
                mod = importlib.import_module(module)
                missing = [
                    n for n in (x.strip().split(" as ")[0] for x in names.split(",")) if n and not hasattr(mod, n)
                ]
            except ImportError:
                missing = ["*"]
            if missing:
                line = f"try:\n    {line}\nexcept ImportError:  # moved since the baseline; not used by the timed code\n    pass"
        out.append(line)
    return "\n".join(out) + "\n"


def load_baseline(rev: str, scratch: Path):
    """Today's analysis modules from git, as a package beside the new ones."""
    pkg = scratch / "baseline_pkg" / "baseline_analysis"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    for name in BASELINE_MODULES:
        text = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{rev}:analysis/{name}.py"], capture_output=True, text=True, check=True
        ).stdout
        (pkg / f"{name}.py").write_text(tolerate_moved_imports(text), encoding="utf-8")
    sys.path.insert(0, str(pkg.parent))
    return importlib.import_module("baseline_analysis.recommend")


def timed(fn) -> tuple[float, float, object]:
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def run_new(path: Path, budget: int, bootstrap: int = 200):
    def go():
        rec = recommend_runs([str(path)], budget=budget, bootstrap=bootstrap)
        render_recommendation(rec)
        return rec

    return timed(go)


def run_old(old, path: Path, budget: int, bootstrap: int):
    def go():
        rec = old.recommend(
            [replay_directory(path)], budget, None, None, top=5, min_count=30, bootstrap=bootstrap, seed=0
        )
        old.render_recommendation(rec)
        return rec

    return timed(go)


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def spread(xs: list[float]) -> str:
    return f"{med(xs):.2f} [{min(xs):.2f}–{max(xs):.2f}]" if len(xs) > 1 else f"{xs[0]:.2f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", default="10000,100000,1000000", help="comma-separated round counts")
    ap.add_argument("--budgets", default="6,8,12,16", help="comma-separated node budgets")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per cell (the largest run: 1)")
    ap.add_argument("--baseline-rounds", default="2000", help="round counts also run with today's code")
    ap.add_argument("--baseline-budgets", default="6,16", help="budgets also run with today's code")
    ap.add_argument(
        "--baseline-bootstrap", type=int, default=200, help="today's code: bootstrap resamples (its default 200)"
    )
    ap.add_argument("--baseline-rev", default=BASELINE_REV, help="git revision of today's code")
    ap.add_argument(
        "--no-bootstrap-rounds", default="10000", help="round counts run by both codes with --bootstrap 0 (budget 16)"
    )
    ap.add_argument("--out", help="scratch directory to keep (default: a temporary one)")
    ap.add_argument("--quick", action="store_true", help="a smoke run in seconds")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.budgets, args.repeat = "3000", "6,12", 1
        args.baseline_rounds, args.baseline_budgets, args.baseline_bootstrap = "300", "6", 20
        args.no_bootstrap_rounds = "300"
    sizes = [int(x) for x in args.rounds.split(",") if x]
    budgets = [int(x) for x in args.budgets.split(",") if x]
    base_sizes = [int(x) for x in args.baseline_rounds.split(",") if x]
    base_budgets = [int(x) for x in args.baseline_budgets.split(",") if x]
    zero_sizes = [int(x) for x in args.no_bootstrap_rounds.split(",") if x]
    scratch = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="recommend_bench_"))
    scratch.mkdir(parents=True, exist_ok=True)
    pinned = pin_one_cpu()
    load0 = os.getloadavg()[0]
    start = time.perf_counter()
    try:
        old = load_baseline(args.baseline_rev, scratch) if base_sizes or zero_sizes else None
        runs = {
            n: make_run(scratch, n, seed=k + 1)
            for k, n in enumerate(sorted(set(sizes) | set(base_sizes) | set(zero_sizes)))
        }
        run_new(runs[min(runs)], budgets[0])  # warm-up: imports, caches
        if old is not None:
            run_old(old, runs[min(base_sizes)], base_budgets[0], min(args.baseline_bootstrap, 20))

        grid: dict[tuple[int, int], list] = {}
        for n in sizes:
            for b in budgets:
                reps = 1 if n == max(sizes) and len(sizes) > 1 else args.repeat
                grid[(n, b)] = [run_new(runs[n], b) for _ in range(reps)]

        duel: dict[tuple[int, int], tuple[list, list]] = {}
        for n in base_sizes:
            for b in base_budgets:
                new_t, old_t = [], []
                for _ in range(max(1, min(args.repeat, 2))):  # interleaved: new, old, new, old
                    new_t.append(run_new(runs[n], b))
                    old_t.append(run_old(old, runs[n], b, args.baseline_bootstrap))
                duel[(n, b, args.baseline_bootstrap)] = (new_t, old_t)
        for n in zero_sizes:  # the second figure: today's code without its bootstrap
            new_t, old_t = [], []
            for _ in range(2):
                new_t.append(run_new(runs[n], 16, 0))
                old_t.append(run_old(old, runs[n], 16, 0))
            duel[(n, 16, 0)] = (new_t, old_t)
    finally:
        if not args.out:
            shutil.rmtree(scratch, ignore_errors=True)
    total = time.perf_counter() - start

    title = "## recommend speed" + (" (quick run)" if args.quick else "")
    print(title)
    print()
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cores, {pinned}, Python {platform.python_version()}, numpy {np.__version__}; "
        f"load average {load0:.1f} at start, {os.getloadavg()[0]:.1f} at end; total {total:.0f} s"
    )
    print()
    print("### The grid: default settings (bootstrap 200), packed article runs, one CPU")
    print()
    print(
        "| rounds | budget | wall s (median [range]) | CPU s | statistics s | search s | exact replay s | bootstrap s | search states | #1 shape |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (n, b), reps in grid.items():
        walls = [w for w, _, _ in reps]
        cpus = [c for _, c, _ in reps]
        rec = reps[0][2]
        phase = [med([r[2].seconds.get(p, 0.0) for r in reps]) for p in PHASES]
        best = rec.search.by_block_efficiency[0].config.short().replace("|", "\\|")  # a markdown table cell
        print(
            f"| {n:,} | {b} | {spread(walls)} | {med(cpus):.2f} | "
            + " | ".join(f"{x:.2f}" for x in phase)
            + f" | {rec.search.states} | {best} |"
        )
    print()
    print("### Linearity: seconds per 100,000 rounds (statistics + exact replay), search seconds")
    print()
    print("| rounds | " + " | ".join(f"budget {b}: per 10^5 rounds / search" for b in budgets) + " |")
    print("|---|" + "---|" * len(budgets))
    for n in sizes:
        cells = []
        for b in budgets:
            reps = grid[(n, b)]
            lin = med([r[2].seconds["statistics"] + r[2].seconds["exact replay"] for r in reps]) * 1e5 / n
            cells.append(f"{lin:.2f} / {med([r[2].seconds['search'] for r in reps]):.2f}")
        print(f"| {n:,} | " + " | ".join(cells) + " |")
    if duel:
        print()
        print(f"### Against today's code ({args.baseline_rev}), interleaved, same runs, same settings")
        print()
        print(
            "| rounds | budget | bootstrap | today wall s | today CPU s | new wall s | new CPU s | ratio (wall) | ratio (CPU) | same #1 shape |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for (n, b, boot), (new_t, old_t) in duel.items():
            ow, oc = med([w for w, _, _ in old_t]), med([c for _, c, _ in old_t])
            nw, nc = med([w for w, _, _ in new_t]), med([c for _, c, _ in new_t])
            same = old_t[0][2].search.by_block_efficiency[0].config == new_t[0][2].search.by_block_efficiency[0].config
            print(
                f"| {n:,} | {b} | {boot} | {spread([w for w, _, _ in old_t])} | {oc:.2f} | {spread([w for w, _, _ in new_t])} | {nc:.2f} | {ow / nw:,.0f}x | {oc / nc:,.0f}x | {'yes' if same else 'no'} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
