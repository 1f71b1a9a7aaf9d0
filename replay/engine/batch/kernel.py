"""The batch replay kernel: rebuild, validate and accept one chunk of rounds of one shape.

``replay.engine.replayer.replay_round`` stays the readable reference; this kernel must give the same
per-round results, the same skip decisions included (tests/test_batch_property.py compares the two
on random dumps, tests/test_batch_samples.py on the bundled samples).

Python loops here run over draft steps (depth) and over the few expanded slots of one fixed shape
(constants of the tree config), never over rounds.

Every array has the round axis last: a matrix of R rounds is ``[rows, cols, R]``, a tree level of
a chunk of C rounds is ``[slots, C]``. numpy then works on contiguous vectors over rounds and
reduces the short slot axis with contiguous inner loops, about ten times faster than reducing the
short last axis of a ``[C, slots]`` array (measured on the 2-core development machine: 3.7 vs 34
ns per round for a max over 6 slots).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from replay.core.selection import (
    first_true,
    invalid_parents_columns,
    parents_mismatch_note,
    selection_method,
    top_k_columns,
)
from replay.core.vocab import LAYOUT_ALL, LAYOUT_PARENTS, PAD_TOKEN, SELECT_PARENTS, SELECT_PATH_PROB, SELECT_ROOT
from replay.io.roundbatch import MatrixStack, RoundBatch

from .codes import (
    ERR_LOST_STEP,
    ERR_MATRIX_SHAPE,
    ERR_OK,
    ERR_PARENTS,
    ERR_TOKENS,
    ERR_VALIDATE_COL0,
    ERR_VALIDATE_ROWS,
    SEL_FALLBACK,
    SEL_NONE,
    SEL_PARENTS,
    SEL_PATH,
    SEL_ROOT,
    BonusCode,
    StopCode,
)
from .result import BatchResult
from .shapes import TreeShape, _StepMaps


@lru_cache(maxsize=64)
def _columns(c: int) -> np.ndarray:
    """[C] int64 0..C-1, cached: every chunk of one run has the same size."""
    out = np.arange(c)
    out.flags.writeable = False
    return out


def _gather(arr2d: np.ndarray, index: np.ndarray, col: np.ndarray) -> np.ndarray:
    """arr2d[index[..., c], c] for a contiguous [L, C] arr2d.

    Lanes of rounds that already stopped (or were rejected) may carry indices out of [0, L): they
    read some other cell (mode="clip" keeps it in bounds) and their value is never used.
    """
    return np.take(arr2d.reshape(-1), index * arr2d.shape[1] + col, mode="clip")


def level_tokens(st: MatrixStack, m: _StepMaps, lo: int, hi: int) -> np.ndarray:
    """[L_{i+1}, C] the tokens of one draft step's level for rounds lo..hi: each slot's cell of its
    parent's row at its rank, copied (the rebuild and the sampling replay read a level this way)."""
    out: np.ndarray = st.ids[m.slot_parent, m.slot_rank, lo:hi]
    return out


@dataclass
class _Checks:
    """Per-round rejection conditions in the reference's order; the first that holds is the code."""

    conds: list = field(default_factory=list)

    def add(self, cond: np.ndarray, code: int) -> None:
        if cond.any():
            self.conds.append((cond, code))

    def codes(self, c: int) -> np.ndarray:
        err = np.zeros(c, dtype=np.int8)
        for cond, code in reversed(self.conds):
            err = np.where(cond, np.int8(code), err)
        return err


@dataclass
class _Rebuilt:
    """The recorded trees of one chunk of C rounds, as ``_rebuild_chunk`` returns them."""

    tokens: list[np.ndarray]  # per draft step i: [L_{i+1}, C] int64 level i+1 tokens
    chosen: list[np.ndarray]  # per draft step i: [h_i, C] int64 expanded nodes, level-local
    selection: np.ndarray  # [S, C] int8 SEL_* code of each step
    mismatch: list  # (step, differs [C], dump's parents [h, C], path-probability choice [h, C])
    level_lp: list  # per draft step i: [L_{i+1}, C] float64 path log-probs, None once a step has no scores
    checks: _Checks  # rejection conditions found while rebuilding


