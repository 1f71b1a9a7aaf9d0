"""What checking every block costs when a packed run is read (CRC-32 per block, on by default).

    python bench/packed_verify.py                 # the run recorded in docs/benchmarks.md
    python bench/packed_verify.py --quick         # a smoke run in seconds

A synthetic run of the article's config ([[6],[2,2],[1,1]]/[1,2,2], 5% early stops, blocks of
16,384 rounds) is packed once, then read in two ways:

- read: every block of every array into memory (``PackedRun.iter_blocks``), nothing else;
- read+replay: the streaming batch replay every command uses (``replay.engine.runs.iter_run_results``),
  on 1 and on 2 threads;

each by four readers: ``mmap`` (the reader before blocks were checked: memory-mapped views, no
check; for "read" a copy of every view, as ``load=True`` did), ``mmap+crc`` (the same with each
block's CRC-32 computed over the mapped bytes: the alternative not taken), ``unchecked`` (the
current reader, pread into memory, ``check_blocks=False``) and ``checked`` (the default: pread,
then CRC-32 of every block).

The page cache is warm (one untimed pass of each reader first), so the ratios are the CPU cost of
the check against the cheapest possible read; a last row drops the run's pages from the page
cache before every pass (read+replay from disk). Readers are interleaved in a rotating order for ``--repeat`` rounds; printed for wall
time and for the process's CPU time (steadier on a shared machine): median, min and max ms per
reader, and checked / each baseline as the ratio of medians with the spread (min-max) of the
per-round ratios.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
import zlib
from pathlib import Path

if __package__ in (None, ""):  # run as a script from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from benchkit import evict, machine_line  # bench/benchkit.py

from replay.core.config import TreeConfig
from replay.engine.runs import iter_run_results, open_run
from replay.io.packed.pack import BadBlock, PackedRun, pack_batches
from replay.testing.batch_synth import synth_run

ARTICLE = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])


@dataclasses.dataclass(frozen=True, eq=False)
class MappedRun(PackedRun):
    """The reader before blocks were checked: views of memory-mapped files, no check at all.

    Maps are per opened run, as they were: each pass maps (and page-faults) the files afresh.
    """

    maps: dict = dataclasses.field(default_factory=dict, repr=False)

    def read(self, group, stem: str, k: int) -> np.ndarray:
        key = (group.name, stem)
        if key not in self.maps:
            self.maps[key] = np.load(self.path / group.arrays[stem].file, mmap_mode="r", allow_pickle=False)
        return self.maps[key][k]


@dataclasses.dataclass(frozen=True, eq=False)
class MappedCheckedRun(MappedRun):
    """The road not taken: memory-mapped views, each block's CRC-32 computed over the mapped bytes."""

    def read(self, group, stem: str, k: int) -> np.ndarray:
        view = super().read(group, stem, k)
        if zlib.crc32(memoryview(view).cast("B")) != group.arrays[stem].block_crc32[k]:
            raise RuntimeError(f"{group.name}/{stem} block {k}: CRC-32 differs")
        return view


READERS = {
    "mmap": lambda path: MappedRun.open(path, check_blocks=False),
    "mmap+crc": lambda path: MappedCheckedRun.open(path, check_blocks=False),
    "unchecked": lambda path: PackedRun.open(path, check_blocks=False),
    "checked": lambda path: PackedRun.open(path),
}
RATIOS = (("checked", "unchecked"), ("checked", "mmap"), ("mmap+crc", "mmap"))


def read_all(run: PackedRun) -> int:
    """Bytes read: every block of every array in memory (checked, when the run checks)."""
    n = 0
    for b in run.iter_blocks():
        if isinstance(b, BadBlock):
            raise RuntimeError(f"bad block in a fresh run: {b.skipped}")
        for st in (*b.steps, b.validate):
            for a in (st.ids, st.logp, st.parents):
                if a is not None:  # a view of a memory map is copied (load=True did that): every byte read
                    n += (np.array(a) if isinstance(a, np.memmap) else a).nbytes
        n += b.keys.nbytes + b.root_tokens.nbytes + b.ordinals.nbytes
    return n


def replay_all(path: Path, reader: str, workers: int) -> int:
    run = open_run(path)
    run = dataclasses.replace(run, packed=READERS[reader](path))
    return sum(len(res) for res, _ in iter_run_results(run, workers=workers))


