"""The batch form of sampling-mode replay equals the per-round replay (and so the scalar rule)."""

from __future__ import annotations

import contextlib
from dataclasses import replace

import numpy as np
import pytest

from replay.core.config import TreeConfig
from replay.core.vocab import PAD_TOKEN
from replay.engine.batch import replay_batch
from replay.engine.batch.sampling import NO_SCORES_CODE, batch_problems, batch_sampling
from replay.io.roundbatch import MatrixStack
from replay.testing.batch_synth import SynthSpec, synth_batch
from replay.testing.in_memory import round_at
from replay.testing.replayer import replay_round
from replay.testing.round_sampling import node_rows, round_sampling
from replay.testing.sampling_ref import reference_bounds, with_validate_scores

ARTICLE = TreeConfig(3, ((6,), (2, 2), (1, 1)), (1, 2, 2))
VOCAB = 30


def _reference(rr, t: float, vocab: int):
    """The scalar reference's (lo, hi, P(L >= d) lo, hi) of one replayed round."""
    tree = rr.tree
    ids, lp, has = node_rows(tree.tokens.shape[0], rr.validate_ids, rr.validate_logp, rr.layout, tree.expanded_order)
    return reference_bounds(tree.tokens, tree.parents, tree.depths, ids, lp, has, t, vocab)


@pytest.mark.parametrize("layout", ["all", "parents"])
@pytest.mark.parametrize("t", [0.0, 0.4, 1.0, 1.3])
@pytest.mark.parametrize("steps", [3, 2])
def test_batch_equals_per_round_and_reference(layout, t, steps):
    spec = SynthSpec(ARTICLE, 150, steps=steps, seed=int(t * 10) + steps, layout=layout, target_cols=4, vocab=VOCAB)
    batch = with_validate_scores(synth_batch(spec), steps, VOCAB)
    res = replay_batch(batch, ARTICLE, workers=1)
    smp = batch_sampling(batch, res, ARTICLE, t, vocab_size=VOCAB)
    checked = 0
    for i in range(len(batch)):
        if res.error[i]:
            assert not smp.usable[i]
            continue
        rr = replay_round(round_at(batch, i), ARTICLE)
        one = round_sampling(rr, t, VOCAB)
        assert smp.usable[i]
        assert smp.expected_lo[i] == pytest.approx(one.expected_lo, abs=1e-12)
        assert smp.expected_hi[i] == pytest.approx(one.expected_hi, abs=1e-12)
        assert smp.exact[i] == one.exact
        lo, hi, ge_lo, ge_hi = _reference(rr, t, VOCAB)
        assert smp.expected_lo[i] == pytest.approx(lo, abs=1e-12) and smp.expected_hi[i] == pytest.approx(hi, abs=1e-12)
        np.testing.assert_allclose(smp.length_ge_hi[i, : len(ge_hi)], ge_hi, atol=1e-12)
        if t == 0.0:
            assert smp.expected_lo[i] == res.accepted_length[i]
        checked += 1
    assert checked > 100


@pytest.mark.parametrize("layout", ["all", "parents"])
def test_the_kept_trees_and_a_rebuild_give_the_same_bits(layout):
    """batch_sampling reads the trees replay_batch kept (BatchResult.expanded); a result without them
    (None) makes it rebuild each chunk's trees: every output the same, bit for bit, early stops and
    rejected rounds included, and on a subset of rounds (BatchResult.take)."""
    spec = SynthSpec(ARTICLE, 300, steps=3, seed=5, layout=layout, target_cols=4, vocab=VOCAB)
    early = SynthSpec(ARTICLE, 200, steps=2, seed=6, layout=layout, target_cols=4, vocab=VOCAB)
    for batch in (
        with_validate_scores(synth_batch(spec), 3, VOCAB),
        with_validate_scores(synth_batch(early), 2, VOCAB),
    ):
        res = replay_batch(batch, ARTICLE, workers=1)
        assert res.expanded is not None
        some = np.arange(0, len(batch), 3)
        for b, r in ((batch, res), (batch.take(some), res.take(some))):
            kept = batch_sampling(b, r, ARTICLE, 0.7, vocab_size=VOCAB)
            rebuilt = batch_sampling(b, replace(r, expanded=None), ARTICLE, 0.7, vocab_size=VOCAB)
            for name in ("usable", "problem", "expected_lo", "expected_hi", "length_ge_lo", "length_ge_hi", "exact"):
                np.testing.assert_array_equal(getattr(kept, name), getattr(rebuilt, name), err_msg=name)
            np.testing.assert_array_equal(np.isnan(kept.variance), np.isnan(rebuilt.variance))
            assert kept.usable.sum() > len(b) // 2


