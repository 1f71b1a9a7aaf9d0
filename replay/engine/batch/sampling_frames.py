"""batch --temperature's per-round outputs from the BatchSampling arrays: JSON Lines (the lines of
``replay --temperature --json``) and a table (``-o rounds.parquet/.csv``), no RoundSampling per round.

The names are replay.engine.sampling.SAMPLING_KEYS; a table spells each length_at_least list as
one column per depth (length_at_least_column), since CSV has no lists.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import IO, Any

import numpy as np

from ..sampling import LENGTH_AT_LEAST_KEYS, SAMPLING_KEYS, RoundSampling, length_at_least_column
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


def _depths(result: BatchResult, rows: np.ndarray) -> np.ndarray:
    """[n] the depth of each round's tree: its length_at_least lists run d = 1..that."""
    return result.num_steps[rows].astype(np.int64)


def sampling_objects(smp: BatchSampling, result: BatchResult, rows: np.ndarray) -> list[dict[str, Any]]:
    """The ``sampling`` objects of rounds ``rows`` (replay.engine.sampling.RoundSampling.to_json's values)."""
    depth = _depths(result, rows)
    lo, hi = smp.expected_lo[rows].tolist(), smp.expected_hi[rows].tolist()
    exact, var = smp.exact[rows].tolist(), smp.variance[rows].tolist()
    own = from_node_logprobs(smp)[rows].tolist()
    ge_lo, ge_hi = smp.length_ge_lo[rows].tolist(), smp.length_ge_hi[rows].tolist()
    t = smp.temperature
    out = []
    for i in range(rows.shape[0]):
        d = int(depth[i])
        values = (
            t,
            lo[i] if exact[i] else None,
            lo[i],
            hi[i],
            lo[i] + 1.0,
            hi[i] + 1.0,
            ge_lo[i][1 : d + 1],
            ge_hi[i][1 : d + 1],
            exact[i],
            var[i] if exact[i] else None,
            own[i],
        )
        out.append(dict(zip(SAMPLING_KEYS, values)))
    return out


def round_sampling_at(smp: BatchSampling, result: BatchResult, i: int) -> RoundSampling:
    """Round ``i`` (usable at T) as the RoundSampling that replay draws under its tree: the values
    sampling_objects gives, P(L >= d) for d = 1 .. the depth of the round's tree."""
    d = int(result.num_steps[i])
    exact = bool(smp.exact[i])
    return RoundSampling(
        smp.temperature,
        float(smp.expected_lo[i]),
        float(smp.expected_hi[i]),
        tuple(float(x) for x in smp.length_ge_lo[i, 1 : d + 1]),
        tuple(float(x) for x in smp.length_ge_hi[i, 1 : d + 1]),
        exact,
        float(smp.variance[i]) if exact else None,
        smp.needs_vocab,
        bool(from_node_logprobs(smp)[i]),
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

    from .frames import record_arrow

    table = record_arrow(result.take(rows))
    exact = smp.exact[rows]
    lo, hi = smp.expected_lo[rows], smp.expected_hi[rows]
    columns: dict[str, Any] = {
        "temperature": np.full(rows.shape[0], smp.temperature),
        "expected_accepted_length": np.where(exact, lo, np.nan),
        "expected_accepted_length_lo": lo,
        "expected_accepted_length_hi": hi,
        "expected_block_efficiency_lo": lo + 1.0,
        "expected_block_efficiency_hi": hi + 1.0,
        "exact": exact,
        "accepted_length_variance": np.where(exact, smp.variance[rows], np.nan),
        "from_node_logprobs": from_node_logprobs(smp)[rows],
    }
    g = smp.length_ge_lo.shape[1] - 1
    for key, arr in zip(LENGTH_AT_LEAST_KEYS, (smp.length_ge_lo, smp.length_ge_hi)):
        for d in range(1, g + 1):
            columns[length_at_least_column(key, d)] = arr[rows, d]
    order = [k for k in SAMPLING_KEYS if k not in LENGTH_AT_LEAST_KEYS]
    names = order[:6] + [c for c in columns if c not in order] + order[6:]
    for name in names:
        table = table.append_column(name, pa.array(columns[name]))
    return table
