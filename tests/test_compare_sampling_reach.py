"""Every config's outcome at T from the recorded config's walk (analysis.compare.sampling_reach, what
recommend --temperature folds) equals the config's own walk (sampling_parts' outcomes with reach=False, which
tests/test_compare_sampling_batch.py holds to the round path), field for field and bit for bit, on
the random dumps with scores that test uses, at T = 0, < 1, 1 and > 1, with and without the
vocabulary size; and the cases take the shared walk for most candidate chunks."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.compare import sampling_reach
from analysis.compare.sampling_parts import sampling_parts
from analysis.compare.sampling_subtrees import AtT
from analysis.compare.subtree import contained_configs
from replay.core.config import TreeConfig
from replay.engine.batch import replay_batch
from tests.test_compare_sampling_batch import SHAPES, VOCAB, random_case

TEMPERATURES = (0.0, 0.4, 0.7, 1.0, 1.3)


def candidates(cfg: TreeConfig) -> list[TreeConfig]:
    """The recorded config first, then contained ones (recommend --temperature's list)."""
    return [cfg, *[c for c in contained_configs(cfg, limit=40) if c != cfg]]


def folded(batches, cfg, configs, t, vocab) -> dict[int, AtT]:
    """Each config's AtT of the usable rounds in run order, folded as recommend folds them."""
    return {c: at for (c, _), at in folded_at(batches, cfg, configs, [t], vocab, True).items()}


def walked(batches, cfg, configs, t, vocab) -> dict[int, AtT]:
    """Each config's AtT of the usable rounds in run order from its own walk (reach=False)."""
    return {c: at for (c, _), at in folded_at(batches, cfg, configs, [t], vocab, False).items()}


def folded_at(batches, cfg, configs, temperatures, vocab, reach: bool) -> dict[tuple[int, float], AtT]:
    """Each (config, T)'s AtT of the usable rounds in run order, all T asked of sampling_parts at once."""
    got: dict[tuple[int, float], list[tuple[np.ndarray, AtT]]] = {}
    for b in batches:
        res = replay_batch(b, cfg, workers=1)
        sampling_parts(
            b,
            res,
            cfg,
            configs,
            temperatures,
            lambda c, t, at, o: got.setdefault((c, t), []).append((o, at)),
            vocab,
            reach=reach,
        )
    return {key: _in_order(v) for key, v in got.items()}


def _in_order(pieces: list[tuple[np.ndarray, AtT]]) -> AtT:
    order = np.argsort(np.concatenate([o for o, _ in pieces]), kind="stable")
    return AtT.concat([a for _, a in pieces]).take(order)


def assert_same_at(got: AtT, want: AtT) -> None:
    for name in AtT.__dataclass_fields__:
        g, w = getattr(got, name), getattr(want, name)
        if name == "needs_vocab":
            assert g == w
            continue
        assert g.dtype == w.dtype and g.shape == w.shape, name
        assert np.array_equal(g.view(np.uint8), w.view(np.uint8)), name  # to the bit, NaN included


class _Count:
    """How many candidate chunks the shared walk gave, and how many walked on their own."""

    def __init__(self, monkeypatch) -> None:
        self.shared = self.own = 0
        outcome = sampling_reach.RecordedWalk.outcome

        def counted(walk, lv, use, gamma, shared=None):
            at = outcome(walk, lv, use, gamma, shared)
            self.shared += at is not None
            self.own += at is None
            return at

        monkeypatch.setattr(sampling_reach.RecordedWalk, "outcome", counted)


@pytest.mark.parametrize("seed", range(len(SHAPES) * 3))
def test_shared_walk_equals_each_configs_own_walk(seed, monkeypatch):
    count = _Count(monkeypatch)
    cfg, batches = random_case(seed)
    configs = candidates(cfg)
    for t in TEMPERATURES:
        for vocab in (None, VOCAB):
            got, want = folded(batches, cfg, configs, t, vocab), walked(batches, cfg, configs, t, vocab)
            assert sorted(got) == sorted(want)
            for c in want:
                assert_same_at(got[c], want[c])
    if len(configs) > 1:
        assert count.shared, (count.shared, count.own)  # the shared walk is taken, not only the fallback


@pytest.mark.parametrize("seed", range(0, len(SHAPES) * 3, 2))
def test_every_t_at_once_equals_each_configs_own_walk(seed, monkeypatch):
    # the report's temperature curve asks for every T of its grid at once: one recorded walk per T
    count = _Count(monkeypatch)
    cfg, batches = random_case(seed)
    configs = candidates(cfg)
    for vocab in (None, VOCAB):
        got = folded_at(batches, cfg, configs, TEMPERATURES, vocab, True)
        want = folded_at(batches, cfg, configs, TEMPERATURES, vocab, False)
        assert sorted(got) == sorted(want)
        for key in want:
            assert_same_at(got[key], want[key])
    if len(configs) > 1:
        assert count.shared, (count.shared, count.own)


@pytest.mark.parametrize("seed", [1, 4])
def test_a_round_with_a_blind_edge_gives_the_sub_trees_without_it_exact(seed, monkeypatch):
    # at T = 1 a recorded round is inexact where the walk can reach a child missing from its parent's
    # row; a candidate without that child is exact there, and the shared walk still gives it
    flips: list[int] = []
    exact_of = sampling_reach.RecordedWalk._exact

    def spy(walk, lv, gathered, shared):
        out = exact_of(walk, lv, gathered, shared)
        flips.append(int((out & ~walk.exact).sum()))
        return out

    monkeypatch.setattr(sampling_reach.RecordedWalk, "_exact", spy)
    count = _Count(monkeypatch)
    cfg, batches = random_case(seed)
    configs = candidates(cfg)
    got, want = folded(batches, cfg, configs, 1.0, None), walked(batches, cfg, configs, 1.0, None)
    for c in want:
        assert_same_at(got[c], want[c])
    assert sum(flips) and count.shared > count.own, (sum(flips), count.shared, count.own)