def test_without_scores_every_round_says_so():
    batch = synth_batch(SynthSpec(ARTICLE, 20, with_scores=False))
    res = replay_batch(batch, ARTICLE, workers=1)
    smp = batch_sampling(batch, res, ARTICLE, 0.7)
    assert not smp.usable.any() and (smp.problem[res.error == 0] == NO_SCORES_CODE).all()
    assert np.isnan(smp.expected_lo).all()


@pytest.mark.parametrize("layout", ["all", "parents"])
@pytest.mark.parametrize("t", [0.0, 0.7, 1.3])
def test_problems_alone_are_the_bounds_problems(layout, t):
    """batch_problems (a refusal's codes, no walk) is batch_sampling's problem, on rows without scores,
    with PAD cells a small vocabulary cannot hold, with zero cells summing below 1; a vocabulary
    below a row's candidates raises the same error."""
    spec = SynthSpec(ARTICLE, 200, seed=5, layout=layout, target_cols=6, vocab=VOCAB)
    scored = with_validate_scores(synth_batch(spec), 5, VOCAB)
    seen = set()
    for batch, vocab in (
        (synth_batch(replace(spec, with_scores=False)), None),
        (_padded(scored, 6), 12),
        (_twice(scored, 7), None),
    ):
        res = replay_batch(batch, ARTICLE, workers=1)
        want = batch_sampling(batch, res, ARTICLE, t, vocab_size=vocab).problem
        np.testing.assert_array_equal(batch_problems(batch, res, ARTICLE, t, vocab_size=vocab), want)
        seen |= set(want.tolist())
    assert seen == {0} if t == 0.0 else len(seen) >= 3  # T = 0 judges no scores
    for fn in (batch_sampling, batch_problems):
        with pytest.raises(Exception, match="vocab") if t > 0.0 else contextlib.nullcontext():
            fn(scored, replay_batch(scored, ARTICLE, workers=1), ARTICLE, t, vocab_size=3)


def _padded(batch, seed):
    """The batch with PAD cells (NaN scores) past column 0 in some rows, and its scores strided
    (a view, not contiguous): the row reader's gather on strided stacks and the kernel's PAD path."""
    rng = np.random.default_rng(seed)
    ids = batch.validate.ids.copy()
    lp = batch.validate.logp.astype(np.float32).copy()
    pad = rng.random(ids.shape) < 0.3
    pad[:, 0] = False  # column 0 is the greedy top-1: PAD there rejects the round
    ids[pad], lp[pad] = PAD_TOKEN, np.nan
    strided = np.empty(lp.shape[:2] + (2 * lp.shape[2],), dtype=np.float32)[..., ::2]
    strided[...] = lp
    return replace(batch, validate=MatrixStack(ids, strided))


