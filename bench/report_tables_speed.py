"""CPU seconds and peak resident memory of report's tables/ alone (analysis.tables.stream).

    python bench/report_tables_speed.py RUN OUT_DIR

Loads RUN as report does (the metrics' round columns, its batches kept up to LOADED_BYTES), then
writes rounds.parquet and nodes.parquet under OUT_DIR with write_run_tables, counting the node
metrics as report's pass does, and prints that phase's CPU seconds (getrusage of this process,
threads included) and the peak RSS before and after it. Run it from each checkout, interleaved, to
compare two versions on the same load.
"""

from __future__ import annotations

import resource
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.report.options import LOADED_BYTES  # noqa: E402
from analysis.tables.runs import TABLES_ROUNDS, load_run  # noqa: E402
from analysis.tables.stream import write_run_tables  # noqa: E402


def cpu_and_peak() -> tuple[float, float]:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime, u.ru_maxrss / 1024


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    run_path, out_dir = sys.argv[1], sys.argv[2]
    run = load_run(run_path, Path(run_path).name, progress=False, tables=TABLES_ROUNDS, keep_bytes=LOADED_BYTES)
    shutil.rmtree(out_dir, ignore_errors=True)
    cpu, peak = cpu_and_peak()
    write_run_tables([run], out_dir, ["parquet"], on_counts=lambda label, counts: None)
    cpu_after, peak_after = cpu_and_peak()
    print(f"tables/: cpu {cpu_after - cpu:.2f} s, peak {peak:.0f} MB before, {peak_after:.0f} MB after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
