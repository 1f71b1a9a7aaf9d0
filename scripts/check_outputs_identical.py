#!/usr/bin/env python3
"""One hash per (command, sample): what every offline command prints and writes, to compare a tree
before and after a change that must not change behaviour.

    python scripts/check_outputs_identical.py -o before.json      # on the tree before
    python scripts/check_outputs_identical.py -o after.json       # ... and after
    python scripts/check_outputs_identical.py --diff before.json after.json

Each command runs in this process (``replay.cli.main``, as the ``specreplay`` command does) from
the repository root, on every sample of sample_dumps/, with its output under a scratch directory.
The hash covers the exit status, stdout, stderr and every file written. What legitimately differs
between two runs is normalised first: the scratch and checkout paths, times ("in 0.43 s (191
rounds/s)", the report's date), and files are compared by content, not bytes, where their bytes
carry what does not matter (Parquet files as their table, PNG files as their pixels). ``--keep
DIR`` also writes each normalised output there, so that two runs can be diffed when a hash differs.

``--diff`` lists the outputs that differ (exit status 1) and counts those identical byte for byte.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES_DIR = "sample_dumps"

# Normalisations of text output: (pattern, replacement). Order matters.
TIMINGS = [
    (re.compile(r"in \d+(?:\.\d+)? s \(\d[\d,]*(?:\.\d+)? rounds/s\)"), "in <T> s (<R> rounds/s)"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?\b"), "<DATE>"),
    (re.compile(r"\b\d+(?:\.\d+)? ?(?:ms|s) elapsed\b"), "<T> elapsed"),
    (re.compile(r'("seconds": \{)[^{}]*(\})'), r"\1<T>\2"),  # recommend --json: time per phase
]


def samples() -> list[str]:
    """Every dump directory of sample_dumps/ (relative to the root, as a user types them)."""
    out = []
    for manifest in sorted((ROOT / SAMPLES_DIR).rglob("*")):
        if manifest.is_dir() and any(manifest.glob("validate_*")):
            out.append(manifest.relative_to(ROOT).as_posix())
    return out


def commands(sample: str) -> list[tuple[str, list[str]]]:
    """(name, argv) of every command on one sample; ``{out}`` is the command's scratch directory."""
    return [
        ("replay", ["replay", sample]),
        ("replay --summary", ["replay", sample, "--summary"]),
        ("replay --json", ["replay", sample, "--json", "--workers", "1"]),
        ("batch", ["batch", sample, "--workers", "1"]),
        ("batch --json", ["batch", sample, "--json", "--workers", "1"]),
        ("batch -o parquet", ["batch", sample, "-o", "{out}/rounds.parquet", "--workers", "1"]),
        ("batch -o csv", ["batch", sample, "-o", "{out}/rounds.csv", "--workers", "1"]),
        ("stats", ["stats", sample]),
        ("stats --json", ["stats", sample, "--json"]),
        ("stats --csv", ["stats", sample, "--csv"]),
        ("stats -o", ["stats", sample, "-o", "{out}/tables"]),
        ("compare", ["compare", sample]),
        ("compare --json", ["compare", sample, "--json"]),
        ("recommend", ["recommend", sample, "--budget", "8", "--bootstrap", "50"]),
        ("recommend --json", ["recommend", sample, "--budget", "8", "--bootstrap", "50", "--json"]),
        ("plot", ["plot", sample, "-o", "{out}/plots", "--format", "png"]),
        ("report", ["report", sample, "-o", "{out}/report"]),
        ("pack + verify-pack", ["pack", sample, "-o", "{out}/packed"]),
        *temperature_commands(sample),
    ]


def temperature_commands(sample: str) -> list[tuple[str, list[str]]]:
    """The ``--temperature`` forms and compare's other outputs (a sample without scores: their errors)."""
    t = ["--temperature", "0.7"]
    return [
        ("replay --temperature", ["replay", sample, *t, "--json", "--workers", "1"]),
        ("batch --temperature", ["batch", sample, *t, "--workers", "1"]),
        ("stats --temperature", ["stats", sample, *t, "--json"]),
        ("compare --temperature", ["compare", sample, *t]),
        ("compare --temperature 0", ["compare", sample, "--temperature", "0", "--json"]),
        ("compare --temperature 1.3 --top", ["compare", sample, "--temperature", "1.3", "--top", "3", "--csv"]),
        ("compare --temperature --vocab-size", ["compare", sample, *t, "--vocab-size", "1000", "--json"]),
        ("compare --temperature --per-round", ["compare", sample, *t, "--per-round", "{out}/per_round.csv"]),
        ("compare --csv --per-round", ["compare", sample, "--csv", "--per-round", "{out}/per_round.csv"]),
        ("compare --gamma-threshold", ["compare", sample, "--gamma-threshold", "0.5", "--json"]),
        ("recommend --temperature", ["recommend", sample, *t, "--budget", "8", "--bootstrap", "50", "--json"]),
    ]


def global_commands(all_samples: list[str]) -> list[tuple[str, list[str]]]:
    """Help of every command (its text comes from docstrings and option tables), and every sample
    side by side."""
    names = ["replay", "pack", "verify-pack", "batch", "stats", "plot", "compare", "report", "recommend",
             "generate", "cost-curve", "sweep", "models"]  # fmt: skip
    out = [("--help", ["--help"]), ("--version", ["--version"])]
    out += [(f"{n} --help", [n, "--help"]) for n in names]
    out.append(("stats --json (all samples)", ["stats", *all_samples, "--json"]))
    return out


