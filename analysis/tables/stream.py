"""The round and node tables written block by block (report's tables/), never held whole.

``write_run_tables`` writes ``rounds`` and ``nodes`` as analysis.tables.build.export_tables writes
the whole tables (the same bytes: CSV appended frame by frame, Parquet in the row groups pandas'
``to_parquet`` writes), from a run read again in batches: a 10^6-round run has 13 million node
rows, which as one pandas frame take gigabytes.

Rows come out in run order. A packed run's rounds are stored one group per exact shape, whose
ordinals interleave, so its blocks are read by their first round (``Run.chunks(in_run_order=True)``)
and the rows of a chunk wait until the next chunk's first round is known: no later chunk holds a
round before it, so every pending row before it is final. What waits is at most about one block per
group.

The node rows in run order stay numpy columns (node_arrow's cells) until a row group is complete:
each row group's Table is made once, one chunk per column (_RowGroups), and written
without another copy to cut it. The round rows go to the writer as a Table per block.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from replay.io.table_files import PARQUET_OPTIONS, arrow_sink, write_csv_rows
from replay.util.file_formats import require_formats

from .batch import TableParts, batch_table_parts
from .build import EXPORT_FORMATS, empty_node_table, empty_round_table
from .cells import in_run_order, take_cells
from .node_arrow import node_arrow_table
from .round_arrow import round_table as arrow_round_table
from .runs import LabelledRun, each_batch

# pyarrow's default row group size (pyarrow.parquet.write_table, which pandas' to_parquet calls):
# groups of exactly this many rows, the last one shorter, make the file pandas writes for the whole table
PARQUET_ROW_GROUP = 1024 * 1024

Progress = Callable[[int, int], None]


class TableWriter:
    """One table as ``NAME.csv`` and/or ``NAME.parquet``, appended frame by frame; closed, the files
    are those export_tables writes for the frames' concatenation (every frame has the same columns
    and dtypes, as the tables' blocks do)."""

    def __init__(self, out_dir: str | Path, name: str, formats: Sequence[str] = EXPORT_FORMATS):
        require_formats(formats, EXPORT_FORMATS, "table")
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        self.csv = out_dir / f"{name}.csv" if "csv" in formats else None
        self.parquet = out_dir / f"{name}.parquet" if "parquet" in formats else None
        self.rows = 0
        self._writer = None  # pyarrow.parquet.ParquetWriter, opened once the first row group's types are known
        self._sink = None  # the open file it writes into (arrow_sink), closed after it
        self._pending: list = []  # pyarrow Tables not written yet
        # per part (a run) appended, the text columns that held a value: pandas concatenates a run's
        # column of text with another run's all-missing one as object, which pyarrow writes as string
        self._parts: list[set[str]] = [set()]

    def new_part(self) -> None:
        """The frames appended from now on are another run's (build_tables concatenates the runs)."""
        self._parts.append(set())

    def append(self, df) -> None:
        """Rows as a pandas frame, or as the pyarrow Table ``Table.from_pandas(frame, preserve_index=False)`` makes of it."""
        import pyarrow as pa

        if not len(df):
            return
        table = pa.Table.from_pandas(df, preserve_index=False) if isinstance(df, pd.DataFrame) else df
        if self.csv is not None:  # each cell is formatted alone: parts append to the whole table's text
            with open(self.csv, "ab" if self.rows else "wb") as out:
                write_csv_rows(table, out, header=not self.rows)
        self.rows += len(df)
        if self.parquet is not None:
            for f in table.schema:
                if (pa.types.is_string(f.type) or pa.types.is_large_string(f.type)) and table[f.name].null_count < len(
                    df
                ):
                    self._parts[-1].add(f.name)
            self._pending.append(table)
            self._write_groups(final=False)

    def close(self, empty: pd.DataFrame | None = None) -> list[Path]:
        """Write what is left; ``empty`` (the table without rows) when nothing was appended."""
        if not self.rows and (self._writer is None and not self._pending):
            if empty is None:
                raise ValueError("TableWriter.close: nothing appended and no empty table given")
            from .build import export_tables

            name = (self.csv or self.parquet).stem
            formats = [f for f, p in (("csv", self.csv), ("parquet", self.parquet)) if p is not None]
            return export_tables({name: empty}, (self.csv or self.parquet).parent, formats)
        if self.parquet is not None:
            self._write_groups(final=True)
            self._writer.close()
            self._sink.close()
        return [p for p in (self.csv, self.parquet) if p is not None]

    def _write_groups(self, final: bool) -> None:
        """Whole row groups of what is pending (all of it when ``final``)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = sum(t.num_rows for t in self._pending)
        if rows < PARQUET_ROW_GROUP and not final:
            return
        if self._writer is None:
            # the types of the whole table's conversion: a column that is all empty lists or all None
            # in one block is typed by the others (null promoted); wait for a block that types it
            table = pa.concat_tables(self._pending, promote_options="default")
            if not final and any(_has_null(f.type) for f in table.schema):
                return
            # pandas' metadata (column dtypes) of a block whose conversion gave those types
            typed = [t for t in self._pending if t.schema.equals(table.schema)] or self._pending
            schema = self._as_concatenated(table.schema.with_metadata(typed[0].schema.metadata))
            del table, typed  # no block kept alive past its copy below
            self._sink = arrow_sink(self.parquet)
            self._writer = pq.ParquetWriter(self._sink, schema, **PARQUET_OPTIONS)
        schema = self._writer.schema
        pending, self._pending = self._pending, []
        table = pa.concat_tables([t if t.schema.equals(schema) else t.cast(schema) for t in pending])
        del pending
        while table.num_rows >= PARQUET_ROW_GROUP or (final and table.num_rows):
            holder, table = [table], None
            group, table = _cut(holder, min(PARQUET_ROW_GROUP, holder[0].num_rows))
            self._writer.write_table(group, row_group_size=PARQUET_ROW_GROUP)
            del group
        if table.num_rows:
            self._pending = [table]

    def _as_concatenated(self, schema):
        """``schema`` with each text column that is all missing in some parts but not in others
        typed as pandas' concatenation of those parts gives it: an object column, pyarrow's string."""
        import json

        import pyarrow as pa

        meta = json.loads(schema.metadata[b"pandas"])
        for i, f in enumerate(schema):
            have = [f.name in part for part in self._parts]
            if pa.types.is_large_string(f.type) and any(have) and not all(have):
                schema = schema.set(i, pa.field(f.name, pa.string()))
                for col in meta["columns"]:
                    if col["name"] == f.name:
                        col.update(pandas_type="unicode", numpy_type="object")
        return schema.with_metadata({**schema.metadata, b"pandas": json.dumps(meta).encode()})


def _cut(holder: list, size: int) -> tuple:
    """(the first ``size`` rows of the table ``holder[0]`` with one chunk per column, as a whole
    frame's conversion gives them: the writer's pages depend on the chunks; the other rows, as they
    are). The holder is emptied and each column's blocks dropped once copied, so that the copy
    does not double the memory of a row group."""
    import pyarrow as pa

    table = holder.pop()
    if table.num_rows == size and all(column.num_chunks == 1 for column in table.columns):
        return table, table.slice(size)  # a row group made whole (_RowGroups): nothing to copy
    schema = table.schema
    first, rest = [], []
    while table.num_columns:
        column = table.column(0)
        first.append(column.slice(0, size).combine_chunks())
        rest.append(column.slice(size))
        del column
        table = table.remove_column(0)
        pa.default_memory_pool().release_unused()  # the column's blocks back to the system: no doubled peak
    return pa.Table.from_arrays(first, schema=schema), pa.Table.from_arrays(rest, schema=schema)


def _has_null(t) -> bool:
    import pyarrow as pa

    return pa.types.is_null(t) or (pa.types.is_list(t) or pa.types.is_large_list(t)) and _has_null(t.value_type)


class _RowGroups:
    """One run's rows in run order as cells (node_arrow's columns), made pyarrow Tables by
    ``to_table(blocks of cells)`` of PARQUET_ROW_GROUP rows, the last one shorter: each row group's
    columns are joined once, one chunk each, so TableWriter has nothing to cut or copy."""

    def __init__(self, to_table: Callable[[list[dict]], Any]):
        self.to_table = to_table
        self._pending: list[tuple[dict, int]] = []  # (cells, their rows), in run order
        self._rows = 0

    def add(self, cells: dict, rows: int) -> Iterator:
        """The row groups that ``cells`` (``rows`` rows, after those added before) complete."""
        self._pending.append((cells, rows))
        self._rows += rows
        while self._rows >= PARQUET_ROW_GROUP:
            yield self._group(PARQUET_ROW_GROUP)

    def rest(self) -> Iterator:
        """The rows left, as one Table (none when none are)."""
        if self._rows:
            yield self._group(self._rows)

    def _group(self, size: int):
        taken, left = [], size
        while left:
            cells, rows = self._pending.pop(0)
            if rows > left:  # the rows after the group's wait for the next one (views, not copies)
                self._pending.insert(0, (take_cells(cells, slice(left, rows)), rows - left))
                cells, rows = take_cells(cells, slice(0, left)), left
            taken.append(cells)
            left -= rows
        self._rows -= size
        return self.to_table(taken)


def run_table_blocks(
    run: LabelledRun, progress: Callable[[int], None] | None = None, counts: list | None = None
) -> Iterator[tuple]:
    """((round cells, rounds), (node cells, node rows)) of a run loaded without its node table,
    block by block in run order (together: the tables build_tables makes), made from the batches
    load_run kept (``run.batches``), else read again in batches (``progress(rounds)`` after each).
    ``counts``, when given, gets each block's node metrics' counts (load_run's with TABLES_METRICS),
    counted from the per-node arrays the rows are made of."""
    label = run.label
    pending: list[TableParts] = []
    done = 0
    count = counts is not None

    def parts_of(b, res, tree) -> TableParts:
        return batch_table_parts(b, res, tree, label, counts=count)

    # one block at a time (workers=1): the writing, not the replay, takes the time, and each block in
    # flight holds its rows
    for chunk in each_batch(run, parts_of, workers=1):
        if counts is not None:
            counts += [p.node_counts for p in chunk if p is not None and p.node_counts is not None]
        parts = [p for p in chunk if p is not None and p.rounds]
        if not parts:
            continue
        first = min(int(o.min()) for p in parts for o in p.round_ordinals)  # no later chunk holds a round before
        ready, pending = _split(pending, first)
        if ready:
            yield _in_order_cells(ready)
        del ready
        pending += parts
        done += sum(o.shape[0] for p in parts for o in p.round_ordinals)
        if progress:
            progress(done)
    if pending:
        yield _in_order_cells(pending)
    if done != run.rounds:
        raise RuntimeError(f"tables: read {done} rounds of {label} again, the run has {run.rounds}")


def _in_order_cells(parts: list[TableParts]) -> tuple:
    """((round cells, rounds), (node cells, node rows)) of ``parts`` (rows of one run, batch_table_parts',
    some rows each), in run order: the columns of analysis.tables.batch.join_parts' frames of those rounds."""
    rounds, round_ords = in_run_order(
        [c for p in parts for c in p.rounds], [o for p in parts for o in p.round_ordinals]
    )
    nodes, node_ords = in_run_order([c for p in parts for c in p.nodes], [o for p in parts for o in p.node_ordinals])
    return (rounds, round_ords.shape[0]), (nodes, node_ords.shape[0])


def _split(parts: list[TableParts], before: int) -> tuple[list[TableParts], list[TableParts]]:
    """(the rows of rounds before ordinal ``before``, the others), each as TableParts."""
    ready, later = [], []
    for p in parts:
        for rounds, nodes, ro, no in zip(p.rounds, p.nodes, p.round_ordinals, p.node_ordinals):
            for out, keep, node_keep in ((ready, ro < before, no < before), (later, ro >= before, no >= before)):
                if keep.all():
                    out.append(TableParts([rounds], [nodes], [ro], [no]))
                elif keep.any():
                    r, n = np.flatnonzero(keep), np.flatnonzero(node_keep)
                    out.append(TableParts([take_cells(rounds, r)], [take_cells(nodes, n)], [ro[r]], [no[n]]))
    return ready, later


def write_run_tables(
    runs: Sequence[LabelledRun],
    out_dir: str | Path,
    formats: Sequence[str] = EXPORT_FORMATS,
    progress: Progress | None = None,
    on_counts: Callable[[str, list], None] | None = None,
) -> list[Path]:
    """``rounds`` and ``nodes`` of ``runs`` (those with rounds, one after the other) under ``out_dir``,
    block by block: the files export_tables writes for build_tables' two tables. ``progress(rounds
    written, rounds)``. ``on_counts(label, counts)``, when given: the node metrics' counts of each run
    with rounds loaded without them (load_run's TABLES_ROUNDS), counted in this pass."""
    runs = [r for r in runs if r.rounds]
    total = sum(r.rounds for r in runs)
    writers = {name: TableWriter(out_dir, name, formats) for name in ("rounds", "nodes")}
    before = 0
    for k, run in enumerate(runs):
        if k:
            for w in writers.values():
                w.new_part()
        tick = (lambda n, b=before: progress(b + n, total)) if progress else None
        if run.tables[1] is not None:  # a run loaded with its tables gives them whole
            writers["rounds"].append(run.tables[0])
            writers["nodes"].append(run.tables[1])
        else:
            counts = [] if on_counts is not None and run.node_counts is None else None
            _write_blocks(run, writers, tick, counts)
            if counts is not None and on_counts is not None:
                on_counts(run.label, counts)
        before += run.rounds
    if progress:
        progress(total, total)
    # the node table's last rows first: the round table's one row group is the larger copy
    nodes = writers["nodes"].close(empty_node_table())
    return writers["rounds"].close(empty_round_table()) + nodes  # the empty tables as build_tables makes them


def _write_blocks(
    run: LabelledRun,
    writers: dict[str, TableWriter],
    progress: Callable[[int], None] | None,
    counts: list | None = None,
) -> None:
    """The round and node rows of ``run`` (loaded without its node table) to ``writers``: a Table of
    round rows per block, node rows row group by row group (one run's rows per Table: TableWriter
    tells the runs apart by them); ``counts``: see run_table_blocks."""
    import pyarrow as pa

    nodes = _RowGroups(node_arrow_table)
    for (rounds, _), (cells, rows) in run_table_blocks(run, progress, counts):
        writers["rounds"].append(arrow_round_table(rounds))
        for table in nodes.add(cells, rows):
            writers["nodes"].append(table)
            del table
            # a written row group's memory back to the system: Arrow's pool would keep it, and the
            # round table's blocks, held until the end, grow beside it
            pa.default_memory_pool().release_unused()
    for table in nodes.rest():
        writers["nodes"].append(table)