def _rebuild_chunk(batch: RoundBatch, lo: int, hi: int, shape: TreeShape, static: bool, col: np.ndarray) -> _Rebuilt:
    """Tree of every round in [lo, hi): level tokens, expanded nodes, selection codes, notes to check,
    and the path log-probabilities of levels 1..S as the reference sums them."""
    c = hi - lo
    checks = _Checks()
    level_lp: list[np.ndarray | None] = []
    lp: np.ndarray | None = np.zeros((1, c))  # [L_i, C] path log-probs of level i; None once unknown
    tokens: list[np.ndarray] = []  # level i+1 tokens [L_{i+1}, C]
    chosen: list[np.ndarray] = []  # step i's expanded nodes [h_i, C], level-local
    selection = np.empty((shape.num_steps, c), dtype=np.int8)
    mismatch = []  # (step, differs [C], dump's parents [h, C], path-probability choice [h, C])
    for i, st in enumerate(batch.steps):
        m = shape.maps[i]
        h, level = shape.heads[i], shape.level_sizes[i]
        kept = level_tokens(st, m, lo, hi)
        checks.add(kept.min(axis=0) < 0, ERR_TOKENS)  # PAD_TOKEN is negative too
        tokens.append(kept)
        par = None if st.parents is None else st.parents[:h, lo:hi].astype(np.int64)  # [h, C]
        how = selection_method(i, par is not None, lp is not None)  # lp: scores of some rounds
        if how == SELECT_ROOT:
            ch = np.zeros((1, c), dtype=np.int64)
            selection[0] = SEL_ROOT
            if par is not None:
                checks.add(par[0] != 0, ERR_PARENTS)
        elif how == SELECT_PARENTS:
            local = par - shape.starts[i]
            checks.add(invalid_parents_columns(local, level), ERR_PARENTS)
            ch = np.clip(local, 0, level - 1)
            selection[i] = SEL_PARENTS
            if static and lp is not None:
                expect = top_k_columns(lp, h, col)
                differs = ~np.isnan(lp).any(axis=0) & (expect != local).any(axis=0)
                if differs.any():
                    mismatch.append((i, differs, local + shape.starts[i], expect + shape.starts[i]))
        elif how == SELECT_PATH_PROB:
            have = ~np.isnan(lp).any(axis=0)  # rounds without scores fall back
            best = top_k_columns(lp, h, col)
            if have.all():
                ch, selection[i] = best, SEL_PATH
            else:
                ch = np.where(have, best, m.fallback[:, None])
                selection[i] = np.where(have, SEL_PATH, SEL_FALLBACK)
        else:
            ch = np.broadcast_to(m.fallback[:, None], (h, c))
            selection[i] = SEL_FALLBACK
        chosen.append(ch)
        if lp is not None and st.logp is not None:
            step_lp = st.logp[m.slot_parent, m.slot_rank, lo:hi]
            parent_lp = lp[0][None, :] if i == 0 else _gather(lp, ch, col)[m.slot_parent]
            lp = parent_lp + step_lp  # float64 sums in the reference's order (root: 0.0 + x)
        else:
            lp = None
        level_lp.append(lp)
    return _Rebuilt(tokens, chosen, selection, mismatch, level_lp, checks)


def _validate_chunk(batch: RoundBatch, lo: int, hi: int, shape: TreeShape, deeper: tuple = ()):
    """(column 0 [vrows, C], layout is "all" [C] bool, rows the layout uses [C], rejection conditions)
    as resolve_layout; deeper: the all layout's row counts of deeper trees (a lost last step)."""
    checks = _Checks()
    v = batch.validate.ids[:, :, lo:hi]
    vrows, vcols, c = v.shape
    row_no = np.arange(vrows)[:, None]
    val0 = np.ascontiguousarray(v[:, 0, :])
    last_used = val0[-1] != PAD_TOKEN if vcols == 1 else (v[-1] != PAD_TOKEN).any(axis=0)
    if last_used.all():  # the common case: no trailing padding rows in any round of the chunk
        rows_used = np.full(c, vrows)
    else:
        nonpad = val0 != PAD_TOKEN if vcols == 1 else (v != PAD_TOKEN).any(axis=1)  # [vrows, C]
        rows_used = (nonpad * (row_no + 1)).max(axis=0)  # trailing all-PAD rows are padding
    n_par, n_all = shape.num_expanded, shape.num_nodes + 1
    if deeper and batch.layout != LAYOUT_PARENTS:  # as replayer._check_no_lost_step, checked first
        checks.add(np.isin(rows_used, deeper), ERR_LOST_STEP)
    if batch.layout is not None:
        need_v = n_par if batch.layout == LAYOUT_PARENTS else n_all
        # rows beyond the layout's that are not padding are unexplained, as resolve_layout
        bad_rows = rows_used != need_v
        checks.add(bad_rows, ERR_VALIDATE_ROWS)
        is_all = np.full(c, batch.layout == LAYOUT_ALL)
        need = np.full(c, need_v)
    else:
        is_par = rows_used == n_par
        is_all = ~is_par & (rows_used == n_all)
        checks.add(~(is_par | is_all), ERR_VALIDATE_ROWS)
        need = np.where(is_par, n_par, n_all)
    if (need == need[0]).all():
        checks.add(val0[: int(need[0])].min(axis=0) < 0, ERR_VALIDATE_COL0)
    else:
        checks.add(((val0 < 0) & (row_no < need)).any(axis=0), ERR_VALIDATE_COL0)
    return val0, is_all, need, checks


