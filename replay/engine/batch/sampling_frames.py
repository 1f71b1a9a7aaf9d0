"""batch --temperature's per-round outputs from the BatchSampling arrays: JSON Lines (the lines of
``replay --temperature --json``) and a table (``-o rounds.parquet/.csv``), no RoundSampling per round.

The names are replay.engine.sampling.SAMPLING_KEYS; a table spells each length_at_least list as
one column per depth (length_at_least_column), since CSV has no lists.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import IO, Any

import numpy as np

from replay.core.point_value import point_values

from ..sampling import LENGTH_AT_LEAST_KEYS, SAMPLING_KEYS, RoundSampling, length_at_least_column
from .frames import record_arrow
from .json_lines import write_batch_json_lines
from .result import BatchResult
from .sampling import BatchSampling


def concat_sampling(parts: Sequence[tuple[np.ndarray | None, BatchSampling]]) -> BatchSampling:
    """One BatchSampling from each batch's (ordinals, sampling), in the order of
    ``BatchResult.concat(...).sorted_by_ordinal()`` over the same batches (replay_run's result)."""
    smps = [s for _, s in parts]
    width = max(s.length_ge_lo.shape[1] for s in smps)

    def cat(name: str) -> np.ndarray:
        arrs = [getattr(s, name) for s in smps]
        if arrs[0].ndim == 2:  # deeper trees in some batch: P(L >= d) beyond a tree is 0
            arrs = [np.hstack([a, np.zeros((a.shape[0], width - a.shape[1]))]) for a in arrs]
        return np.concatenate(arrs)

    fields = ("usable", "problem", "expected_lo", "expected_hi", "length_ge_lo", "length_ge_hi", "exact", "variance")
    out = {f: cat(f) for f in fields}
    out["from_node_logprobs"] = np.concatenate([from_node_logprobs(s) for s in smps])
    ords = [o for o, _ in parts]
    if all(o is not None for o in ords):
        order = np.argsort(np.concatenate(ords), kind="stable")  # as BatchResult.sorted_by_ordinal
        out = {f: a[order] for f, a in out.items()}
    return BatchSampling(smps[0].temperature, needs_vocab=any(s.needs_vocab for s in smps), **out)


def from_node_logprobs(smp: BatchSampling) -> np.ndarray:
    """[R] bool: which rounds the dump's node_logprobs decided (none when the field is unset)."""
    own = smp.from_node_logprobs
    return np.zeros(smp.usable.shape[0], dtype=bool) if own is None else own


def sampling_columns(smp: BatchSampling, result: BatchResult, rows: np.ndarray) -> dict[str, np.ndarray]:
    """The ``sampling`` values of rounds ``rows`` ([n] int64) by SAMPLING_KEYS: [n] each, NaN where
    a value is null (expected_accepted_length where its bounds differ, replay.core.point_value; the
    variance unless exact); each length_at_least list as [n, G] P(L >= d), d = 1 .. G (0 beyond a
    round's tree)."""
    exact = smp.exact[rows]
    lo, hi = smp.expected_lo[rows], smp.expected_hi[rows]
    values = (
        np.full(rows.shape[0], smp.temperature),
        point_values(lo, hi),
        lo,
        hi,
        lo + 1.0,
        hi + 1.0,
        smp.length_ge_lo[rows, 1:],
        smp.length_ge_hi[rows, 1:],
        exact,
        np.where(exact, smp.variance[rows], np.nan),
        from_node_logprobs(smp)[rows],
    )
    return dict(zip(SAMPLING_KEYS, values))


_NULL_FOR_NAN = ("expected_accepted_length", "accepted_length_variance")


def sampling_objects(smp: BatchSampling, result: BatchResult, rows: np.ndarray) -> list[dict[str, Any]]:
    """The ``sampling`` objects of rounds ``rows`` (replay.engine.sampling.RoundSampling.to_json's
    values): sampling_columns' values, None for NaN, each length_at_least list as deep as the round's tree."""
    columns = {k: v.tolist() for k, v in sampling_columns(smp, result, rows).items()}
    depths = result.num_steps[rows].tolist()
    out = []
    for i, d in enumerate(depths):
        obj = {k: v[i] for k, v in columns.items()}
        for k in LENGTH_AT_LEAST_KEYS:
            obj[k] = obj[k][:d]
        for k in _NULL_FOR_NAN:
            obj[k] = None if math.isnan(obj[k]) else obj[k]  # NaN: no value, null
        out.append(obj)
    return out


def round_sampling_at(smp: BatchSampling, result: BatchResult, i: int) -> RoundSampling:
    """Round ``i`` (usable at T) as the RoundSampling that replay draws under its tree: the values
    sampling_objects gives, P(L >= d) for d = 1 .. the depth of the round's tree."""
    obj = sampling_objects(smp, result, np.asarray([i]))[0]
    return RoundSampling(
        obj["temperature"],
        obj["expected_accepted_length_lo"],
        obj["expected_accepted_length_hi"],
        tuple(obj["length_at_least_lo"]),
        tuple(obj["length_at_least_hi"]),
        obj["exact"],
        obj["accepted_length_variance"],
        smp.needs_vocab,
        obj["from_node_logprobs"],
    )


def write_sampling_json_lines(result: BatchResult, smp: BatchSampling, rows: np.ndarray, out: IO[str]) -> int:
    """``replay --temperature --json``'s lines for rounds ``rows`` of ``result`` (each replayed and
    usable): the greedy record's line (write_batch_json_lines) with the ``sampling`` object spliced in."""
    import io

    part = result.take(rows)
    buf = io.StringIO()
    write_batch_json_lines(part, buf)
    objs = sampling_objects(smp, result, rows)
    lines = buf.getvalue().splitlines()
    if len(lines) != len(objs):
        raise ValueError(f"{len(lines)} greedy lines for {len(objs)} sampling objects")
    for line, obj in zip(lines, objs):
        # json_line's text of {**record, "sampling": obj}: json.dumps with its default separators
        out.write(f'{line[:-1]}, "sampling": {json.dumps(obj)}}}\n')
    return len(lines)


def sampling_arrow(result: BatchResult, smp: BatchSampling, rows: np.ndarray):
    """The per-round table of rounds ``rows``: record_arrow's columns, then SAMPLING_KEYS (each
    length_at_least list as length_at_least_lo_1 .. _G, 0 beyond a round's tree, NaN-free)."""
    import pyarrow as pa

    table = record_arrow(result.take(rows))
    values = sampling_columns(smp, result, rows)
    columns = {k: v for k, v in values.items() if k not in LENGTH_AT_LEAST_KEYS}
    for key in LENGTH_AT_LEAST_KEYS:
        for d in range(1, values[key].shape[1] + 1):
            columns[length_at_least_column(key, d)] = values[key][:, d - 1]
    order = [k for k in SAMPLING_KEYS if k not in LENGTH_AT_LEAST_KEYS]
    names = order[:6] + [c for c in columns if c not in order] + order[6:]
    for name in names:
        table = table.append_column(name, pa.array(columns[name]))
    return table
