"""The report's directory: index.html and tables/ written beside it and swapped in whole (an
interrupt leaves the earlier report or this one), a record of the files written, and the check,
before any work, that the directory is new, empty, or a report written before.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from analysis.tables.build import EXPORT_FORMATS, export_tables
from analysis.tables.runs import LabelledRun, with_node_counts
from analysis.tables.stream import write_run_tables
from replay.util.atomic import atomic_path, clear_leftovers, staged_directory
from replay.util.bounded import read_json_file
from replay.util.errors import SpecReplayError

from .html import report_page
from .options import ReportOptions
from .page import render_page

# the row-level tables (a row per round, a row per draft node): written block by block
# (analysis.tables.stream), not from the page's copy, and as Parquet alone unless CSV is asked for
# (at 10^6 rounds nodes.csv is 1.24 GB and takes half of report's time)
ROW_TABLES = frozenset({"rounds", "nodes"})


_NOT_EXPORTED = ROW_TABLES | {"runs_side_by_side"}  # runs_side_by_side: the page's summary of several runs only


def row_table_formats(csv: bool) -> tuple[str, ...]:
    """The formats ROW_TABLES are written in: Parquet, and CSV too when ``csv`` (report --csv-tables)."""
    return EXPORT_FORMATS if csv else ("parquet",)


def write_report(
    runs: Sequence[LabelledRun],
    out_dir: str | Path,
    opts: ReportOptions = ReportOptions(),
    tables: bool = True,
    csv_tables: bool = False,
) -> Path:
    """Write ``out_dir/index.html`` (and the tables under ``out_dir/tables``: each as CSV and Parquet,
    but ROW_TABLES as Parquet alone unless ``csv_tables``).

    The round and node tables are written first, block by block (analysis.tables.stream: the run is
    read again), so the runs may be loaded without them (``tables=TABLES_METRICS``), or without
    their node metrics too (TABLES_ROUNDS: that pass counts them from the per-node arrays it derives
    anyway, not the loading; analysis.tables.runs.with_node_counts without tables/); their progress
    is ``opts.progress``'s phase "tables" (rounds written, rounds)."""
    out_dir = Path(out_dir)
    clear_leftovers(out_dir)
    check_report_dir(out_dir)
    # the whole report is built beside out_dir and replaces it with renames: an interrupt leaves the
    # earlier report or this one (check_report_dir made sure out_dir holds nothing else)
    with staged_directory(out_dir, whole=True) as staging:
        counted: dict[str, list] = {}
        if tables:
            tick = opts.progress("tables") if opts.progress else None
            formats = row_table_formats(csv_tables)
            write_run_tables(runs, staging / TABLES_DIR, formats, progress=tick, on_counts=counted.__setitem__)
            _return_freed_memory()
        runs = [replace(r, node_counts=counted[r.label]) if r.label in counted else with_node_counts(r) for r in runs]
        shown, all_tables = report_page(runs, opts)
        exported = {k: v for k, v in all_tables.items() if k not in _NOT_EXPORTED} if tables else {}
        del all_tables
        written = frozenset(exported) | (ROW_TABLES if tables else frozenset())
        page = render_page(replace(shown, table_files=written, row_tables_csv=csv_tables))
        del shown
        (staging / "index.html").write_text(page, encoding="utf-8")
        if tables:
            export_tables(exported, staging / TABLES_DIR)
        _write_record(staging)
    return out_dir / "index.html"


def report_files(out_dir: Path) -> list[str]:
    """index.html and tables/'s files as they are in ``out_dir`` (names relative to it)."""
    files = ["index.html"] if (out_dir / "index.html").is_file() else []
    tables = out_dir / TABLES_DIR
    if tables.is_dir() and not tables.is_symlink():
        files += [f"{TABLES_DIR}/{p.name}" for p in sorted(tables.iterdir())]
    return files


def _write_record(out_dir: Path) -> None:
    """What this report wrote, so that the next one into the directory replaces only that."""
    body = {"written_by": "specreplay report", "files": report_files(out_dir)}
    with atomic_path(out_dir / REPORT_RECORD) as tmp:
        tmp.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")


def _recorded_files(out_dir: Path) -> set[str] | None:
    """The files an earlier report recorded writing here, or None (no record, or not one of ours)."""
    record = out_dir / REPORT_RECORD
    if record.is_symlink() or not record.is_file():
        return None
    try:
        body = read_json_file(record)
    except SpecReplayError:
        return None
    files = body.get("files") if isinstance(body, dict) and body.get("written_by") == "specreplay report" else None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    return set(files)


TABLES_DIR = "tables"


REPORT_RECORD = ".specreplay-report.json"  # the files a report wrote (what the next one may replace)


REPORT_ENTRIES = ("index.html", TABLES_DIR, REPORT_RECORD)  # what write_report writes in its directory


STAGING_PREFIX = ".tables.partial-"  # an older version's staging of tables/ inside the report: replaced with it


def check_report_dir(out_dir: Path) -> None:
    """Refuse a directory that is neither new, nor empty, nor a report written before, before any
    work: an earlier report is one whose record (REPORT_RECORD) lists every file of its index.html
    and tables/; the report replaces those, and must not delete or mix with anything else (a
    user's own index.html or tables/ is not a report's, whatever its name)."""
    if not out_dir.is_dir():
        return
    entries = sorted(p.name for p in out_dir.iterdir() if not p.name.startswith(STAGING_PREFIX))
    if not entries:
        return
    # a link is never the report's own: writing or replacing it would change the file it points at
    foreign = [name for name in entries if name not in REPORT_ENTRIES or (out_dir / name).is_symlink()]
    tables = out_dir / TABLES_DIR
    if not foreign and tables.exists() and not tables.is_dir():
        foreign = [TABLES_DIR]
    if not foreign:
        recorded = _recorded_files(out_dir)
        present = report_files(out_dir)
        foreign = present if recorded is None else [f for f in present if f not in recorded]
        if recorded is None and not present:
            foreign = entries
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise SpecReplayError(
            f"-o {out_dir}: not empty and not a report (it holds {shown}); report writes index.html and tables/ "
            f"into a new or empty directory, or replaces those of an earlier report (the files its {REPORT_RECORD} "
            "lists): choose another directory"
        )


def _return_freed_memory() -> None:
    """Hand the memory tables/ freed back to the system before the page's phases: glibc's malloc
    (malloc_trim; nothing where there is no glibc) and Arrow's pool keep freed blocks (at 10^6
    rounds ~0.7 GB, ~0.4 GB of them Arrow's), which would stay resident under the page's own."""
    import ctypes
    import gc

    import pyarrow as pa

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    pa.default_memory_pool().release_unused()