@dataclass
class _Accepted:
    """The accepted path of each round of one chunk of C rounds (BatchResult's fields, for [lo, hi))."""

    nodes: np.ndarray  # [S, C] int64 accepted node ids per depth, PAD_TOKEN past the end
    tokens: np.ndarray  # [S, C] int64 accepted tokens per depth, PAD_TOKEN past the end
    ranks: np.ndarray  # [S, C] int64 sibling rank of each accepted node, PAD_TOKEN past the end
    length: np.ndarray  # [C] int64 accepted draft tokens
    bonus_token: np.ndarray  # [C] int64 the target's token where the walk stopped (PAD: no row)
    bonus_kind: np.ndarray  # [C] uint8 none 0 / correction 1 / leaf bonus 2
    stop: np.ndarray  # [C] uint8 leaf 0 / mismatch 1 / no row 2


def _accept_chunk(
    shape: TreeShape,
    tokens: list[np.ndarray],
    chosen: list[np.ndarray],
    val0: np.ndarray,
    is_all: np.ndarray,
    col: np.ndarray,
) -> _Accepted:
    """Greedy acceptance, one depth at a time, every round of the chunk at once.

    Lanes of rounds that already stopped keep computing on stale indices (cheaper than masking
    them); only ``alive`` lanes record anything.
    """
    c = col.shape[0]
    s_count = shape.num_steps
    all_rows, no_all = bool(is_all.all()), not is_all.any()
    wants = np.empty((s_count + 1, c), dtype=np.int64)  # target's top-1 at the depth-d node
    expanded_at = np.zeros((s_count + 1, c), dtype=bool)  # the depth-d node has children
    alive = np.ones(c, dtype=bool)
    length = np.zeros(c, dtype=np.int64)
    cur = np.zeros(c, dtype=np.int64)  # level-local index of the current node
    acc_nodes = np.empty((s_count, c), dtype=np.int64)  # [S, C] filled depth by depth below
    acc_tokens = np.empty((s_count, c), dtype=np.int64)  # [S, C]
    acc_ranks = np.empty((s_count, c), dtype=np.int64)  # [S, C]
    for d in range(s_count + 1):
        h = shape.heads[d] if d < s_count else 0
        if d == 0:  # the root: expanded at step 0, target row 0 in both layouts
            expanded_at[0] = True
            j = None
            want = val0[0]
        else:
            if h == 1:
                expanded = chosen[d][0] == cur
                j = None
            elif h:
                eq = chosen[d] == cur
                expanded = eq.any(axis=0)
                j = first_true(eq)  # h when not expanded: a stale lane, clipped by the gathers
            else:
                expanded = expanded_at[d]  # the last level: leaves
                j = None
            expanded_at[d] = expanded
            node_row = shape.starts[d] + cur
            if all_rows:
                want = _gather(val0, node_row, col)
            else:
                par_row = shape.head_offsets[min(d, s_count - 1)] + (0 if j is None else j)
                row = par_row if no_all else np.where(is_all, node_row, par_row)
                want = np.where(is_all | expanded, _gather(val0, row, col), PAD_TOKEN)
        wants[d] = want
        if d == s_count:
            break
        m = shape.maps[d]
        wmax = int(m.width.max())
        uniform = int(m.width.min()) == wmax
        if j is None:
            first = int(m.child_offset[0])
        elif uniform:
            first = j * wmax
        else:
            first = np.take(m.child_offset, j, mode="clip")
        if d == 0:
            kid_tokens = tokens[0]  # the root's children: all of level 1
        else:
            slots = first + np.arange(wmax)[:, None] if wmax > 1 else first + np.zeros((1, 1), dtype=np.int64)
            kid_tokens = _gather(tokens[d], np.broadcast_to(slots, (wmax, c)), col)
        match = kid_tokens == want
        if not uniform:
            match &= np.arange(wmax)[:, None] < np.take(m.width, j, mode="clip")
        if d:
            match &= expanded
        if wmax > 1:
            r = first_true(match)  # wmax when nothing matched: only stopped lanes
            moving = alive & match.any(axis=0)
            tok = _gather(kid_tokens, r, col)
        else:
            r = np.zeros(c, dtype=np.int64)
            moving = alive & match[0]
            tok = kid_tokens[0]
        new_cur = first + r
        acc_nodes[d] = np.where(moving, new_cur + shape.starts[d + 1], PAD_TOKEN)
        acc_tokens[d] = np.where(moving, tok, PAD_TOKEN)
        acc_ranks[d] = np.where(moving, r, PAD_TOKEN)
        length += moving
        cur = new_cur
        alive = moving
    # Where the walk stopped: the target's token there is the bonus (PAD when the dump has no row).
    at = length * c + col
    bonus = np.take(wants.reshape(-1), at)
    had_kids = np.take(expanded_at.reshape(-1), at)
    known = (bonus != PAD_TOKEN).view(np.uint8)
    kids = had_kids.view(np.uint8)
    # Codes looked up by (had children, target row known) on 0/1 bytes (two nested wheres cost 4x more).
    case = (kids << np.uint8(1)) | known
    return _Accepted(acc_nodes, acc_tokens, acc_ranks, length, bonus, _BONUS_BY_CASE[case], _STOP_BY_CASE[case])