def normalise_text(text: str, out_dir: str) -> str:
    text = text.replace(out_dir, "<OUT>").replace(str(ROOT), "<ROOT>")
    for pattern, repl in TIMINGS:
        text = pattern.sub(repl, text)
    return text


def file_digest(path: Path, out_dir: str) -> tuple[str, str, str | None]:
    """(digest, digest, normalised text or None) of a written file's content, as far as it matters
    (the digest twice: the output's two keys, ``sha256`` and ``raw``, stay comparable with older files)."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pandas as pd

        frame = pd.read_parquet(path)
        digest = "parquet:" + sha(frame.to_csv(index=False) + "|" + "|".join(map(str, frame.dtypes)))
        return digest, digest, None
    if suffix == ".png":
        from matplotlib import image

        pixels = image.imread(str(path))
        digest = "png:" + sha(f"{pixels.shape}|".encode() + pixels.tobytes())
        return digest, digest, None
    data = path.read_bytes()
    if suffix in (".html", ".json", ".csv", ".txt", ".svg", ".md", ".jsonl"):
        text = normalise_text(data.decode("utf-8", "replace"), out_dir)
        return "text:" + sha(text), "text:" + sha(text), text
    return "bytes:" + sha(data), "bytes:" + sha(data), None


def sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def run(argv: list[str]) -> tuple[int, str, str]:
    from replay.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # --help and --version exit through argparse
            code = exc.code if isinstance(exc.code, int) else 0
    return int(code or 0), out.getvalue(), err.getvalue()


def record(name: str, argv: list[str], scratch: Path, keep: Path | None, results: dict, key: str) -> None:
    out_dir = scratch / re.sub(r"\W+", "_", key)
    out_dir.mkdir(parents=True)
    argv = [a.replace("{out}", str(out_dir)) for a in argv]
    t0 = time.perf_counter()
    code, stdout, stderr = run(argv)
    if name == "pack + verify-pack" and code == 0:  # the packed run, checked and replayed
        for extra in (["verify-pack", str(out_dir / "packed")], ["replay", str(out_dir / "packed"), "--json"]):
            c2, o2, e2 = run(extra)
            code, stdout, stderr = code or c2, stdout + o2, stderr + e2
    digests = {
        p.relative_to(out_dir).as_posix(): file_digest(p, str(out_dir))
        for p in sorted(out_dir.rglob("*"))
        if p.is_file()
    }

    def body(which: int) -> str:
        return json.dumps(
            {
                "exit": code,
                "stdout": normalise_text(stdout, str(out_dir)),
                "stderr": normalise_text(stderr, str(out_dir)),
                "files": {f: d[which] for f, d in digests.items()},
            },
            indent=1,
            sort_keys=True,
        )

    text = body(0)
    results[key] = {
        "sha256": sha(body(1)),
        "raw": sha(text),
        "exit": code,
        "files": len(digests),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    if keep is not None:
        name = re.sub(r"\W+", "_", key)
        (keep / f"{name}.json").write_text(text, encoding="utf-8")
        for f, (_, _, content) in digests.items():
            if content is not None:
                (keep / name / f).parent.mkdir(parents=True, exist_ok=True)
                (keep / name / f).write_text(content, encoding="utf-8")


def snapshot(output: Path, keep: Path | None, only: str | None) -> int:
    os.chdir(ROOT)  # the samples are named as a user in the checkout types them
    os.environ["COLUMNS"] = "100"  # argparse wraps help to the terminal's width
    os.environ.pop("SPECREPLAY_DEBUG", None)
    sys.path.insert(0, str(ROOT))
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    all_samples = samples()
    jobs = [(name, argv, f"{name} | {s}") for s in all_samples for name, argv in commands(s)]
    jobs += [(name, argv, name) for name, argv in global_commands(all_samples)]
    if only:
        jobs = [j for j in jobs if re.search(only, j[2])]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="outputs-identical-") as tmp:
        for i, (name, argv, key) in enumerate(jobs, 1):
            record(name, argv, Path(tmp), keep, results, key)
            r = results[key]
            print(f"[{i}/{len(jobs)}] {key}: exit {r['exit']}, {r['files']} file(s), {r['seconds']} s", file=sys.stderr)
    body = {"root": str(ROOT), "seconds": round(time.perf_counter() - t0, 1), "outputs": results}
    output.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(results)} outputs in {body['seconds']} s: {output}", file=sys.stderr)
    return 0


def diff(a: Path, b: Path) -> int:
    left, right = (json.loads(p.read_text(encoding="utf-8"))["outputs"] for p in (a, b))
    both = sorted(left.keys() & right.keys())
    differ = [k for k in both if left[k]["raw"] != right[k]["raw"]]
    only = sorted(left.keys() ^ right.keys())
    for k in differ:
        print(f"differs: {k} (exit {left[k]['exit']} -> {right[k]['exit']})")
    for k in only:
        print(f"only in {'the first' if k in left else 'the second'}: {k}")
    print(f"{len(both) - len(differ)} identical byte for byte, {len(differ)} different, {len(only)} in one file only")
    return 1 if differ or only else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", type=Path, help="write the hashes to this JSON file")
    ap.add_argument("--keep", type=Path, help="also write each normalised output into this directory")
    ap.add_argument("--only", help="only the outputs whose key matches this regular expression")
    ap.add_argument("--diff", nargs=2, type=Path, metavar=("BEFORE", "AFTER"), help="compare two hash files")
    args = ap.parse_args(argv)
    if args.diff:
        return diff(*args.diff)
    if not args.output:
        ap.error("give -o FILE (or --diff BEFORE AFTER)")
    return snapshot(args.output, args.keep, args.only)


if __name__ == "__main__":
    sys.exit(main())