def hash_rate(fn, mb: int = 64) -> float:
    """GB per CPU-second of a checksum over an in-memory buffer (best of 3)."""
    buf = np.random.default_rng(0).integers(0, 2**31, size=(mb << 20) // 4, dtype=np.int32)
    view = memoryview(buf).cast("B")
    best = min(_timed(lambda: fn(view))[1] for _ in range(3))
    return buf.nbytes / best / 1e9


def _timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process, all threads) of one call."""
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def compare(name: str, modes: dict, repeat: int, before=None) -> tuple[list[str], list[str]]:
    """Interleaved timings of each mode (rotating order, after one warm-up pass each): a wall-time
    row and a CPU-time row. ``before`` runs untimed before every pass (dropping the page cache)."""
    for fn in modes.values():
        fn()
    names = list(modes)
    wall: dict[str, list[float]] = {m: [] for m in names}
    cpu: dict[str, list[float]] = {m: [] for m in names}
    for r in range(repeat):
        for m in names[r % len(names) :] + names[: r % len(names)]:
            if before:
                before()
            w, c = _timed(modes[m])
            wall[m].append(w)
            cpu[m].append(c)
    return _row(f"{name} (wall)", wall), _row(f"{name} (CPU)", cpu)


def _row(name: str, times: dict[str, list[float]]) -> list[str]:
    med = {m: statistics.median(t) for m, t in times.items()}
    print(f"  {name}: " + ", ".join(f"{m} {med[m] * 1000:.1f} ms" for m in times), file=sys.stderr)

    def ratio(a: str, b: str) -> str:
        per = [x / y for x, y in zip(times[a], times[b])]
        return f"{med[a] / med[b]:.2f} ({min(per):.2f}-{max(per):.2f})"

    cells = [f"{med[m] * 1000:,.0f} ({min(t) * 1000:,.0f}-{max(t) * 1000:,.0f})" for m, t in times.items()]
    return [name.rsplit(" (", 1)[0], *cells, *(ratio(a, b) for a, b in RATIOS)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="20,000 rounds, 3 repeats: a smoke run")
    ap.add_argument("--rounds", type=int, default=1_000_000, help="rounds in the run (default 1,000,000)")
    ap.add_argument("--repeat", type=int, default=9, help="timed rounds per mode (default 9)")
    ap.add_argument("--block-rounds", type=int, default=16384)
    ap.add_argument("--out", help="scratch directory (default: a temporary one, removed)")
    args = ap.parse_args(argv)
    rounds, repeat = (20_000, 3) if args.quick else (args.rounds, args.repeat)

    scratch = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="specreplay-verify-"))
    scratch.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()
    started = time.perf_counter()
    rows = []
    try:
        path = scratch / "run"
        if path.exists():
            shutil.rmtree(path)
        summary = pack_batches(
            synth_run(ARTICLE, rounds, seed=1, early_stop_rate=0.05),
            path,
            block_rounds=args.block_rounds,
            manifest={"config": ARTICLE.to_json(), "layout": "all"},
        )
        rows.append(compare("read every block", {m: (lambda m=m: read_all(READERS[m](path))) for m in READERS}, repeat))
        for workers in (1, 2):
            modes = {m: (lambda m=m, w=workers: replay_all(path, m, w)) for m in READERS}
            rows.append(compare(f"read+replay, {workers} thread(s)", modes, repeat))
        files = sorted(str(f) for f in path.rglob("*.npy"))
        modes = {m: (lambda m=m: replay_all(path, m, 2)) for m in READERS}
        rows.append(compare("read+replay, 2 threads, cold page cache", modes, repeat, before=lambda: evict(files)))
        mb = summary.bytes / 1e6
    finally:
        if not args.out:
            shutil.rmtree(scratch, ignore_errors=True)
    load1 = os.getloadavg()

    print(f"## Cost of the per-block check ({'quick' if args.quick else 'full'} run)\n")
    print(
        f"{machine_line()}; "
        f"run: {rounds:,} rounds, {mb:,.1f} MB, blocks of {args.block_rounds:,}; {repeat} interleaved repeats after a warm-up; "
        f"load average {load0[0]:.1f} at start, {load1[0]:.1f} at end; total {time.perf_counter() - started:.0f} s\n"
    )
    print(
        f"checksum speed on this machine (64 MB in memory, per CPU-second): CRC-32 {hash_rate(zlib.crc32):.2f} GB/s, "
        f"sha256 {hash_rate(lambda v: hashlib.sha256(v).digest()):.2f} GB/s\n"
    )
    header = [
        "what",
        "mmap, no check (before)",
        "mmap + CRC-32",
        "pread, no check",
        "pread + CRC-32 (default)",
        "default / pread",
        "default / before",
        "mmap+CRC / mmap",
    ]
    for title, k in (
        ("Wall time, ms: median (min-max)", 0),
        ("CPU time of the process (all threads), ms: median (min-max)", 1),
    ):
        print(f"{title}\n")
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---" for _ in header) + "|")
        for r in rows:
            print("| " + " | ".join(r[k]) + " |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