# Indexed by 2 * had_children + target_row_known: a leaf stops the walk whatever the row; at a node
# with children the target's token is a correction (it matched no child) when the dump has its row.
_CASES = ((False, False), (False, True), (True, False), (True, True))
_STOP_BY_CASE = np.array(
    [StopCode.LEAF if not kids else StopCode.MISMATCH if known else StopCode.NO_ROW for kids, known in _CASES],
    dtype=np.uint8,
)
_BONUS_BY_CASE = np.array(
    [BonusCode.NONE if not known else BonusCode.CORRECTION if kids else BonusCode.LEAF for kids, known in _CASES],
    dtype=np.uint8,
)


def _replay_chunk(
    batch: RoundBatch,
    lo: int,
    hi: int,
    shape: TreeShape,
    static: bool,
    res: BatchResult,
    notes: dict,
    small: np.ndarray | None = None,
    deeper: tuple = (),
) -> None:
    """Replay rounds [lo, hi) of ``batch`` (all of ``shape``) into ``res`` rows [lo, hi).

    small: [R] bool, rounds whose own matrices are too small for ``shape`` (padded batches): the
    reference rejects them before anything else.
    """
    c = hi - lo
    col = _columns(c)
    sl = slice(lo, hi)
    tree = _rebuild_chunk(batch, lo, hi, shape, static, col)
    val0, is_all, need, validate_checks = _validate_chunk(batch, lo, hi, shape, deeper)
    checks = _Checks()
    if small is not None:  # a round whose own matrix is too small for the tree: its shape is the first fault
        checks.add(small[lo:hi], ERR_MATRIX_SHAPE)
    checks.conds += tree.checks.conds + validate_checks.conds  # the reference checks the tree first
    acc = _accept_chunk(shape, tree.tokens, tree.chosen, val0, is_all, col)
    s_count = shape.num_steps
    res.accepted_nodes[:s_count, sl] = acc.nodes
    res.accepted_tokens[:s_count, sl] = acc.tokens
    res.accepted_ranks[:s_count, sl] = acc.ranks
    res.accepted_length[sl] = acc.length
    res.bonus_token[sl] = acc.bonus_token
    res.bonus_kind[sl] = acc.bonus_kind
    res.stop[sl] = acc.stop
    res.layout[sl] = is_all
    vrows = batch.validate.rows if batch.validate.rows_of is None else batch.validate.rows_of[lo:hi]
    res.validate_extra_rows[sl] = vrows - need
    res.selection[:s_count, sl] = tree.selection
    if res.expanded is not None:
        for i, ch in enumerate(tree.chosen):
            res.expanded[shape.head_offsets[i] : shape.head_offsets[i] + ch.shape[0], sl] = ch
    mismatch = tree.mismatch
    ok = None
    if checks.conds:  # rejected rounds get the defaults (PAD_TOKEN / 0) in every outcome
        err = checks.codes(c)
        res.error[sl] = err
        ok = err == ERR_OK
        bad = lo + np.flatnonzero(~ok)
        for name, fill in _OUTCOME_DEFAULTS:
            getattr(res, name)[..., bad] = fill
        if res.expanded is not None:
            res.expanded[:, bad] = -1
    for i, differs, got, expect in mismatch:
        for k in np.flatnonzero(differs if ok is None else differs & ok):  # rare: parents disagree with scores
            notes.setdefault(lo + int(k), []).append(
                parents_mismatch_note(i, got[:, k].tolist(), expect[:, k].tolist())
            )


_OUTCOME_DEFAULTS = (
    ("layout", 0),
    ("validate_extra_rows", 0),
    ("selection", SEL_NONE),
    ("accepted_nodes", PAD_TOKEN),
    ("accepted_tokens", PAD_TOKEN),
    ("accepted_ranks", PAD_TOKEN),
    ("accepted_length", 0),
    ("bonus_token", PAD_TOKEN),
    ("bonus_kind", BonusCode.NONE),
    ("stop", StopCode.LEAF),
)
