"""CPU seconds and file size of report's tables/ Parquet files written with other pyarrow options.

    python bench/parquet_options.py REPORT/tables [--repeats 3]

Reads ``rounds.parquet`` and ``nodes.parquet`` from a report's tables/ (bench/million.py --keep
--only report leaves one), then writes each table again under every variant of VARIANTS, as
analysis.tables.stream writes it (a ParquetWriter, a row group of one chunk per column at a time),
variants interleaved, ``--repeats`` times. Prints per variant the CPU seconds (median of the repeats,
this process, threads included), the ratio to the first variant measured in the same process and the
file size, and checks that every variant reads back as the same frame.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# name -> keyword arguments of pyarrow.parquet.ParquetWriter, the first the baseline; a value in
# COLUMN_SETS (use_dictionary, write_statistics) stands for that list of the table's columns
VARIANTS: dict[str, dict] = {
    "snappy (pyarrow default)": {"compression": "snappy"},
    "none": {"compression": "none"},
    "lz4": {"compression": "lz4"},
    "zstd 1": {"compression": "zstd", "compression_level": 1},
    "snappy, no statistics": {"compression": "snappy", "write_statistics": False},
    "snappy, statistics but text": {"compression": "snappy", "write_statistics": "not text"},
    "snappy, dictionary for text only": {"compression": "snappy", "use_dictionary": "text"},
    "snappy, dictionary but floats": {"compression": "snappy", "use_dictionary": "not float"},
    "snappy, dictionary but floats, statistics but text": {
        "compression": "snappy",
        "use_dictionary": "not float",
        "write_statistics": "not text",
    },
    "lz4, dictionary but floats, statistics but text": {
        "compression": "lz4",
        "use_dictionary": "not float",
        "write_statistics": "not text",
    },
    "none, dictionary but floats, no statistics": {
        "compression": "none",
        "use_dictionary": "not float",
        "write_statistics": False,
    },
    "snappy, no dictionary": {"compression": "snappy", "use_dictionary": False},
}


def _is_text(t) -> bool:
    import pyarrow as pa

    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _is_float(t) -> bool:
    import pyarrow as pa

    return pa.types.is_floating(t)


COLUMN_SETS = {
    "text": _is_text,
    "not text": lambda t: not _is_text(t),
    "not float": lambda t: not _is_float(t),
}


def row_groups(path: Path) -> list:
    """The file's row groups as Tables of one chunk per column (as the report's writer cuts them)."""
    import pyarrow.parquet as pq

    f = pq.ParquetFile(path)
    return [f.read_row_group(i).combine_chunks() for i in range(f.metadata.num_row_groups)]


def leaf_path(field) -> str:
    """The Parquet column path of an Arrow field (a list's values are NAME.list.element)."""
    import pyarrow as pa

    if pa.types.is_list(field.type) or pa.types.is_large_list(field.type):
        return f"{field.name}.list.{leaf_path(field.type.value_field)}"
    return field.name


def resolved(options: dict, schema) -> dict:
    """``options`` with each COLUMN_SETS name replaced by the paths of ``schema``'s columns it names
    (a list column by its values' type)."""

    def leaf_type(t):
        return leaf_type(t.value_type) if hasattr(t, "value_type") else t

    return {
        k: [leaf_path(f) for f in schema if COLUMN_SETS[v](leaf_type(f.type))]
        if isinstance(v, str) and v in COLUMN_SETS
        else v
        for k, v in options.items()
    }


def write(groups: list, path: Path, options: dict) -> float:
    """CPU seconds writing ``groups`` to ``path`` with ``options``."""
    import pyarrow.parquet as pq

    options = resolved(options, groups[0].schema)
    t0 = time.process_time()
    with pq.ParquetWriter(path, groups[0].schema, **options) as w:
        for g in groups:
            w.write_table(g, row_group_size=g.num_rows)
    return time.process_time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tables", type=Path, help="a report's tables/ directory")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import pandas as pd

    tables = {name: row_groups(args.tables / f"{name}.parquet") for name in ("rounds", "nodes")}
    cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}
    size: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            for k, (variant, options) in enumerate(VARIANTS.items()):
                spent = 0.0
                size[variant] = 0
                for name, groups in tables.items():
                    path = Path(tmp) / f"{k}_{name}.parquet"
                    spent += write(groups, path, options)
                    size[variant] += path.stat().st_size
                cpu[variant].append(spent)
        for name in tables:  # every variant reads back as the baseline's frame
            want = pd.read_parquet(Path(tmp) / f"0_{name}.parquet")
            for k, variant in enumerate(VARIANTS):
                got = pd.read_parquet(Path(tmp) / f"{k}_{name}.parquet")
                pd.testing.assert_frame_equal(got, want, check_exact=True)
    rows = sum(g.num_rows for g in tables["nodes"])
    print(f"nodes: {rows:,} rows; rounds: {sum(g.num_rows for g in tables['rounds']):,}; repeats {args.repeats}")
    base = statistics.median(cpu[next(iter(VARIANTS))])
    print("| variant | CPU s (median, range) | ratio | MB |")
    print("|---|---|---|---|")
    for variant in VARIANTS:
        med = statistics.median(cpu[variant])
        spread = f"{med:.2f} ({min(cpu[variant]):.2f}-{max(cpu[variant]):.2f})"
        print(f"| {variant} | {spread} | {med / base:.2f} | {size[variant] / 1e6:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
