"""A deliberately plain scalar reference for replay.core.sampling (tests compare the two).

One round, one node at a time, math.exp on Python floats: the same bounds, written the obvious way.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..core.sampling_rows import sum_slack
from ..core.vocab import PAD_TOKEN
from ..io.roundbatch import MatrixStack


def _p_bounds(row_ids, row_logp, has_row, token, t, vocab_size):
    """(lo, hi) of p_T(token | node) from the node's recorded row (or None: no row)."""
    if not has_row:  # T = 0 is the greedy replay, which stops there (STOP_NO_ROW)
        return (0.0, 0.0) if t == 0.0 else (0.0, 1.0)
    pairs = [(int(i), float(lp)) for i, lp in zip(row_ids, row_logp) if int(i) != PAD_TOKEN]
    if t == 0.0:  # the greedy replay reads column 0, the target's top-1; PAD there: no top-1
        hit = 1.0 if int(row_ids[0]) != PAD_TOKEN and int(row_ids[0]) == token else 0.0
        return hit, hit
    probs = [math.exp(lp) for _, lp in pairs]
    m = min(max(1.0 - sum(probs), 0.0), 1.0)
    if vocab_size is not None and len(pairs) >= vocab_size:
        m = 0.0
    # the row's sum is known to within its rounding (replay.core.sampling_rows.sum_slack): the tail mass lies in
    # [m_lo, m_hi]; a row naming every token has none either way
    float32 = all(float(np.float32(lp)) == lp for _, lp in pairs)
    slack = float(sum_slack(len(pairs), float32))
    m_lo, m_hi = max(m - slack, 0.0), (0.0 if vocab_size is not None and len(pairs) >= vocab_size else m + slack)
    qk = min(probs) if probs else 0.0
    mine = next((math.exp(lp) for i, lp in pairs if i == token), None)
    a = 1.0 / t
    rec = sum(q**a for q in probs)
    k = len(pairs)  # the tokens the row names: V - k are left for its tail

    def packed(mass: float) -> float:  # the tail packed into floor(m / q_K) tokens at q_K and one at the rest
        j = math.floor(mass / qk) if qk > 0 else 0
        return j * qk**a + min(max(mass - j * qk, 0.0), qk) ** a if qk > 0 and mass > 0 else 0.0

    if t == 1.0:
        s_lo, s_hi = m_lo, m_hi
    elif t < 1.0:
        s_hi = packed(m_hi)
        s_lo = (vocab_size - k) * (m_lo / (vocab_size - k)) ** a if vocab_size and vocab_size > k else 0.0
    else:
        s_lo = packed(m_lo) if vocab_size is None or vocab_size > k else 0.0
        if vocab_size is None:
            s_hi = math.inf
        else:
            s_hi = (vocab_size - k) ** (1.0 - a) * m_hi**a if vocab_size > k else 0.0
    s_lo = min(s_lo, s_hi)
    if t != 1.0 and probs and qk == 0.0:  # a zero cell: no token outside the row has mass, whatever V
        s_lo = s_hi = 0.0
    if mine is not None:
        if t == 1.0:
            return mine, mine
        lo = 0.0 if math.isinf(s_hi) else mine**a / (rec + s_hi)
        return lo, min(mine**a / (rec + s_lo), 1.0)
    x = min(qk, m_hi) ** a
    if x == 0.0:
        return 0.0, 0.0
    share = 1.0 if math.isinf(s_hi) else s_hi / (rec + s_hi)
    return 0.0, min(x / (rec + max(x, s_lo)), share, 1.0)


