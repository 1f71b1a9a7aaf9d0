"""``stats --temperature T`` on the batch arrays: analysis.tables.sampling's RunSampling of a run
loaded by the batch path, without a RoundResult per round.

The batches are those load_run read (``sampling_along``, the run read once), else the run is read
again; each batch's rounds at T come from
replay.engine.batch.recorded.sampling_at (batch --temperature's rule: the top-K rows, or the dump's
node_logprobs where it records them at T), and each batch keeps only its usable rounds' numbers
(E[L] bounds, P(L >= d) bounds, exactness, nodes, steps) and its refused rounds' keys. Joined in run
order, they are the arrays the round path (tests/reference_runs.py's reference_run_sampling over
RoundResults) builds: the same values in the same order, so the same sums. A refused round's reason
is worded by the engine in the round path's words (replay.engine.batch.recorded.refusal_texts: the
file, the field and the row).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from replay.engine.batch.recorded import node_logprob_gaps_batch, refusal_texts, sampling_at
from replay.engine.batch.sampling_frames import from_node_logprobs
from replay.engine.runs import PerBatch, Run, replay_run
from replay.engine.sampling import sampling_skip
from replay.io.manifest import Manifest
from replay.util.errors import SpecReplayError

from .runs import LabelledRun


@dataclass(frozen=True, eq=False)
class SamplingAlong:
    """One batch's _batch_part, computed while load_run read it (sampling_along)."""

    temperature: float
    vocab_size: int | None
    node_temperatures: tuple[float, ...] | None
    part: dict


def sampling_along(temperature: float, vocab_of: Callable[[Manifest], int | None]) -> Callable[[Run], PerBatch | None]:
    """analysis.tables.runs.load_run's ``per_run`` for stats --temperature: each batch's rounds at T
    computed as the run is read, so that batch_run_sampling does not read and replay it again.
    ``vocab_of(manifest)``: the vocabulary size the command uses; when it raises (a --vocab-size that
    the manifest contradicts) nothing is read along, and the error comes where the command asks."""
    t = float(temperature)

    def per_run(opened: Run) -> PerBatch | None:
        try:
            vocab = vocab_of(opened.manifest)
        except SpecReplayError:
            return None
        nodes = opened.manifest.node_logprob_temperatures
        key = None if nodes is None else tuple(nodes)
        return lambda b, res, cfg: SamplingAlong(t, vocab, key, _batch_part(b, res, cfg, t, vocab, nodes))

    return per_run


def _batch_part(batch, res, cfg, t: float, vocab_size, nodes) -> dict:
    """One batch's replayed rounds at T: the usable ones' numbers, the refused ones' keys and codes."""
    smp = sampling_at(batch, res, cfg, t, vocab_size, nodes)
    ordinals = np.arange(len(res)) if res.ordinals is None else np.asarray(res.ordinals, dtype=np.int64)
    use, bad = res.ok & smp.usable, res.ok & ~smp.usable
    at = {f"{a}_{b}": int(o) for a, b, o in zip(*res.keys[:, use].tolist(), ordinals[use].tolist())}
    gaps = tuple([(at[n], n) for n in names if n in at] for names in node_logprob_gaps_batch(batch, res, t, nodes))
    why = refusal_texts(batch, res, smp, vocab_size, nodes)
    return {
        "ordinal": ordinals[use],
        "expected_lo": smp.expected_lo[use],
        "expected_hi": smp.expected_hi[use],
        "ge_lo": smp.length_ge_lo[use],
        "ge_hi": smp.length_ge_hi[use],
        "exact": smp.exact[use],
        "own": from_node_logprobs(smp)[use],
        "nodes": res.num_nodes[use],
        "steps": res.num_steps[use],
        "bad_ordinal": ordinals[bad],
        "bad_keys": res.keys[:, bad],
        "bad_why": [why[i] for i in np.flatnonzero(bad).tolist()],
        "needs_vocab": bool(smp.needs_vocab and use.any()),
        "gaps": gaps,
    }


def batch_run_sampling(
    run: LabelledRun, temperature: float, vocab_size: int | None, node_temperatures: Sequence[float] | None
) -> tuple:
    """The fields of analysis.tables.sampling.run_sampling's RunSampling for a batch-loaded run, in
    order (module docstring; that module builds it: no import back)."""
    t = float(temperature)
    nodes = None if node_temperatures is None else tuple(node_temperatures)
    along = run.read_along
    if along and all(
        isinstance(a, SamplingAlong)
        and (a.temperature, _vocab_key(a.vocab_size), a.node_temperatures) == (t, _vocab_key(vocab_size), nodes)
        for a in along
    ):
        parts = [a.part for a in along]
    else:
        rep = replay_run(
            run.replay.directory,
            run.options,
            per_batch=lambda b, res, cfg: _batch_part(b, res, cfg, t, vocab_size, node_temperatures),
        )
        parts = list(rep.per_batch)
    order = np.argsort(_cat(parts, "ordinal", np.int64), kind="stable")
    steps = _cat(parts, "steps", np.int64)[order]
    depth = int(steps.max(initial=0))  # the round path's widest row: P(L >= d) for d = 1..a round's depth
    gaps = tuple([n for _, n in sorted(g for p in parts for g in p["gaps"][i])] for i in (0, 1))
    return (
        run.label,
        t,
        _cat(parts, "expected_lo", np.float64)[order],
        _cat(parts, "expected_hi", np.float64)[order],
        _table(parts, "ge_lo", depth, order),
        _table(parts, "ge_hi", depth, order),
        _cat(parts, "exact", bool)[order],
        _cat(parts, "own", bool)[order],
        _cat(parts, "nodes", np.int64)[order],
        steps,
        tuple(_refused(parts, t)),
        any(p["needs_vocab"] for p in parts),
        (gaps[0], gaps[1]),
    )


def _vocab_key(vocab_size: int | None) -> tuple[int, str | None] | None:
    """A vocabulary size and where it came from (replay.core.sampling_problems.VocabSize: messages name it)."""
    return None if vocab_size is None else (int(vocab_size), getattr(vocab_size, "source", None))


def _cat(parts: list[dict], name: str, dtype) -> np.ndarray:
    return np.concatenate([np.asarray(p[name], dtype=dtype) for p in parts] or [np.zeros(0, dtype=dtype)])


def _table(parts: list[dict], name: str, depth: int, order: np.ndarray) -> np.ndarray:
    """[R, depth + 2] P(L >= d), d = 0..depth + 1, in run order: the round path's table (zeros past
    a round's tree; a batch's arrays are as wide as its deepest tree)."""
    out = np.zeros((order.shape[0], depth + 2))
    start = 0
    for p in parts:
        a = p[name]
        w = min(a.shape[1], depth + 2)
        out[start : start + a.shape[0], :w] = a[:, :w]
        start += a.shape[0]
    out[:, 0] = 1.0
    return out[order]


def _refused(parts: list[dict], t: float) -> list:
    """The refused rounds' skipped entries in run order, each in the round path's words (the engine's
    replay.engine.batch.recorded.refusal_texts: the file, the field, the row)."""
    order = np.argsort(_cat(parts, "bad_ordinal", np.int64), kind="stable")
    keys = np.concatenate([p["bad_keys"] for p in parts] or [np.zeros((2, 0), np.int64)], axis=1)[:, order]
    why = [w for p in parts for w in p["bad_why"]]
    return [sampling_skip(f"{a}_{b}", t, why[k]) for (a, b), k in zip(keys.T.tolist(), order.tolist())]
