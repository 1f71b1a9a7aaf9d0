"""Sampling-mode replay: bounds against the truth, greedy at T = 0, Monte Carlo, hostile rows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from replay.core.acceptance import accept_greedy, target_top1_per_node
from replay.core.sampling import ROUNDS_PER_TREE, _layout_of, prepare_sampling, sampling_bounds
from replay.core.sampling_columns import TreeLayout, prepare_columns
from replay.core.sampling_problems import PROBLEM_NAN, PROBLEM_POSITIVE, PROBLEM_SUM, PROBLEM_VOCAB, PROBLEM_ZERO
from replay.core.sampling_rows import row_problems
from replay.core.temperature import check_temperature
from replay.core.tree import Tree
from replay.core.vocab import PAD_TOKEN
from replay.testing.round_sampling import round_bounds
from replay.testing.sampling_ref import reference_bounds, reference_exact

V = 12
TEMPS = (0.0, 0.3, 0.7, 1.0, 1.3)


def random_round(rng, k=None, n=None):
    """A random tree, a full target distribution (log-probs at T = 1) per node, its top-K rows."""
    n = int(rng.integers(1, 10)) if n is None else n
    parents = [-1] + [int(rng.integers(0, u)) for u in range(1, n + 1)]
    tokens = [0] + [int(rng.integers(0, V)) for _ in range(n)]
    logits = rng.normal(size=(n + 1, V)) * rng.uniform(0.5, 3.0)
    full = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    k = int(rng.integers(1, V + 1)) if k is None else k
    order = np.argsort(-full, axis=1, kind="stable")[:, :k]
    ids = order.astype(np.int64)
    lp = np.take_along_axis(full, order, axis=1)
    return Tree.from_lists(tokens, parents), full, ids, lp


def truth(tree, full, t):
    """E[accepted length] of the walk with the whole distribution known."""
    n1 = tree.tokens.shape[0]
    reach = np.ones(n1)
    for u in range(1, n1):
        par = int(tree.parents[u])
        sib = [v for v in range(1, u) if tree.parents[v] == par and tree.tokens[v] == tree.tokens[u]]
        if sib:
            p = 0.0
        elif t == 0:
            p = float(np.argmax(full[par]) == tree.tokens[u])
        else:
            z = full[par] / t
            z = np.exp(z - z.max())
            p = z[tree.tokens[u]] / z.sum()
        reach[u] = reach[par] * p
    return reach[1:].sum(), (reach[1:] * (2 * tree.depths[1:] - 1)).sum()


@pytest.mark.parametrize("t", TEMPS)
@pytest.mark.parametrize("vocab", [None, V])
def test_bounds_contain_the_truth(t, vocab):
    rng = np.random.default_rng(int(t * 10) + (vocab or 0))
    widths = []
    for _ in range(300):
        tree, full, ids, lp = random_round(rng)
        b = round_bounds(tree, ids, lp, "all", t, vocab)
        exact, _ = truth(tree, full, t)
        lo, hi = float(b.expected_lo[0]), float(b.expected_hi[0])
        assert lo - 1e-9 <= exact <= hi + 1e-9, (t, lo, exact, hi)
        widths.append(hi - lo)
        if b.exact[0]:
            assert abs(lo - exact) < 1e-9 and lo == hi
    if not (t > 1 and vocab is None):  # there every tail, even a rounding residue, is unbounded
        assert min(widths) == 0.0  # some rounds are determined by their rows


@pytest.mark.parametrize("t", TEMPS)
def test_exact_when_every_probability_is_recorded(t):
    rng = np.random.default_rng(7)
    for _ in range(200):
        tree, full, ids, lp = random_round(rng, k=V)  # the whole vocabulary recorded
        b = round_bounds(tree, ids, lp, "all", t, vocab_size=V)  # T > 1 needs it to bound Z
        exact, second = truth(tree, full, t)
        assert abs(b.expected_lo[0] - exact) < 1e-9 and abs(b.expected_hi[0] - exact) < 1e-9
        if b.exact[0]:
            assert abs(b.variance[0] - (second - exact**2)) < 1e-9


def test_temperature_one_is_exact_for_recorded_children():
    rng = np.random.default_rng(3)
    seen = 0
    for _ in range(300):
        tree, full, ids, lp = random_round(rng, k=4)
        kids_recorded = all(tree.tokens[u] in ids[tree.parents[u]] for u in range(1, tree.tokens.shape[0]))
        if not kids_recorded:
            continue
        b = round_bounds(tree, ids, lp, "all", 1.0)
        exact, second = truth(tree, full, 1.0)
        assert b.exact[0] and abs(b.expected_lo[0] - exact) < 1e-9
        assert abs(b.variance[0] - (second - exact**2)) < 1e-9
        seen += 1
    assert seen > 10


@pytest.mark.parametrize("layout", ["all", "parents"])
def test_zero_is_the_greedy_replay(layout):
    rng = np.random.default_rng(11)
    for _ in range(300):
        tree, full, ids, lp = random_round(rng, k=3)
        if layout == "parents":
            ids, lp = ids[tree.expanded_order], lp[tree.expanded_order]
        greedy = accept_greedy(tree, target_top1_per_node(tree, ids, layout))
        b = round_bounds(tree, ids, lp, layout, 0.0)
        assert b.expected_lo[0] == b.expected_hi[0] == greedy.accepted_length
        assert b.exact[0]
        for d in range(1, b.length_ge_lo.shape[1]):
            assert b.length_ge_lo[0, d] == float(greedy.accepted_length >= d)


def test_small_temperature_tends_to_greedy():
    rng = np.random.default_rng(5)
    for _ in range(100):
        tree, full, ids, lp = random_round(rng, k=5)
        g = round_bounds(tree, ids, lp, "all", 0.0).expected_lo[0]
        b = round_bounds(tree, ids, lp, "all", 1e-3)
        assert abs(b.expected_lo[0] - g) < 1e-6 and abs(b.expected_hi[0] - g) < 1e-6


def test_monte_carlo_agrees_with_the_expectation():
    rng = np.random.default_rng(2)
    t = 0.7
    for _ in range(5):
        tree, full, ids, lp = random_round(rng, k=V, n=8)
        b = round_bounds(tree, ids, lp, "all", t, vocab_size=V)
        assert b.exact[0]
        probs = np.exp(full / t)
        probs /= probs.sum(axis=1, keepdims=True)
        lengths = []
        for _ in range(4000):
            node, length = 0, 0
            while True:
                x = rng.choice(V, p=probs[node])
                kids = [u for u in tree.children(node) if tree.tokens[u] == x]
                if not kids:
                    break
                node, length = int(kids[0]), length + 1
            lengths.append(length)
        mean, se = np.mean(lengths), np.std(lengths) / math.sqrt(len(lengths)) + 1e-12
        assert abs(mean - b.expected_lo[0]) < 4 * se + 1e-9
        assert abs(np.var(lengths) - b.variance[0]) < 0.1 * b.variance[0] + 0.02


def _stack(rounds):
    """Rounds of one node count as batch arrays (per-node rows, all layout)."""
    return (
        np.stack([r[0].tokens for r in rounds]),
        np.stack([r[0].parents for r in rounds]),
        np.stack([r[0].depths for r in rounds]),
        np.stack([r[2] for r in rounds]),
        np.stack([r[3] for r in rounds]),
    )


@pytest.mark.parametrize("t", TEMPS)
@pytest.mark.parametrize("vocab", [None, 40])
def test_batch_equals_the_scalar_reference(t, vocab):
    rng = np.random.default_rng(100 + int(t * 10))
    rounds = [random_round(rng, k=4, n=7) for _ in range(200)]
    tokens, parents, depths, ids, lp = _stack(rounds)
    has = rng.random(tokens.shape) > 0.1  # some nodes without a row
    b = sampling_bounds(tokens, parents, depths, ids, lp, has, t, vocab)
    for i in range(len(rounds)):
        lo, hi, ge_lo, ge_hi = reference_bounds(tokens[i], parents[i], depths[i], ids[i], lp[i], has[i], t, vocab)
        assert b.expected_lo[i] == pytest.approx(lo, abs=1e-12)
        assert b.expected_hi[i] == pytest.approx(hi, abs=1e-12)
        d = len(ge_lo)  # the batch's columns run to its deepest round; deeper ones are 0 here
        np.testing.assert_allclose(b.length_ge_lo[i, :d], ge_lo, atol=1e-12)
        np.testing.assert_allclose(b.length_ge_hi[i, :d], ge_hi, atol=1e-12)
        assert not b.length_ge_hi[i, d:].any()


def test_above_one_without_vocabulary_refuses_the_lower_bound():
    rng = np.random.default_rng(1)
    tree, full, ids, lp = random_round(rng, k=3, n=4)
    b = round_bounds(tree, ids, lp, "all", 1.3)
    assert b.needs_vocab and b.expected_lo[0] == 0.0
    assert not round_bounds(tree, ids, lp, "all", 1.3, vocab_size=V).needs_vocab


@pytest.mark.parametrize(
    "bad, code",
    [(math.nan, PROBLEM_NAN), (math.inf, PROBLEM_POSITIVE), (0.5, PROBLEM_POSITIVE), (math.log(0.9), PROBLEM_SUM)],
)
def test_hostile_rows_give_no_number(bad, code):
    tree = Tree.from_lists([0, 5, 6], [-1, 0, 1])
    ids = np.array([[5, 7], [6, 7], [1, 2]])
    lp = np.log(np.array([[0.5, 0.4], [0.5, 0.1], [0.5, 0.5]]))
    lp[0, 1] = bad  # 0.5 + 0.9 > 1 for the sum case
    for t in TEMPS:
        b = round_bounds(tree, ids, lp, "all", t)
        if t == 0.0:  # the greedy replay reads only the top-1 column: the scores are not judged (README)
            assert b.problem[0] == 0 and b.expected_lo[0] == b.expected_hi[0] == 2.0
            continue
        assert b.problem[0] == code
        assert math.isnan(b.expected_lo[0]) and math.isnan(b.expected_hi[0]) and not b.exact[0]


def test_rows_of_leaves_are_not_judged():
    tree = Tree.from_lists([0, 5], [-1, 0])
    ids = np.array([[5, 7], [6, 7]])
    lp = np.array([[math.log(0.5), math.log(0.4)], [math.nan, 0.0]])
    b = round_bounds(tree, ids, lp, "all", 0.7)
    assert b.problem[0] == 0 and b.expected_lo[0] > 0


@pytest.mark.parametrize("value", [-0.1, -1e-300, math.nan, math.inf, "warm", None, True, 1e-310, "1e-310", "1e-400"])
def test_bad_temperatures_are_refused(value):
    # 1e-310: 1/T overflows and every bound would be NaN; "1e-400" reads as 0.0 and would give the
    # greedy replay for a T that is not 0
    with pytest.raises(ValueError, match="temperature"):
        check_temperature(value)
    assert check_temperature("0.7") == 0.7 and check_temperature(0) == 0.0
    assert check_temperature("0e5") == 0.0 and check_temperature("1e-300") == 1e-300
    assert str(check_temperature("-0")) == "0.0" and str(check_temperature(-0.0)) == "0.0"  # printed as 0, not -0


def _hostile_cells(rng, ids, lp, pad_rate):
    """PAD cells (id PAD_TOKEN, NaN score: how a padded batch fills them) and whole empty rows."""
    pad = rng.random(ids.shape) < pad_rate
    pad[rng.random(ids.shape[:2]) < 0.05] = True  # an empty row: every cell PAD
    ids, lp = ids.copy(), lp.copy()
    ids[pad], lp[pad] = PAD_TOKEN, np.nan
    return ids, lp


@pytest.mark.parametrize("t", TEMPS)
# A PAD cell taken out of a top-K row moves its mass to the tail: with a small V the V - n unnamed
# tokens (each <= the row's smallest p) could not hold it, a row that contradicts V (PROBLEM_VOCAB,
# tested on its own below); a large V keeps these rows consistent, so the two sides compare bounds.
@pytest.mark.parametrize("vocab", [None, 10**4])
@pytest.mark.parametrize("trees", ["many", "two"])
def test_pad_cells_missing_children_and_duplicates_equal_the_reference(t, vocab, trees):
    # The column-major kernel's other paths: PAD/NaN cells and empty rows, children missing from
    # their parent's row, nodes without a row (has False), a token twice in one row (the first
    # cell counts), siblings with one token; "many" trees go through one call that gathers each
    # parent's row per round (TreeLayout.per_round), "two" through one call per tree (a shared TreeLayout).
    rng = np.random.default_rng(300 + int(t * 10))
    shared = [random_round(rng, k=5, n=8) for _ in range(2)]
    if trees == "two":
        rounds = [shared[i % 2] for i in range(2 * ROUNDS_PER_TREE + 10)]
    else:
        rounds = [shared[i % 2] if i % 3 == 0 else random_round(rng, k=5, n=8) for i in range(150)]
    tokens, parents, depths, ids, lp = _stack(rounds)
    tokens = tokens.copy()
    tokens[:, 1:] = rng.integers(0, 6, size=tokens[:, 1:].shape)  # small alphabet: sibling repeats
    order = np.argsort(rng.random(ids.shape), axis=2)  # rows in any order: the format does not sort them
    ids, lp = np.take_along_axis(ids, order, axis=2), np.take_along_axis(lp, order, axis=2)
    twice = rng.random(ids.shape[:2]) < 0.1
    ids[twice, 1] = ids[twice, 0]  # a row naming one token twice (its first cell counts)
    ids, lp = _hostile_cells(rng, ids, lp, 0.2)
    has = rng.random(tokens.shape) > 0.1
    b = sampling_bounds(tokens, parents, depths, ids, lp, has, t, vocab)
    assert (b.problem == 0).all()  # PAD cells are not judged, NaN there included
    kinds = set()
    for i in range(len(rounds)):
        lo, hi, ge_lo, ge_hi = reference_bounds(tokens[i], parents[i], depths[i], ids[i], lp[i], has[i], t, vocab)
        assert b.expected_lo[i] == pytest.approx(lo, abs=1e-12) and b.expected_hi[i] == pytest.approx(hi, abs=1e-12)
        np.testing.assert_allclose(b.length_ge_lo[i, : len(ge_lo)], ge_lo, atol=1e-12)
        np.testing.assert_allclose(b.length_ge_hi[i, : len(ge_hi)], ge_hi, atol=1e-12)
        for u in range(1, tokens.shape[1]):
            par = parents[i, u]
            row = ids[i, par][ids[i, par] != PAD_TOKEN]
            kinds.add("no row" if not has[i, par] else "empty" if not row.size else tokens[i, u] in row)
    assert kinds == {"no row", "empty", True, False}  # every kind of edge was met


@pytest.mark.parametrize("vocab", [V, None])
def test_a_zero_probability_cell_is_recorded_and_exact(vocab):
    # A child recorded with q = 0 (log-prob -inf): p = 0 exactly (the kernel finds it through its
    # weight 0, the same [0, 0] as a missing child bounded by a q_K of 0). The row sums to 1: its
    # zero cell says no token it does not name has any mass, and none is missing.
    tree = Tree.from_lists([0, 5, 6], [-1, 0, 0])
    ids = np.array([[5, 7, 6], [1, 2, 3], [1, 2, 3]])
    lp = np.log(np.array([[0.6, 0.4, 0.1], [0.5, 0.4, 0.1], [0.5, 0.4, 0.1]]))
    lp[0, 2] = -np.inf
    # Without V at T > 1 the tail of other rows has no upper bound, but this row has no tail at all:
    # its edges keep both bounds, not an "exact" E[L] = 0 (the upper bound set to the refused lower one).
    for t in (0.5, 1.0, 1.3):
        b = round_bounds(tree, ids, lp, "all", t, vocab_size=vocab)
        assert b.problem[0] == 0
        assert b.reach_lo[0, 2] == b.reach_hi[0, 2] == 0.0
        assert b.reach_hi[0, 1] > 0
        assert b.exact[0] and b.expected_lo[0] == pytest.approx(0.6 ** (1 / t) / (0.6 ** (1 / t) + 0.4 ** (1 / t)))


@pytest.mark.parametrize("vocab", [None, V, 10**5])
def test_a_zero_probability_row_that_sums_below_one_is_refused(vocab):
    # A top-K row with a zero cell (q_K = 0) says every token it does not name has p = 0 too, so its
    # missing mass 1 - sum(p) has nowhere to be, whatever V. Read as an empty tail it would give an
    # "exact" E[L] of 0.583 for a truth of 0.502; no number is the answer.
    tree = Tree.from_lists([0, 5, 6], [-1, 0, 0])
    ids = np.array([[5, 7, 6], [1, 2, 3], [1, 2, 3]])
    lp = np.log(np.array([[0.4, 0.3, 0.1], [0.5, 0.4, 0.1], [0.5, 0.4, 0.1]]))
    lp[0, 2] = -np.inf  # sums to 0.7
    for t in (0.5, 1.0, 1.3):
        b = round_bounds(tree, ids, lp, "all", t, vocab_size=vocab)
        assert b.problem[0] == PROBLEM_ZERO and math.isnan(b.expected_lo[0]) and not b.exact[0]
    assert row_problems(ids, lp, vocab).tolist() == [PROBLEM_ZERO, 0, 0]
    assert round_bounds(tree, ids, lp, "all", 0.0, vocab_size=vocab).problem[0] == 0  # T = 0 reads no scores
    lp[0, 2] = np.log(0.01)  # the same row without its zero cell: a tail of 0.29, bounded, no problem at a large V
    if vocab != V:
        assert round_bounds(tree, ids, lp, "all", 0.7, vocab_size=vocab).problem[0] == 0


@pytest.mark.parametrize("t", TEMPS[1:])
def test_bounds_contain_the_truth_for_every_vocabulary_at_least_the_row(t):
    # The tail's V - n tokens bound Z_T: V equal to the recorded count (no tail), one more (the
    # tail is one token: Z known), a few more; the truth over V tokens is also one over any larger
    # vocabulary (the extra tokens have p = 0), so every V' >= V must keep it inside [lo, hi].
    rng = np.random.default_rng(900 + int(t * 10))
    for _ in range(200):
        k = int(rng.integers(V - 2, V + 1))
        tree, full, ids, lp = random_round(rng, k=k)
        exact, _ = truth(tree, full, t)
        for vocab in (V, V + 1, V + 7):
            b = round_bounds(tree, ids, lp, "all", t, vocab)
            assert b.problem[0] == 0, (k, vocab)
            lo, hi = float(b.expected_lo[0]), float(b.expected_hi[0])
            assert lo - 1e-9 <= exact <= hi + 1e-9, (t, k, vocab, lo, exact, hi)
            if k == V == vocab:  # every token named: nothing left to bound
                assert b.exact[0] and abs(lo - exact) < 1e-9


@pytest.mark.parametrize("t", TEMPS[1:])
def test_a_row_naming_every_token_below_mass_one_contradicts_the_vocabulary(t):
    # The user's dump: 3 columns, --vocab-size 3, each row summing to 0.9. No distribution over 3
    # tokens has these rows; dropping the tail would give a number marked "exact".
    tree = Tree.from_lists([0, 5, 6], [-1, 0, 1])
    ids = np.array([[5, 7, 8], [6, 7, 8], [1, 2, 3]])
    lp = np.log(np.array([[0.5, 0.3, 0.1]] * 3))
    b = round_bounds(tree, ids, lp, "all", t, vocab_size=3)
    assert b.problem[0] == PROBLEM_VOCAB and math.isnan(b.expected_lo[0]) and not b.exact[0]
    # V = 4: the one unnamed token holds m = 0.1 <= the smallest p: consistent; V = 4 with m = 0.3 is not
    assert round_bounds(tree, ids, lp, "all", t, vocab_size=4).problem[0] == 0
    lp2 = np.log(np.array([[0.4, 0.2, 0.1]] * 3))
    assert round_bounds(tree, ids, lp2, "all", t, vocab_size=4).problem[0] == PROBLEM_VOCAB
    assert round_bounds(tree, ids, lp2, "all", t, vocab_size=5).problem[0] == PROBLEM_VOCAB  # 2 x 0.1 < 0.3
    assert round_bounds(tree, ids, lp2, "all", t, vocab_size=7).problem[0] == 0  # 4 x 0.1 >= 0.3


@pytest.mark.parametrize("trees", ["many", "two"])
def test_rows_prepared_once_give_the_reference_at_every_temperature(trees):
    # The report's curve prepares the rows once (their T-independent statistics, each child's cell)
    # and asks the rule at many T; the caches fill at the first T that needs them, in any order
    # (T = 0 reads only the top-1 column, T = 1 no rescaling). Every T must equal the scalar
    # reference as if asked alone, with PAD cells, empty rows, rows not there and repeats.
    rng = np.random.default_rng(77)
    shared = [random_round(rng, k=5, n=8) for _ in range(2)]
    count = 2 * ROUNDS_PER_TREE + 10 if trees == "two" else 150
    rounds = [shared[i % 2] if trees == "two" or i % 3 == 0 else random_round(rng, k=5, n=8) for i in range(count)]
    tokens, parents, depths, ids, lp = _stack(rounds)
    tokens = tokens.copy()
    tokens[:, 1:] = rng.integers(0, 6, size=tokens[:, 1:].shape)  # small alphabet: sibling repeats
    ids, lp = _hostile_cells(rng, ids, lp, 0.2)
    has = rng.random(tokens.shape) > 0.1
    prepared = prepare_sampling(tokens, parents, depths, ids, lp, has, 10**4)
    for t in (0.0, 0.7, 1.0, 0.3, 0.0, 1.3, 0.7):
        b = prepared.bounds(t)
        alone = sampling_bounds(tokens, parents, depths, ids, lp, has, t, 10**4)
        np.testing.assert_array_equal(b.expected_lo, alone.expected_lo)
        np.testing.assert_array_equal(b.expected_hi, alone.expected_hi)
        for i in range(0, len(rounds), 7):
            lo, hi, ge_lo, ge_hi = reference_bounds(tokens[i], parents[i], depths[i], ids[i], lp[i], has[i], t, 10**4)
            assert b.expected_lo[i] == pytest.approx(lo, abs=1e-12) and b.expected_hi[i] == pytest.approx(hi, abs=1e-12)
            np.testing.assert_allclose(b.length_ge_hi[i, : len(ge_hi)], ge_hi, atol=1e-12)
    with pytest.raises(ValueError, match="smaller than the 5 recorded candidates"):
        prepare_sampling(tokens, parents, depths, ids, lp, has, 4).bounds(0.7)
    assert prepare_sampling(tokens, parents, depths, ids, lp, has, 4).bounds(0.0).problem.max() == 0  # T = 0: no V


def test_prepared_columns_in_chunks_equal_one_chunk():
    # The rule runs chunk by chunk; the prepared chunks keep their statistics. A chunk boundary
    # anywhere (here every 7 rounds, and one round) must not move a number.
    rng = np.random.default_rng(5)
    tree, full, ids, lp = random_round(rng, k=4, n=9)
    r = 50
    tokens = np.repeat(tree.tokens[:, None], r, axis=1)
    tokens[1:] = rng.integers(0, V, size=tokens[1:].shape)
    expanded = np.unique(tree.parents[1:])
    layout, rows_of = _layout_of(tuple(int(v) for v in tree.parents), tuple(int(v) for v in tree.depths))
    row_ids = np.repeat(ids[rows_of][:, :, None], r, axis=2)
    row_lp = np.repeat(lp[rows_of][:, :, None], r, axis=2) - rng.random((len(expanded), 1, r))
    has = np.ones((len(expanded), r), dtype=bool)
    rows = lambda lo, hi: (row_ids[..., lo:hi], row_lp[..., lo:hi], has[:, lo:hi])  # noqa: E731
    nodes = [int(v) for v in expanded]
    whole = prepare_columns(layout, rows, tokens, nodes, V, chunk_rounds=r)
    for chunk in (7, 1):
        cut = prepare_columns(layout, rows, tokens, nodes, V, chunk_rounds=chunk)
        for t in (0.0, 0.4, 1.0, 1.3):
            a, b = whole.bounds(t, keep_reach=True), cut.bounds(t, keep_reach=True)
            np.testing.assert_allclose(a.reach_hi, b.reach_hi, rtol=1e-14)
            np.testing.assert_allclose(a.expected_lo, b.expected_lo, rtol=1e-14)
            np.testing.assert_array_equal(a.exact, b.exact)


@pytest.mark.parametrize("t", (0.0, 0.001, 0.3, 1.0, 1.3))
@pytest.mark.parametrize("vocab", [None, V])
@pytest.mark.parametrize("trees", ["many", "two"])
def test_exact_is_structural_and_equals_the_reference(t, vocab, trees):
    """exact is decided by what the rows record (the scalar reference_exact), never by lo == hi: rows
    naming all V tokens or all but one, q = 0 cells, PAD cells, nodes without a row, repeated
    siblings; T = 0.001, where float64 rounds every tail away and the bounds meet, included."""
    rng = np.random.default_rng(500 + int(t * 1000) + (vocab or 0))
    shared = [random_round(rng, k=V - 1, n=6) for _ in range(2)]
    if trees == "two":
        rounds = [shared[i % 2] for i in range(2 * ROUNDS_PER_TREE + 10)]
    else:
        rounds = [random_round(rng, k=int(rng.choice([3, V - 1, V])), n=6) for _ in range(300)]
    k = max(r[2].shape[1] for r in rounds)
    tokens = np.stack([r[0].tokens for r in rounds]).copy()
    tokens[:, 1:] = rng.integers(0, V, size=tokens[:, 1:].shape)
    parents, depths = np.stack([r[0].parents for r in rounds]), np.stack([r[0].depths for r in rounds])
    ids = np.full((len(rounds), tokens.shape[1], k), PAD_TOKEN, dtype=np.int64)
    lp = np.full(ids.shape, np.nan)
    for i, r in enumerate(rounds):
        ids[i, :, : r[2].shape[1]], lp[i, :, : r[3].shape[1]] = r[2], r[3]
    zero = rng.random(ids.shape[:2]) < 0.1  # a q = 0 cell in the row's last named column
    last = (ids != PAD_TOKEN).sum(axis=2) - 1
    lp[zero, last[zero]] = -np.inf
    has = rng.random(tokens.shape) > 0.1
    b = sampling_bounds(tokens, parents, depths, ids, lp, has, t, vocab)
    ok = b.problem == 0
    assert ok.sum() > len(rounds) // 2
    want = np.array(
        [reference_exact(tokens[i], parents[i], ids[i], lp[i], has[i], t, vocab) for i in range(len(rounds))]
    )
    assert (b.exact[ok] == want[ok]).all()
    assert (b.exact <= ok).all()
    prepared = prepare_sampling(tokens, parents, depths, ids, lp, has, vocab).bounds(t)
    assert (prepared.exact == b.exact).all()
    if t == 0.0:
        assert b.exact[ok].all()
    elif t == 1.0 or vocab is not None:
        assert 0 < b.exact[ok].sum() < ok.sum()  # both kinds met
    # exact means one number: its bounds are equal bit for bit
    assert (b.expected_lo[b.exact] == b.expected_hi[b.exact]).all()
    met = (b.expected_lo == b.expected_hi) & ok & ~b.exact
    if t == 0.001:  # the bounds meet in float64 where the tail is unknown: still not exact
        assert met.any()


@pytest.mark.parametrize("t", [0.7, 1.3, 2.0])
@pytest.mark.parametrize("vocab", [4, 1000, 150_000])
def test_a_float32_row_that_sums_to_one_but_for_rounding_keeps_the_truth_inside(t, vocab):
    # The whole distribution is the 4 recorded tokens (truth: V = 4), written as float32 log-probs,
    # so the row sums to 1 - 2e-8. Taking that residue for a real tail, S >= m^a at T > 1 would put
    # the truth 7e-5 above the upper bound (V = 1000, T = 2). Every V >= 4 must hold it.
    probs = np.array([0.5, 0.3, 0.15, 0.05])
    lp32 = np.log(probs).astype(np.float32).astype(np.float64)
    assert 0 < 1 - np.exp(lp32).sum() < 1e-6  # the float32 rounding leaves a residue
    tree = Tree.from_lists([0, 5, 6], [-1, 0, 0])
    ids = np.array([[5, 6, 7, 8], [1, 2, 3, 4], [1, 2, 3, 4]])
    lp = np.stack([lp32] * 3)
    q = np.exp(lp32) ** (1 / t)
    truth = (q[0] + q[1]) / q.sum()  # both children are leaves: E[L] = p(5) + p(6)
    b = round_bounds(tree, ids, lp, "all", t, vocab_size=vocab)
    assert b.problem[0] == 0
    lo, hi = float(b.expected_lo[0]), float(b.expected_hi[0])
    assert lo - 1e-12 <= truth <= hi + 1e-12, (lo, truth, hi)
    if vocab == 4:  # every token named: exact
        assert b.exact[0] and abs(lo - truth) < 1e-9


def test_tree_layout_is_one_form_checked_on_entry():
    # One tree for every round ([N+1]) or a tree per round ([N+1, R]); anything else is refused.
    shared = TreeLayout(np.array([0, 0, 0, 1], dtype=np.int64), np.array([0, 1, 1, 2], dtype=np.int64))
    assert shared.shared and shared.num_rows == 2 and shared.num_depths == 3
    parents = np.array([[-1, -1], [0, 0], [0, 1]], dtype=np.int64)  # [N+1, R]
    per_round = TreeLayout.per_round(parents, np.array([[0, 0], [1, 1], [1, 2]], dtype=np.int64))
    assert not per_round.shared and per_round.node_row.tolist() == [[0, 0], [0, 0], [0, 1]]
    with pytest.raises(ValueError, match="node_row"):
        TreeLayout(np.zeros(3, dtype=np.int64), np.zeros(4, dtype=np.int64))
    with pytest.raises(ValueError, match="int64"):
        TreeLayout(np.zeros(3, dtype=np.int32), np.zeros(3, dtype=np.int32))