def reference_bounds(tokens, parents, depths, rows_ids, rows_logp, has_row, t, vocab_size=None):
    """(expected_lo, expected_hi, [P(L>=d) lo], [P(L>=d) hi]) for one round; inputs per node."""
    n1 = len(tokens)
    reach_lo, reach_hi = [1.0] * n1, [1.0] * n1
    for u in range(1, n1):
        par = int(parents[u])
        earlier = [v for v in range(1, u) if int(parents[v]) == par and int(tokens[v]) == int(tokens[u])]
        if earlier:
            lo = hi = 0.0
        else:
            lo, hi = _p_bounds(rows_ids[par], rows_logp[par], bool(has_row[par]), int(tokens[u]), t, vocab_size)
        reach_lo[u] = reach_lo[par] * lo
        reach_hi[u] = reach_hi[par] * hi
    dmax = max(int(d) for d in depths)
    ge_lo = [min(1.0, sum(reach_lo[u] for u in range(n1) if int(depths[u]) == d)) for d in range(dmax + 1)]
    ge_hi = [min(1.0, sum(reach_hi[u] for u in range(n1) if int(depths[u]) == d)) for d in range(dmax + 1)]
    for d in range(1, dmax + 1):
        ge_hi[d] = min(ge_hi[d], ge_hi[d - 1])
    ge_lo = [min(lo, hi) for lo, hi in zip(ge_lo, ge_hi)]
    return sum(ge_lo[1:]), sum(ge_hi[1:]), ge_lo, ge_hi


def _edge_known(row_ids, row_logp, has_row, token, t, vocab_size):
    """(known, onward) of the edge to a child carrying ``token`` at T > 0: its probability is
    determined by the row (a proof, not two floats coming out equal), and the walk can go on
    through it (a recorded cell of finite log-prob: p > 0, however small in float64)."""
    if not has_row:
        return False, False
    pairs = [(int(i), float(lp)) for i, lp in zip(row_ids, row_logp) if int(i) != PAD_TOKEN]
    # the tail is empty: the row names all V tokens, holds a q = 0 cell (every unnamed q <= q_K = 0),
    # or names nothing; with one unnamed token the tail is that token, so Z_T is still known
    named = len(pairs)
    empty = (vocab_size is not None and named >= vocab_size) or any(lp == -math.inf for _, lp in pairs) or not pairs
    z_known = t == 1.0 or empty or (vocab_size is not None and vocab_size - named == 1)
    mine = next((lp for i, lp in pairs if i == token), None)  # the first cell naming it
    there = mine is not None and -math.inf < mine <= 0.0
    return empty or (there and z_known), there


def reference_exact(tokens, parents, rows_ids, rows_logp, has_row, t, vocab_size=None):
    """The round is exact: every edge out of a node the walk can reach is known (docs/analysis.md);
    T = 0 always (the greedy replay). Rows with a problem (NaN, > 0, sum > 1) are not judged here."""
    if t == 0.0:
        return True
    n1 = len(tokens)
    reach = [True] + [False] * (n1 - 1)
    for u in range(1, n1):
        par = int(parents[u])
        if any(int(parents[v]) == par and int(tokens[v]) == int(tokens[u]) for v in range(1, u)):
            continue  # p = 0: the walk moves to the earlier sibling
        known, onward = _edge_known(rows_ids[par], rows_logp[par], bool(has_row[par]), int(tokens[u]), t, vocab_size)
        if reach[par] and not known:
            return False
        reach[u] = reach[par] and onward
    return True


def with_validate_scores(batch, seed: int, vocab: int):
    """A synthetic RoundBatch with its validate rows given distinct ids and descending probabilities
    (a tail left over), for tests and bench/sampling_speed.py."""
    rng = np.random.default_rng(seed)
    ids = batch.validate.ids.astype(np.int64)
    k = ids.shape[1]
    for c in range(1, k):
        ids[:, c] = (ids[:, 0] + 7 * c) % vocab
    # the K largest of K + 1: the tail (one more token's mass) is <= the smallest recorded p, so the
    # row is a true top-K row for every vocabulary size above K (replay.core.sampling_problems PROBLEM_VOCAB)
    probs = -np.sort(-rng.dirichlet(np.ones(k + 1) * 0.7, size=ids.shape[0] * ids.shape[2]), axis=1)[:, :k]
    probs = probs.reshape(ids.shape[0], ids.shape[2], k).transpose(0, 2, 1)
    # Contiguous [rows, K, R] stacks in the dump's own id type, as the readers give them.
    logp = np.ascontiguousarray(np.log(probs).astype(np.float32))
    stack = MatrixStack(ids.astype(batch.validate.ids.dtype), logp)
    return replace(batch, validate=stack)
