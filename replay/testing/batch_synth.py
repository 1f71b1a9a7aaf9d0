"""Synthetic runs generated directly as arrays (benchmarks, scale tests): millions of rounds in seconds.

Same acceptance model as replay.testing.synth (the target's top-1 at a node of depth d is the draft's
rank-r child with probability ``hit[d, r]``, another token otherwise), but vectorised over rounds
and without writing per-round files. Expanded nodes are chosen by replay.core.selection's rule
(path probability, ties: rank_ties (replay/core/selection.py); the rank-major fallback without scores or parents); the
trees are built here, independently of replay.engine.batch, so that replaying the output checks
the replay.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from replay.core.config import TreeConfig
from replay.core.selection import rank_major_keys, select_top, top_k_columns
from replay.core.vocab import LAYOUT_ALL, LAYOUTS, PAD_TOKEN
from replay.engine.batch import MatrixStack, RoundBatch
from replay.io.dumpwrite import step_file_name
from replay.util.rows import unique_rows

from .in_memory import round_at
from .synth import DEFAULT_VOCAB, SYNTH_KEY_STRIDE, default_hit_probs


@dataclass(frozen=True)
class SynthSpec:
    """What to generate; every round of one call has the same shape (one RoundBatch)."""

    cfg: TreeConfig
    rounds: int
    steps: int | None = None  # draft steps actually run (default gamma; fewer = early stop)
    seed: int = 0
    extra_cols: int = 2  # recorded draft columns beyond the widest topKSpec entry
    target_cols: int = 1  # columns of the validate matrix (only column 0 is replayed)
    layout: str = "all"  # "all": a target row per node; "parents": per expanded node
    with_scores: bool = True
    with_parents: bool = False
    vocab: int = DEFAULT_VOCAB
    first_key: int = 100


def _descending_logp(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """float32 log-probs that decrease along axis 1 (a draft's sorted top-k): [h, cols, R]."""
    gaps = rng.standard_exponential(size=shape, dtype=np.float32)
    gaps *= np.float32(0.7)
    out = np.empty(shape, dtype=np.float32)
    np.negative(gaps[:, 0], out=out[:, 0])
    for c in range(1, shape[1]):  # a running sum over a few columns; cumsum on a middle axis is slow
        np.subtract(out[:, c - 1], gaps[:, c], out=out[:, c])
    return out


def _tokens(rng: np.random.Generator, shape: tuple[int, ...], vocab: int) -> np.ndarray:
    """Uniform int32 token ids in [0, vocab)."""
    return rng.integers(0, vocab, size=shape, dtype=np.int32)


def synth_batch(spec: SynthSpec, hit: np.ndarray | None = None, ordinals: np.ndarray | None = None) -> RoundBatch:
    """``spec.rounds`` rounds as one column-major RoundBatch (ids int32, scores float32, parents int32)."""
    cfg = spec.cfg
    steps = cfg.gamma if spec.steps is None else spec.steps
    if not 1 <= steps <= cfg.gamma:
        raise ValueError(f"steps must lie in 1..{cfg.gamma}, got {steps}")
    if spec.layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {spec.layout!r}")
    rng = np.random.default_rng(spec.seed)
    r = spec.rounds
    cols = cfg.max_width + spec.extra_cols
    hit = default_hit_probs(cfg.gamma + 1, cols) if hit is None else np.asarray(hit, dtype=np.float64)
    lanes = np.arange(r)
    n_all = 1 + sum(cfg.level_sizes[:steps])
    top1 = _tokens(rng, (n_all, r), spec.vocab)  # misses and leaves: any token
    expanded_ids: list[np.ndarray] = []
    mats: list[MatrixStack] = []
    level_lp = np.zeros((1, r))  # [L, R] path log-probs of the current level, tree order
    start, next_start = 0, 1
    for i in range(steps):
        h, widths = cfg.top_head[i], cfg.top_k_spec[i]
        ids = _tokens(rng, (h, cols, r), spec.vocab)
        lp = _descending_logp(rng, (h, cols, r))
        if i == 0:
            chosen = np.zeros((1, r), dtype=np.int64)
        elif spec.with_scores or spec.with_parents:
            chosen = top_k_columns(level_lp, h, lanes)  # path probability; ties: rank_ties (replay/core/selection.py)
        else:
            chosen = np.broadcast_to(_rank_major(cfg.top_k_spec[i - 1], h)[:, None], (h, r))
        node_ids = start + chosen  # [h, R]
        expanded_ids.append(node_ids)
        # The target's top-1 at each expanded node: the rank-r child with probability hit[i, r].
        rank = np.searchsorted(np.cumsum(hit[min(i, hit.shape[0] - 1)]), rng.random(size=(h, r)), side="right")
        hits = rank < np.asarray(widths)[:, None]
        child_tok = np.take_along_axis(ids, np.minimum(rank, cols - 1)[:, None, :], axis=1)[:, 0, :]
        top1[node_ids, lanes] = np.where(hits, child_tok, top1[node_ids, lanes])
        # Next level's path log-probs in tree order: children of the j-th expanded node, by rank.
        parent_lp = np.take_along_axis(level_lp, chosen, axis=0)
        level_lp = np.concatenate([parent_lp[j : j + 1] + lp[j, :w] for j, w in enumerate(widths)])  # float64 sums
        parents = node_ids.astype(np.int32) if spec.with_parents else None
        mats.append(MatrixStack(ids, lp if spec.with_scores else None, parents))
        start, next_start = next_start, next_start + sum(widths)
    col0 = top1 if spec.layout == LAYOUT_ALL else np.take_along_axis(top1, np.concatenate(expanded_ids), axis=0)
    val = _tokens(rng, (col0.shape[0], spec.target_cols, r), spec.vocab)
    val[:, 0, :] = col0
    keys = np.empty((2, r), dtype=np.int64)
    keys[0] = spec.first_key + SYNTH_KEY_STRIDE * np.arange(r)
    keys[1] = keys[0] + 16
    roots = _tokens(rng, (r,), spec.vocab).astype(np.int64)
    return RoundBatch(keys, roots, tuple(mats), MatrixStack(val), spec.layout, None, ordinals)


def _rank_major(prev_widths, heads: int) -> np.ndarray:
    """[heads] the fallback selection (all rank-0 children first), the same for every round."""
    w = np.asarray(prev_widths)
    js = np.repeat(np.arange(w.shape[0]), w)  # each level node's parent slot
    ranks = np.arange(js.shape[0]) - np.concatenate([[0], np.cumsum(w)[:-1]])[js]
    return np.asarray(select_top(rank_major_keys(ranks.tolist(), js.tolist()), heads), dtype=np.int64)


def synth_run(
    cfg: TreeConfig,
    rounds: int,
    seed: int = 0,
    early_stop_rate: float = 0.0,
    **kwargs,
) -> list[RoundBatch]:
    """A run of ``rounds`` rounds; a fraction stops early. One RoundBatch per step count, with
    ordinals giving the run order (keys ascend in that order)."""
    rng = np.random.default_rng(seed)
    steps = np.full(rounds, cfg.gamma)
    if early_stop_rate > 0 and cfg.gamma > 1:
        early = rng.random(rounds) < early_stop_rate
        steps[early] = rng.integers(1, cfg.gamma, size=int(early.sum()))
    out = []
    first_key = kwargs.pop("first_key", 100)
    for s in np.unique(steps):
        members = np.flatnonzero(steps == s)
        b = synth_batch(
            SynthSpec(cfg, members.shape[0], int(s), seed + int(s), first_key=first_key, **kwargs), ordinals=members
        )
        keys = np.empty_like(b.keys)
        keys[0] = first_key + SYNTH_KEY_STRIDE * members
        keys[1] = keys[0] + 16
        out.append(RoundBatch(keys, b.root_tokens, b.steps, b.validate, b.layout, None, members.astype(np.int64)))
    return out


def varied_run(
    cfg: TreeConfig,
    rounds: int,
    seed: int = 0,
    early_stop_rate: float = 0.1,
    max_extra_cols: int = 3,
    max_pad_rows: int = 2,
    max_target_cols: int = 3,
    **kwargs,
) -> list[RoundBatch]:
    """synth_run with the matrix sizes of real engine dumps varied round by round: per
    round, recorded draft columns = widest topKSpec + 0..max_extra_cols, 0..max_pad_rows padding
    rows (all PAD_TOKEN) under each draft step, 1..max_target_cols validate columns; early stops.

    The batches come back padded (replay.io.roundbatch: each round's own sizes in rows_of/cols_of),
    so round_at gives each round's own matrices (write_text_rounds writes them as files).
    """
    rng = np.random.default_rng(seed + 7919)
    out = []
    base = synth_run(
        cfg, rounds, seed, early_stop_rate, extra_cols=max_extra_cols, target_cols=max_target_cols, **kwargs
    )
    for b in base:
        r = len(b)
        cols_of = cfg.max_width + rng.integers(0, max_extra_cols + 1, size=r)
        steps = []
        for st in b.steps:
            rows_of = st.rows + rng.integers(0, max_pad_rows + 1, size=r)
            outside = np.arange(st.cols)[None, :, None] >= cols_of[None, None, :]  # [1, cols, R]
            ids = np.full((st.rows + max_pad_rows, st.cols, r), PAD_TOKEN, dtype=st.ids.dtype)
            ids[: st.rows] = np.where(outside, PAD_TOKEN, st.ids)
            logp = None
            if st.logp is not None:
                logp = np.full(ids.shape, np.nan, dtype=st.logp.dtype)
                logp[: st.rows] = np.where(outside, np.nan, st.logp)
            parents = None
            if st.parents is not None:
                parents = np.full((ids.shape[0], r), PAD_TOKEN, dtype=st.parents.dtype)
                parents[: st.rows] = st.parents
            steps.append(MatrixStack(ids, logp, parents, rows_of, cols_of, None if parents is None else rows_of))
        vcols_of = rng.integers(1, max_target_cols + 1, size=r)
        v = b.validate
        vids = np.where(np.arange(v.cols)[None, :, None] >= vcols_of[None, None, :], PAD_TOKEN, v.ids)
        validate = MatrixStack(vids, None, None, None, vcols_of, None)
        out.append(RoundBatch(b.keys, b.root_tokens, tuple(steps), validate, b.layout, None, b.ordinals))
    return out


def write_text_rounds(directory: str | Path, batches: list[RoundBatch]) -> int:
    """Every round of ``batches`` as plain-text dump files (draft_step_*, validate_*, named by
    replay.io.dumpwrite.step_file_name); returns the number of files. Without synth.write_text_matrix's
    fsync per file: tens of thousands of fsyncs take minutes."""
    directory = Path(directory)
    files = 0
    for batch in batches:
        for i in range(len(batch)):
            rnd = round_at(batch, i)
            named = [(step_file_name("draft", rnd.key, s), m.ids) for s, m in enumerate(rnd.steps)]
            for name, ids in (*named, (step_file_name("validate", rnd.key), rnd.validate.ids)):
                (directory / name).write_text("\n".join(" ".join(map(str, row)) for row in ids.tolist()) + "\n")
                files += 1
    return files


def exact_parts(batch: RoundBatch) -> list[RoundBatch]:
    """``batch``'s rounds split by their own matrix sizes, each part cut to them (unpadded, one batch
    per exact shape): what bench/varied_shapes_speed.py replays beside the padded batch."""
    mats = (*batch.steps, batch.validate)
    if not any(m.padded for m in mats):
        return [batch]
    sizes = []
    for m in mats:
        sizes += [m.own_rows(), m.own_cols()]
        prows = m.own_prows()  # None without parents
        if prows is not None:
            sizes.append(prows)
    uniq, inverse = unique_rows(np.stack(sizes, axis=1))
    out = []
    for u, row in enumerate(uniq):  # one iteration per distinct shape, not per round
        part = batch.take(np.flatnonzero(inverse == u))
        cut, pos = [], 0
        for m in (*part.steps, part.validate):
            n = 3 if m.parents is not None else 2
            cut.append(_trimmed(m, int(row[pos]), int(row[pos + 1]), int(row[pos + 2]) if n == 3 else None))
            pos += n
        out.append(
            RoundBatch(part.keys, part.root_tokens, tuple(cut[:-1]), cut[-1], part.layout, part.names, part.ordinals)
        )
    return out


def _trimmed(m: MatrixStack, rows: int, cols: int, prows: int | None) -> MatrixStack:
    """The stack cut to sizes every one of its rounds has."""
    return MatrixStack(
        m.ids[:rows, :cols],
        None if m.logp is None else m.logp[:rows, :cols],
        None if m.parents is None else m.parents[:prows],
        node_logp=None if m.node_logp is None else m.node_logp[:rows],
    )
