"""Every offline command on one large packed run: wall time and peak resident memory, one at a time.

    python bench/million.py                      # 10^6 rounds in $TMPDIR (about 400 MB), then each command
    python bench/million.py --rounds 100000      # smaller, for quick iterations
    python bench/million.py --dir /tmp/m --keep  # reuse (or keep) the generated run
    python bench/million.py --only batch-parquet,batch-csv
    python bench/million.py --rounds 100000 --scores --only stats-T,compare-T   # at T = 0.7 (validate scores)
    python bench/million.py --cpu 1 --repeats 3   # "one core": every command pinned to CPU 1, 3 interleaved runs

The run (article tree, ``all`` layout with float32 scores, 5 % early stops) is generated as arrays
by replay.testing.batch_synth and written with ``pack_batches``; it is scratch, never shipped. Each
command runs as its own ``python -m replay.cli`` child process with ``--no-progress`` where it
has one; wall time is measured around the child, peak RSS is the child's ``ru_maxrss``
(``resource.getrusage(RUSAGE_CHILDREN)`` after each child, which only grows: every child is run
from a fresh measuring process so the numbers do not mix).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit import child_env, machine_line  # bench/benchkit.py

ROOT = Path(__file__).resolve().parent.parent

# name -> argv after ``specreplay`` ({run} is the packed run, {out} a scratch directory)
COMMANDS: dict[str, list[str]] = {
    "batch": ["batch", "{run}", "--workers", "1", "--no-progress"],
    "batch-json": ["batch", "{run}", "--json", "--workers", "1", "--no-progress"],
    "batch-parquet": ["batch", "{run}", "-o", "{out}/rounds.parquet", "--workers", "1", "--no-progress"],
    "batch-csv": ["batch", "{run}", "-o", "{out}/rounds.csv", "--workers", "1", "--no-progress"],
    "replay-summary": ["replay", "{run}", "--summary", "--workers", "1", "--no-progress"],
    "replay-json": ["replay", "{run}", "--json", "--workers", "1", "--no-progress"],
    "stats-json": ["stats", "{run}", "--json", "--no-progress"],
    "compare-3": [
        "compare",
        "{run}",
        "--configs",
        "[6]|[2,2]|[1,1]",
        "[4]|[2,2]|[1,1]",
        "[8]|[2,2]",
        "--no-progress",
    ],
    "recommend-16": ["recommend", "{run}", "--budget", "16", "--no-progress"],
    "plot": ["plot", "{run}", "-o", "{out}/plots", "--no-progress"],
    "report": ["report", "{run}", "-o", "{out}/report", "--no-progress"],
}
# at the serving temperature: measured only on a run generated with --scores (scores on the validate rows)
SAMPLING_COMMANDS: dict[str, list[str]] = {
    "batch-T": ["batch", "{run}", "--temperature", "0.7", "--workers", "1", "--no-progress"],
    "stats-T": ["stats", "{run}", "--temperature", "0.7", "--json", "--no-progress"],
    "compare-T": [
        "compare",
        "{run}",
        "--temperature",
        "0.7",
        "--configs",
        "[6]|[2,2]|[1,1]",
        "[4]|[2,2]|[1,1]",
        "[8]|[2,2]",
        "--no-progress",
    ],
    "recommend-T": ["recommend", "{run}", "--temperature", "0.7", "--budget", "16", "--no-progress"],
}
SCORED_VOCAB = 50_000  # the --scores run's vocabulary (its manifest's vocab_size)


def generate(run: Path, rounds: int, seed: int = 0, scores: bool = False) -> float:
    """Write the packed run; returns seconds taken. ``scores``: 8 validate columns with the target's
    log-probs (replay.testing.sampling_ref.with_validate_scores), which --temperature needs."""
    from replay.core.config import TreeConfig
    from replay.io.packed.pack import pack_batches
    from replay.testing.batch_synth import synth_run
    from replay.testing.sampling_ref import with_validate_scores

    cfg = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])
    t0 = time.perf_counter()
    manifest = {"config": cfg.to_json(), "layout": "all"}
    if scores:
        batches = synth_run(cfg, rounds, seed=seed, early_stop_rate=0.05, target_cols=8, vocab=SCORED_VOCAB)
        batches = [with_validate_scores(b, seed + k, SCORED_VOCAB) for k, b in enumerate(batches)]
        manifest["vocab_size"] = SCORED_VOCAB
    else:
        batches = synth_run(cfg, rounds, seed=seed, early_stop_rate=0.05)
    pack_batches(batches, run, manifest=manifest, force=True)
    return time.perf_counter() - t0


def _measure_child(argv: list[str], timeout: float, cpu: int | None = None) -> None:
    """Run in a fresh process: run ``argv``, print one JSON line {rc, wall_s, peak_mb, bytes}.
    ``cpu``: pin to that CPU first (the command inherits it: its worker threads then share one core)."""
    import resource

    if cpu is not None:
        os.sched_setaffinity(0, {cpu})

    env = child_env(Path.cwd() if (Path.cwd() / "replay").is_dir() else ROOT)  # -m imports the cwd's tree first
    t0 = time.perf_counter()
    try:
        with tempfile.TemporaryFile() as stdout:  # a file, not a pipe: --json prints hundreds of MB
            p = subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE, env=env, timeout=timeout)
            rc, out_bytes, err = p.returncode, stdout.tell(), p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired:
        rc, out_bytes, err = "timeout", 0, ""
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # nice (if any) execs the command: its own usage
    cpu = usage.ru_utime + usage.ru_stime
    row = {"rc": rc, "wall_s": wall, "cpu_s": cpu, "peak_mb": usage.ru_maxrss / 1024, "stdout_bytes": out_bytes}
    print(json.dumps(dict(row, err=err[-300:])))


def measure(command: list[str], run: Path, out: Path, timeout: float, nice: int, cpu: int | None = None) -> dict:
    """``command``: a COMMANDS (or SAMPLING_COMMANDS) value, run on ``run`` with outputs in ``out``."""
    argv = [sys.executable, "-m", "replay.cli"] + [a.format(run=run, out=out) for a in command]
    if nice:
        argv = ["nice", "-n", str(nice)] + argv
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    code = (
        "import sys, json; sys.path.insert(0, %r); import million; "
        "million._measure_child(json.loads(sys.argv[1]), %r, %r)"
    )
    p = subprocess.run(
        [sys.executable, "-c", code % (str(Path(__file__).parent), timeout, cpu), json.dumps(argv)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(p.stdout.strip().splitlines()[-1])


def _spread(values: list[float], fmt: str = "{:.1f}") -> str:
    """One value, or the median and the range of several."""
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=1_000_000)
    ap.add_argument("--dir", help="where the packed run goes (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the run and outputs afterwards")
    ap.add_argument("--only", help="comma-separated command names: " + ",".join(COMMANDS))
    ap.add_argument("--timeout", type=float, default=600, help="seconds per command")
    ap.add_argument("--nice", type=int, default=0, help="run each command under nice -n N")
    ap.add_argument("--cpu", type=int, help="pin each command to this CPU (one core: threads included)")
    ap.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="run the commands N times, interleaved; the table shows the median and range",
    )
    ap.add_argument(
        "--scores",
        action="store_true",
        help="a run with scores on the validate rows (its own folder run_N_scored), and the commands at "
        "T = 0.7 too: " + ",".join(SAMPLING_COMMANDS),
    )
    args = ap.parse_args(argv)
    known = {**COMMANDS, **SAMPLING_COMMANDS} if args.scores else COMMANDS
    names = args.only.split(",") if args.only else list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        ap.error(f"--only: unknown command(s) {', '.join(unknown)}; expected some of {', '.join(known)}")
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="million_"))
    run = base / (f"run_{args.rounds}_scored" if args.scores else f"run_{args.rounds}")
    try:
        if (run / "manifest.json").exists():
            print(f"reusing {run}", file=sys.stderr)
        else:
            s = generate(run, args.rounds, scores=args.scores)
            print(f"generated {run} in {s:.1f} s", file=sys.stderr)
        mb = sum(p.stat().st_size for p in run.rglob("*") if p.is_file()) / 1e6
        load = os.getloadavg()[0]
        if args.cpu is not None and args.cpu not in os.sched_getaffinity(0):
            ap.error(f"--cpu {args.cpu}: not one of this process's CPUs {sorted(os.sched_getaffinity(0))}")
        if args.repeats < 1:
            ap.error(f"--repeats {args.repeats}: expected at least 1")
        runs: dict[str, list[dict]] = {name: [] for name in names}
        for _ in range(args.repeats):  # interleaved: a change of load touches every command alike
            for name in names:
                r = measure(known[name], run, base / "out" / name, args.timeout, args.nice, args.cpu)
                runs[name].append(r)
                note = "" if r["rc"] in (0, 1) else f"  rc={r['rc']} {r['err'].strip()[-200:]}"
                print(
                    f"  {name}: {r['wall_s']:.1f} s, {r['cpu_s']:.1f} CPU s, {r['peak_mb']:.0f} MB{note}",
                    file=sys.stderr,
                )
        pinned = "" if args.cpu is None else f"; every command pinned to CPU {args.cpu}"
        print(f"{machine_line()}; load average {load:.1f} at start, {os.getloadavg()[0]:.1f} at end{pinned}")
        print(
            f"run: {args.rounds:,} rounds, packed, {mb:,.0f} MB (article tree, all layout, scores, 5 % early stops)\n"
        )
        if args.repeats > 1:
            print(f"{args.repeats} interleaved runs of each: median (min–max)\n")
        print("| command | wall s | CPU s | peak RSS MB | exit |")
        print("|---|---|---|---|---|")
        for name in names:
            shown = " ".join(
                a.replace("{run}", "RUN").replace("{out}/", "") for a in known[name] if a != "--no-progress"
            )
            shown = shown.replace("|", "\\|")  # a markdown table cell
            rs = runs[name]
            cut = any(r["rc"] == "timeout" for r in rs)
            wall = f"> {args.timeout:.0f} (cut)" if cut else _spread([r["wall_s"] for r in rs])
            rcs = ",".join(sorted({str(r["rc"]) for r in rs}))
            cpu_s, peak = _spread([r["cpu_s"] for r in rs]), _spread([r["peak_mb"] for r in rs], "{:,.0f}")
            print(f"| `{shown}` | {wall} | {cpu_s} | {peak} | {rcs} |")
        return 0
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