@pytest.mark.parametrize("layout", ["all", "parents"])
@pytest.mark.parametrize("t", [0.0, 0.6, 1.0, 1.5])
def test_padded_strided_rows_equal_the_reference(layout, t):
    spec = SynthSpec(ARTICLE, 120, seed=7, layout=layout, target_cols=5, vocab=VOCAB)
    batch = _padded(with_validate_scores(synth_batch(spec), 7, VOCAB), 8)
    assert not batch.validate.logp.flags.c_contiguous
    res = replay_batch(batch, ARTICLE, workers=1)
    # a PAD cell moves its mass to the tail: only a large vocabulary can hold it (PROBLEM_VOCAB)
    vocab = 10**4
    smp = batch_sampling(batch, res, ARTICLE, t, vocab_size=vocab)
    assert smp.usable[res.error == 0].all() and (res.error == 0).sum() > 100
    for i in np.flatnonzero(res.error == 0):
        lo, hi, ge_lo, ge_hi = _reference(replay_round(round_at(batch, i), ARTICLE), t, vocab)
        assert smp.expected_lo[i] == pytest.approx(lo, abs=1e-12) and smp.expected_hi[i] == pytest.approx(hi, abs=1e-12)
        np.testing.assert_allclose(smp.length_ge_lo[i, : len(ge_lo)], ge_lo, atol=1e-12)
        np.testing.assert_allclose(smp.length_ge_hi[i, : len(ge_hi)], ge_hi, atol=1e-12)


def _twice(batch, seed):
    """The batch with a token named twice in some validate rows (the first cell counts) and
    log-probs -inf in some cells past column 0 (weight 0): kinds of cell the child lookup meets.
    A row with a zero cell says no unnamed token has mass, so it must sum to 1: column 0 takes the
    rest (such a row summing below 1 is refused, PROBLEM_ZERO)."""
    rng = np.random.default_rng(seed)
    ids, lp = batch.validate.ids.copy(), batch.validate.logp.copy()
    twice = rng.random(ids.shape[::2]) < 0.2  # [rows, R]
    ids[:, 2][twice] = ids[:, 1][twice]
    zero = rng.random(ids.shape) < 0.05
    zero[:, 0] = False
    lp[zero] = -np.inf
    rows = zero.any(axis=1)  # [rows, R]
    rest = np.exp(lp[:, 1:].astype(np.float64)).sum(axis=1)
    lp[:, 0][rows] = np.log(1.0 - rest[rows]).astype(lp.dtype)
    return replace(batch, validate=MatrixStack(ids, lp))


@pytest.mark.parametrize("layout", ["all", "parents"])
@pytest.mark.parametrize("t", [0.0, 0.7, 1.0, 1.3])
@pytest.mark.parametrize("hostile", ["twice", "padded"])
def test_batch_is_the_round_path_bit_for_bit(layout, t, hostile):
    # The batch runs chunk by chunk on rows it gathers (the compiled loops of replay.core.loops in
    # their vector lanes, the child lookup among them); the round path, one round at a time, runs
    # the same loops alone and looks each child up with numpy: the same float operations, so zero
    # tolerance.
    spec = SynthSpec(ARTICLE, 300, seed=11, layout=layout, target_cols=6, vocab=VOCAB)
    batch = with_validate_scores(synth_batch(spec), 11, VOCAB)
    batch = _twice(batch, 12) if hostile == "twice" else _padded(batch, 13)
    res = replay_batch(batch, ARTICLE, workers=1)
    vocab = 10**4
    smp = batch_sampling(batch, res, ARTICLE, t, vocab_size=vocab)
    replayed = np.flatnonzero(res.error == 0)
    assert replayed.shape[0] > 250 and smp.usable[replayed].all()
    for i in replayed:
        one = round_sampling(replay_round(round_at(batch, i), ARTICLE), t, vocab)
        assert (smp.expected_lo[i], smp.expected_hi[i], smp.exact[i]) == (one.expected_lo, one.expected_hi, one.exact)
        d = len(one.length_ge_lo)  # the round path's P(L >= d) from d = 1
        np.testing.assert_array_equal(smp.length_ge_lo[i, 1 : d + 1], one.length_ge_lo)
        np.testing.assert_array_equal(smp.length_ge_hi[i, 1 : d + 1], one.length_ge_hi)
        assert smp.variance[i] == one.variance if one.exact else np.isnan(smp.variance[i])
