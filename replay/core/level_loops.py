"""Compiled loops (numba) of a compared config's levels (analysis.compare): the child level's slots
and recorded cells, with their parents' order and path keys (open_nodes_loop, child_level_loop); a
sub-tree level's numbering and doubts (level_doubts_loop) and its known children (child_slots_loop);
how a walk leaves a node, one rule for the greedy walk and the walk at T (_expansion, read by
level_doubts_loop and by expansion_loop for the greedy walk's nodes); what a level gives from the
recorded config's walk (level_reach_loop); a level's places in selection order
(selection_places_loop). Each is one pass over a level's slots where numpy makes one per
operation. Compiled and cached as replay.core.loops' are (``_loop``), and like them imported at
first use."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from .loops import _loop


@_loop
def child_slots_loop(
    kpos: np.ndarray,  # [L, C] int64: each node's position among its level's open nodes, -1 for none
    expands: np.ndarray,  # [L, C] bool: the node is expanded
    valid: np.ndarray,  # [S * C] bool: the child level's slots ([S, C], flat), S = K * W
    token: np.ndarray,  # [S * C] int64: their tokens, pad where unknown
    col: np.ndarray,  # [C] int64: each column's column in those arrays
    idx: np.ndarray,  # [L, C] int64: each node's index
    pad: int,  # the unknown token
    unknown: np.ndarray,  # out [L, W, C] bool: rank r of an expanded node is a valid child of unknown token
    indexed: np.ndarray,  # in/out [S * C] bool (all False in): the child at slot s is a valid child of known token
    parent: np.ndarray,  # in/out [S * C] int64: its parent's index there (untouched elsewhere)
) -> None:
    """An expanded node's children: its rank-r child is slot kpos * W + r of the child level
    (read at the flat cell slot * C + col, clipped into range as np.take's mode="clip"); one pass
    over the level's nodes and ranks, where numpy builds the cells, two gathers and two scatters."""
    n_nodes, w, c = unknown.shape
    last = valid.shape[0] - 1
    for u in range(n_nodes):
        for j in range(c):
            k = kpos[u, j]
            opened = expands[u, j] and k >= 0
            for r in range(w):
                slot = max(k, 0) * w + r
                cell = min(max(slot * c + col[j], 0), last)
                child = opened and valid[cell]
                unknown[u, r, j] = child and token[cell] == pad
                if child and token[cell] != pad:
                    at = slot * c + j
                    indexed[at] = True
                    parent[at] = idx[u, j]


@_loop
def open_nodes_loop(
    valid: np.ndarray,  # [L, C] bool: the level's slots
    status: np.ndarray,  # [L, C] int8: OUT / IN / MAYBE
    out: int,  # OUT's code
    kpos: np.ndarray,  # out [L, C] int64: a non-OUT node's position k among its level's non-OUT nodes, -1 if OUT
    order: np.ndarray,  # out [L, C] int64: the node at place k, the non-OUT nodes first, each group in tree order
) -> int:
    """The level's open (valid, non-OUT) nodes: each one's position k and the node at each place
    (np.argsort(~open, axis=0, kind="stable")); returns the most open nodes of a column, at least 1."""
    n_slots, c = valid.shape
    count = np.zeros(c, dtype=np.int64)
    for u in range(n_slots):  # no branch on the data: an OUT node's place is taken by the next open node, or below
        for j in range(c):
            here = valid[u, j] & (status[u, j] != out)
            order[count[j], j] = u
            kpos[u, j] = (count[j] + 1) * here - 1
            count[j] += here
    most = max(1, count.max()) if c else 1
    for u in range(n_slots):  # the OUT nodes after the open ones, in tree order
        for j in range(c):
            if kpos[u, j] < 0:
                order[count[j], j] = u
                count[j] += 1
    return most


@_loop
def child_level_loop(
    order: np.ndarray,  # [K, C] int64: the parent level's node at position k (open_nodes_loop)
    valid_in: np.ndarray,  # [L, C] bool: the parent level's slots
    status: np.ndarray,  # [L, C] int8: their OUT / IN / MAYBE (codes[0], codes[1])
    sure_in: np.ndarray,  # [L, C] bool: the slot surely exists
    slot_lo: np.ndarray,  # [L, C] int64: its selection slot range's lo (clipped into 0..H'-1 here)
    slot_hi: np.ndarray,  # [L, C] int64: its hi
    wide: np.ndarray,  # [2, H', H'] int64: min, max of the step's topKSpec widths over a slot range
    row: np.ndarray,  # [L, C] int64: its recorded expanded position, -1 for none
    exact_in: np.ndarray,  # [L, C] bool: its path key is exact
    key_lo: np.ndarray,  # [L, C] float64: its path key's lo
    key_hi: np.ndarray,  # [L, C] float64: its hi
    codes: np.ndarray,  # [2] int8: OUT, IN
    width: np.ndarray,  # [H] int64: the recorded step's kept width per expanded position (H = 0: no step)
    first_child: np.ndarray,  # [H] int64: the level-local index of its first child
    ids: np.ndarray,  # [rows, cols, S] int64: the recorded step's draft ids (the chunk's S rounds)
    logp: np.ndarray,  # [rows, cols, S] float64: their log-probs (rows = 0: none, NaN)
    unnamed: np.ndarray,  # [rows, S] float64: each row's smallest named score (rows = 0: no bound)
    pos: np.ndarray,  # [L', S] int64: each next-level recorded node's expanded position (L' = 0: no next step)
    col: np.ndarray,  # [C] int64: each column's round in the recorded arrays
    pad: int,  # the unknown token
    valid: np.ndarray,  # out [K * W, C] bool: child k * W + r exists (r below the parent's widest kept width)
    sure: np.ndarray,  # out [K * W, C] bool: it surely exists (valid, below the narrowest)
    ordered: np.ndarray,  # out [K * W, C] bool: valid with its parent's slot known
    oslot: np.ndarray,  # out [K * W, C] int64: its parent's (lowest) slot
    child_rec: np.ndarray,  # out [K * W, C] int64: its recorded level-local node, -1 for none
    child_row: np.ndarray,  # out [K * W, C] int64: that node's expanded position, -1 for none
    token: np.ndarray,  # out [K * W, C] int64: the recorded draft's token at (parent row, rank), pad for none
    lp: np.ndarray,  # out [K * W, C] float64: its log-prob, NaN for none
    path: np.ndarray,  # out [2, K * W, C] float64: its path key lo (-inf where not exact), hi
    path_exact: np.ndarray,  # out [K * W, C] bool: its path key is exact (token and score known, parent's exact)
) -> None:
    """The child level's slots from their parents' (analysis.compare.subtree_levels.child_level:
    child k * W + r is the parent at position k's rank-r child), their recorded cells and path keys:
    one pass, where numpy gathers each parent field, broadcasts it over the ranks and looks up each
    cell. A key not exact is at most the parent's upper end plus the row's smallest named score
    (``unnamed``; NaN: the parent's alone). Test oracle: replay.testing.subtree_walk.unnamed_key_bound."""
    k_max, c = order.shape
    w = valid.shape[0] // k_max
    rows, cols = ids.shape[0], ids.shape[1]
    last = wide.shape[1] - 1
    out, in_code = codes[0], codes[1]
    step, scored, bounded, nxt = width.shape[0] > 0, logp.shape[0] > 0, unnamed.shape[0] > 0, pos.shape[0] > 0
    # row by row of the output (each written in memory order; the parent re-read for each rank: about
    # twice as fast as reading it once and writing its W children's rows), bitwise where no branch is needed
    for k in range(k_max):
        for r in range(w):
            s = k * w + r
            for j in range(c):
                u = order[k, j]
                st = status[u, j]
                pr = row[u, j]
                s_lo, s_hi = min(max(slot_lo[u, j], 0), last), min(max(slot_hi[u, j], 0), last)
                alive = valid_in[u, j] & (st != out)
                ok = alive & (r < wide[1, s_lo, s_hi])
                valid[s, j] = ok
                sure[s, j] = alive & (st == in_code) & sure_in[u, j] & (r < wide[0, s_lo, s_hi])
                ordered[s, j] = ok & (s_lo == s_hi)
                oslot[s, j] = s_lo
                jj = min(pr, width.shape[0] - 1) if step and pr >= 0 else -1
                node = first_child[jj] + r if jj >= 0 and r < width[jj] else -1
                child_rec[s, j] = node
                at = col[j]
                child_row[s, j] = pos[min(node, pos.shape[0] - 1), at] if node >= 0 and nxt else -1
                named = jj >= 0 and r < cols
                cell_row, cell_col = min(max(pr, 0), rows - 1), min(r, cols - 1)
                tok = ids[cell_row, cell_col, at] if named else pad
                x = logp[cell_row, cell_col, at] if named and scored else np.nan
                token[s, j], lp[s, j] = tok, x
                known = (tok != pad) & (x == x) & exact_in[u, j]  # x == x: its score is known (not NaN)
                path_exact[s, j] = known
                hi = key_hi[u, j]
                if known:
                    hi = key_lo[u, j] + x
                elif tok == pad and bounded and pr >= 0:
                    bound = unnamed[min(pr, unnamed.shape[0] - 1), at]
                    if bound == bound:
                        hi = hi + bound
                path[0, s, j] = hi if known else -np.inf
                path[1, s, j] = hi


@njit(inline="always")
def _expansion(d: int, status: int, row: int, steps_hi: int, steps_lo: int, codes: np.ndarray) -> Any:
    """How a walk leaves the depth-``d`` node it stands on (status: OUT / IN / MAYBE; row: its recorded
    expanded position, -1 when not expanded; steps_hi / steps_lo: the draft steps possibly / surely
    run), in codes (analysis.compare.subtree.LEVEL_CODES): not at all (codes[8]: a leaf, OUT or
    past the steps run); its expansion unknown because step d may not run (codes[3], gammaThreshold),
    its selection depends on unrecorded scores (codes[4]) or the recording did not expand it
    (codes[5]); else by its children (codes[7])."""
    if d >= steps_hi or status == codes[0]:
        return codes[8]
    if d >= steps_lo:
        return codes[3]
    if status == codes[1]:
        return codes[4]
    return codes[5] if row < 0 else codes[7]


@_loop
def expansion_loop(
    d: int,  # the nodes' depth
    status: np.ndarray,  # [A] int8: each walk's node's OUT / IN / MAYBE
    row: np.ndarray,  # [A] int64: its recorded expanded position, -1 when not expanded
    steps: np.ndarray,  # [2, A] int64: draft steps possibly run, surely run (gammaThreshold)
    codes: np.ndarray,  # [9] int8: analysis.compare.subtree.LEVEL_CODES
    how: np.ndarray,  # out [A] int8: _expansion's code of each node
) -> None:
    """_expansion of the nodes the greedy walks stand on at depth ``d`` (analysis.compare.subtree_batch)."""
    for j in range(how.shape[0]):
        how[j] = _expansion(d, status[j], row[j], steps[0, j], steps[1, j], codes)


@_loop
def level_doubts_loop(
    indexed: np.ndarray,  # [L, C] bool: the slot is in the sub-tree
    before: np.ndarray,  # [C] int64: the sub-tree's nodes numbered before this level
    rec_node: np.ndarray,  # [L, C] int64: the slot's recorded level-local node, -1 for none
    row: np.ndarray,  # [L, C] int64: its recorded expanded position, -1 when not expanded
    status: np.ndarray,  # [L, C] int8: OUT / IN / MAYBE (codes[0], codes[1])
    sure: np.ndarray,  # [L, C] bool: the slot certainly exists
    first: int,  # the level's first tree-order node, -1 for none
    steps: np.ndarray,  # [2, C] int64: draft steps possibly run, surely run (gammaThreshold)
    d: int,  # the level's depth
    codes: np.ndarray,  # [9] int8: analysis.compare.subtree.LEVEL_CODES
    idx: np.ndarray,  # out [L, C] int64: the slot's sub-tree index, -1 when not in it
    n: np.ndarray,  # out [C] int64: the nodes numbered through this level
    recs: np.ndarray,  # out [L, C] int64: its recorded node (tree order), -1 for none
    kind: np.ndarray,  # out [L, 2 + W, C] bool: the doubts on its kept width, its expansion (rows 2..: child_slots_loop's)
    why: np.ndarray,  # out [L, 2 + W, C] int8: their reasons (rows 2..: WHY_BEYOND)
    expands: np.ndarray,  # out [L, C] bool: the walk leaves the node by its children
) -> None:
    """One level of a compared config's possible sub-tree (analysis.compare.sampling_subtrees.
    _sub_tree_level): its slots numbered in slot order, their recorded nodes and doubts, one pass
    over the level's slots where numpy makes some twenty (their validate rows are made where read:
    sampling_subtrees._NodeRows). Rows 2.. of ``kind`` (the children of unknown token) are left to
    child_slots_loop, which writes every one of them."""
    n_slots, c = indexed.shape
    ranks = kind.shape[1]
    why_width, why_unexpanded, why_beyond = codes[2], codes[5], codes[6]  # scalars: no load of codes in the loop
    expands_code, not_opened = codes[7], codes[8]
    n[:] = before
    for u in range(n_slots):  # slot by slot, round by round: each row read and written in memory order
        for j in range(c):
            ind = indexed[u, j]
            idx[u, j] = n[j] if ind else -1
            n[j] += ind
            rn, rw = rec_node[u, j], row[u, j]
            recs[u, j] = first + rn if rn >= 0 and first >= 0 else -1
            how = _expansion(d, status[u, j], rw, steps[0, j], steps[1, j], codes) if ind else not_opened
            doubt = (how != expands_code) & (how != not_opened)
            expands[u, j] = how == expands_code
            kind[u, 0, j], why[u, 0, j] = ind & ~sure[u, j], why_width
            kind[u, 1, j], why[u, 1, j] = doubt, how if doubt else why_unexpanded
        for r in range(2, ranks):
            for j in range(c):
                why[u, r, j] = why_beyond


@_loop
def level_reach_loop(
    idx: np.ndarray,  # [L, C] int64: each slot's sub-tree index, -1 when not in the sub-tree
    recs: np.ndarray,  # [L, C] int64: each slot's recorded node, -1 for none
    held: np.ndarray,  # [C, M] bool: the recorded walk holds the node
    reach_lo: np.ndarray,  # [C, M] float64: its reach bounds
    reach_hi: np.ndarray,
    blind_in: np.ndarray,  # [C, M] bool: the edge into the node is blind
    sums: np.ndarray,  # out [2, C] float64: reach_lo, reach_hi of the sub-tree's slots added in slot order
    blind: np.ndarray,  # out [C] bool: a sub-tree slot holds a recorded node with a blind edge
    all_held: np.ndarray,  # out [C] bool: the walk holds every sub-tree slot's recorded node
) -> None:
    """What a candidate's level gives each round from the recorded walk's per-node arrays
    (analysis.compare.sampling_reach; a slot's node clipped into 0..M-1 where it has none): one
    pass, round by round (a round's nodes are read from one row), where numpy gathers each array
    and then sums, masks and reduces it."""
    n_slots, c = recs.shape
    last = held.shape[1] - 1
    for j in range(c):
        sum_lo = 0.0
        sum_hi = 0.0
        any_blind = False
        every = True
        for e in range(n_slots):
            r = recs[e, j]
            q = min(max(r, 0), last)
            if idx[e, j] >= 0:  # adding 0.0 for a slot outside the sub-tree changes no sum
                sum_lo = sum_lo + reach_lo[j, q]
                sum_hi = sum_hi + reach_hi[j, q]
                known = r >= 0  # bitwise, not short-circuit: no branch on the data (about twice as fast)
                any_blind = any_blind | (known & blind_in[j, q])
                every = every & known & held[j, q]
        sums[0, j] = sum_lo
        sums[1, j] = sum_hi
        blind[j] = any_blind
        all_held[j] = every


@njit(inline="always")
def _ahead(key_a: float, tie_a: int, key_b: float, tie_b: int) -> Any:
    """Whether node a goes before node b in selection: replay.core.selection.precedes' rule, read on
    the numbers rank_ties gave (``tie``), so that the tie rule stays written once."""
    return key_a > key_b or (key_a == key_b and tie_a < tie_b)


@_loop
def selection_places_loop(
    valid: np.ndarray,  # [L, C] bool: the level's slots
    exact: np.ndarray,  # [L, C] bool: the slot's key is exact
    sure: np.ndarray,  # [L, C] bool: the slot surely exists
    ordered: np.ndarray,  # [L, C] bool: its tree order is known
    key: np.ndarray,  # [L, C] float64: its selection key (lo), read where valid
    tie: np.ndarray,  # [L, C] int64: rank_ties of its tree position (replay.core.selection; lower first)
    place: np.ndarray,  # out [L, C] int64: a valid node's place in its column's selection order, -1 for none (fast columns)
    fast: np.ndarray,  # out [C] bool: every valid node's key is known and ordered
    in_order: np.ndarray,  # out [C] bool: the valid nodes come first, in selection order
) -> None:
    """analysis.compare.subtree_select.selection_places: the places of the columns of known, ordered
    keys, whatever the number of heads (a node is selected where its place is below it). Where the
    valid nodes already come in selection order (no row preceded by the row below it), a node's
    place is its row; in the other fast columns it is the number of valid nodes ahead of it (the
    higher key, equal keys by ``tie``, equal ties in row order: replay.core.selection.top_k_columns'
    successive maxima; a NaN key is never placed). One pass over the level where numpy makes some
    fifteen, and a count per node of the few columns out of order; the other columns' places are
    the caller's to ignore."""
    n_slots, c = valid.shape
    for j in range(c):
        fast[j] = True
        in_order[j] = True
    for u in range(n_slots):  # slot by slot, round by round: each row read and written in memory order
        for j in range(c):
            v = valid[u, j]
            fast[j] = fast[j] and (not v or (exact[u, j] and sure[u, j] and ordered[u, j]))
            place[u, j] = u if v else -1
            if (
                u and v
            ):  # an invalid node below a valid one breaks nothing; a valid one needs its row above valid and ahead
                v0 = valid[u - 1, j]
                k0 = key[u - 1, j] if v0 else -np.inf
                k1 = key[u, j]
                in_order[j] = in_order[j] and v0 and k0 >= k1 and not _ahead(k1, tie[u, j], k0, tie[u - 1, j])
    for j in range(c):
        if not fast[j] or in_order[j]:
            continue
        for u in range(n_slots):
            k1 = key[u, j]
            if not valid[u, j] or k1 != k1:
                place[u, j] = -1
                continue
            before = 0
            for w in range(n_slots):
                k0 = key[w, j]
                if w != u and valid[w, j]:
                    tied = k0 == k1 and tie[w, j] == tie[u, j] and w < u
                    if tied or _ahead(k0, tie[w, j], k1, tie[u, j]):
                        before += 1
            place[u, j] = before
