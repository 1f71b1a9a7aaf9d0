"""Dump directories as an engine writes them (one file per matrix per round): batch, pack and stats, timed.

    python bench/dir_read_speed.py --rounds 20000                       # .npz, .npy, text+scores; this tree
    python bench/dir_read_speed.py --rounds 20000 --base /tmp/old      # and a checkout of other code, interleaved
    python bench/dir_read_speed.py --formats npz --rounds 1000000 --dir /tmp/d --keep --only pack

The directories repeat ``sample_dumps/synthetic_article``'s 300 rounds (about 4 files a round) under
shifted keys: ``npz`` as np.savez wrote them (ids and scores inside), ``npy`` ids only, ``text``
plain-text ids with ``.scores`` companions (``%.9g``). The manifest is the sample's, without its
list of rounds. Each command runs as its own ``python -m replay.cli`` child (cwd: the code's root,
so ``--base`` runs that code), measured as bench/million.py measures (wall, CPU = user + sys of the
child and its reader processes, peak RSS of the largest). With ``--base`` every command runs under
both trees in turn, ``--repeats`` times, and the table gives each one's median and the ratio of
the medians (before / after) of CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from benchkit import machine_line  # bench/benchkit.py

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_dumps" / "synthetic_article"
_NAME = re.compile(r"^(draft_step_\d+|validate)_(\d+)_(\d+)\.npz$")
FORMATS = ("npz", "npy", "text")
# name -> argv after ``specreplay`` ({dir}: the dump directory, {out}: a scratch directory)
COMMANDS: dict[str, list[str]] = {
    "batch": ["batch", "{dir}", "--no-progress"],
    "batch-1": ["batch", "{dir}", "--workers", "1", "--no-progress"],
    "pack": ["pack", "{dir}", "-o", "{out}/run", "--force", "--no-progress"],
    "stats": ["stats", "{dir}", "--json", "--no-progress"],
}


def make_directory(out: Path, rounds: int, fmt: str) -> int:
    """Write at least ``rounds`` rounds (whole copies of the sample) in ``fmt``; returns the rounds written."""
    out.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in SAMPLE.iterdir() if _NAME.match(p.name))
    arrays = {}
    for p in files:
        with np.load(p) as z:
            arrays[p.name] = {k: z[k] for k in z.files}
    per = sum(1 for p in files if p.name.startswith("validate"))
    manifest = json.loads((SAMPLE / "manifest.json").read_text())
    manifest.pop("rounds", None)  # the sample's own rounds: not these
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    written = 0
    copy = 0
    while written < rounds:
        shift = copy * 1_000_000
        for name, arrs in arrays.items():
            m = _NAME.match(name)
            if m is None:
                continue
            stem = f"{m[1]}_{int(m[2]) + shift}_{int(m[3]) + shift}"
            if fmt == "npz":
                np.savez(out / f"{stem}.npz", **arrs)
            elif fmt == "npy":
                np.save(out / f"{stem}.npy", arrs["ids"])
            else:
                np.savetxt(out / stem, arrs["ids"], fmt="%d")
                np.savetxt(out / f"{stem}.scores", arrs["scores"], fmt="%.9g")
        written += per
        copy += 1
    return written


def measure(code_root: Path, command: list[str], directory: Path, out: Path, timeout: float) -> dict:
    """One child run of ``command`` with ``code_root`` as its cwd and import path (bench/million.py's child)."""
    argv = [sys.executable, "-m", "replay.cli"] + [a.format(dir=directory, out=out) for a in command]
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    code = (
        "import os, sys, json; sys.path.insert(0, %r); os.chdir(%r); import million; "
        "million._measure_child(json.loads(sys.argv[1]), %r)"
    )
    env = dict(os.environ, PYTHONPATH=str(code_root))
    p = subprocess.run(
        [sys.executable, "-c", code % (str(Path(__file__).parent), str(code_root), timeout), json.dumps(argv)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=20_000)
    ap.add_argument("--formats", default=",".join(FORMATS), help="comma-separated: " + ",".join(FORMATS))
    ap.add_argument("--only", default=",".join(COMMANDS), help="comma-separated commands: " + ",".join(COMMANDS))
    ap.add_argument("--dir", help="where the directories go (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the directories afterwards")
    ap.add_argument("--base", help="the root of another checkout (e.g. `git archive REF | tar -x -C DIR`)")
    ap.add_argument("--repeats", type=int, default=1, help="interleaved runs of each command")
    ap.add_argument("--timeout", type=float, default=1200)
    args = ap.parse_args(argv)
    formats, names = args.formats.split(","), args.only.split(",")
    if any(f not in FORMATS for f in formats) or any(n not in COMMANDS for n in names):
        ap.error(f"--formats from {', '.join(FORMATS)}; --only from {', '.join(COMMANDS)}")
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="dirspeed_"))
    trees = {"after": ROOT} if not args.base else {"before": Path(args.base).resolve(), "after": ROOT}
    loads = [os.getloadavg()[0]]
    try:
        rows = []
        for fmt in formats:
            d = base / f"{fmt}_{args.rounds}"
            if not (d / "manifest.json").exists():
                rounds = make_directory(d, args.rounds, fmt)
            else:
                rounds = sum(1 for n in os.listdir(d) if n.startswith("validate_") and ".scores" not in n)
            files = sum(1 for n in os.listdir(d) if n != "manifest.json")
            for name in names:
                got: dict[str, list[dict]] = {t: [] for t in trees}
                for _ in range(args.repeats):
                    for tree, root in trees.items():  # interleaved: a change of load touches both alike
                        r = measure(root, COMMANDS[name], d, base / "out", args.timeout)
                        got[tree].append(r)
                        print(
                            f"  {fmt} {name} {tree}: {r['wall_s']:.1f} s, {r['cpu_s']:.1f} CPU s, {r['peak_mb']:.0f} MB"
                            f" rc={r['rc']}",
                            file=sys.stderr,
                        )
                loads.append(os.getloadavg()[0])
                rows.append((fmt, rounds, files, name, got))
        print(f"{machine_line()}; load average {min(loads):.1f}–{max(loads):.1f} during the runs")
        print(f"{args.repeats} interleaved run(s) of each; medians\n")
        head = "| format | rounds | files | command | tree | wall s | CPU s | rounds per CPU s | peak RSS MB | exit |"
        print(head + (" CPU before / after |" if args.base else ""))
        print("|---" * (head.count("|") - 1 + bool(args.base)) + "|")
        for fmt, rounds, files, name, got in rows:
            cpu = {t: statistics.median(r["cpu_s"] for r in rs) for t, rs in got.items()}
            for tree, rs in got.items():
                wall = statistics.median(r["wall_s"] for r in rs)
                peak = statistics.median(r["peak_mb"] for r in rs)
                rcs = ",".join(sorted({str(r["rc"]) for r in rs}))
                ratio = (
                    f" {cpu['before'] / cpu['after']:.2f} |"
                    if args.base and tree == "after"
                    else (" |" if args.base else "")
                )
                cmd = (
                    " ".join(a for a in COMMANDS[name] if a != "--no-progress")
                    .replace("{dir}", "DIR")
                    .replace("{out}/", "")
                )
                print(
                    f"| {fmt} | {rounds:,} | {files:,} | `{cmd}` | {tree} | {wall:.1f} | {cpu[tree]:.1f} |"
                    f" {rounds / cpu[tree]:,.0f} | {peak:,.0f} | {rcs} |{ratio}"
                )
        return 0
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
