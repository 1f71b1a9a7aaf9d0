"""The batch replay kernel: rebuild, validate and accept one chunk of rounds of one shape.

A rejected round's first fault is recorded with its place (``BatchResult.error_at``), so that its
message is worded from the record (replay.engine.batch.rejections), never by replaying the round.

Python loops here run over draft steps (depth) and over the few expanded slots of one fixed shape
(constants of the tree config), never over rounds.

Every array has the round axis last: a matrix of R rounds is ``[rows, cols, R]``, a tree level of
a chunk of C rounds is ``[slots, C]``. numpy then works on contiguous vectors over rounds and
reduces the short slot axis with contiguous inner loops, about ten times faster than reducing the
short last axis of a ``[C, slots]`` array (measured on the 2-core development machine: 3.7 vs 34
ns per round for a max over 6 slots).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from replay.core.acceptance import validate_row
from replay.core.selection import (
    first_true,
    invalid_parents_columns,
    parents_mismatch_note,
    selection_method,
    top_k_columns,
)
from replay.core.vocab import (
    LAYOUT_ALL,
    LAYOUT_PARENTS,
    PAD_TOKEN,
    SELECT_PARENTS,
    SELECT_PATH_PROB,
    SELECT_ROOT,
    any_not_token_ids,
    below_padding,
    not_token_ids,
)
from replay.io.roundbatch import MatrixStack, RoundBatch

from .checks import Checks
from .codes import (
    ERR_LOST_STEP,
    ERR_MATRIX_SHAPE,
    ERR_NO_ROWS,
    ERR_OK,
    ERR_PARENTS,
    ERR_TOKENS,
    ERR_VALIDATE_COL0,
    ERR_VALIDATE_ROWS,
    MATRIX_COLUMNS,
    MATRIX_ROWS,
    PARENTS_LEVEL,
    PARENTS_ROOT,
    ROWS_FEWER,
    ROWS_NO_LAYOUT,
    ROWS_OF_ALL,
    ROWS_UNEXPLAINED,
    SEL_FALLBACK,
    SEL_PARENTS,
    SEL_PATH,
    SEL_ROOT,
    TOKEN_NEGATIVE,
    TOKEN_PADDING,
    BonusCode,
    StopCode,
)
from .companions import check_lost_companions
from .result import BatchResult
from .shapes import TreeShape, _StepMaps, tree_shape


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


def _check_matrix_size(checks: Checks, st: MatrixStack, shape: TreeShape, i: int, lo: int, hi: int) -> None:
    """Rounds [lo, hi) whose own draft_step_i has fewer rows or columns than ``shape`` reads (a padded
    batch keeps each round's sizes): a step's size is checked first, rows before columns."""
    heads, width = shape.heads[i], max(shape.widths[i])
    if not st.padded and st.rows >= heads and st.cols >= width:
        return  # the common case: every round's matrix is the stack's, large enough
    checks.add(st.own_rows()[lo:hi] < heads, ERR_MATRIX_SHAPE, i, detail=MATRIX_ROWS)
    checks.add(st.own_cols()[lo:hi] < width, ERR_MATRIX_SHAPE, i, detail=MATRIX_COLUMNS)


def _check_tokens(checks: Checks, kept: np.ndarray, rows: np.ndarray, m: _StepMaps, i: int) -> None:
    """Step i's expanded rows (rows: [h, cols, C], every column, kept or not) with padding among
    their kept tokens (kept: [L_{i+1}, C] int64) or a negative id other than padding in any column.
    Rows are checked in order, padding before negative ids: the first faulty row is named."""
    least = int(rows.min(initial=0))
    if least >= 0:
        return  # the common case: no padding, no negative id (kept tokens are cells of rows)
    kept_pad = kept == PAD_TOKEN  # [L_{i+1}, C]
    fault = not_token_ids(rows).any(axis=1) if below_padding(least) else np.zeros(rows.shape[::2], dtype=bool)
    padded = np.zeros_like(fault)  # [h, C] rows with padding among their kept tokens
    if kept_pad.any():
        for j in range(fault.shape[0]):  # a few expanded rows
            padded[j] = kept_pad[m.slot_parent == j].any(axis=0)
    fault |= padded
    bad = fault.any(axis=0)
    if not bad.any():
        return
    row = np.argmax(fault, axis=0)  # [C] int64
    on_row = np.take_along_axis(padded, row[None, :], axis=0)[0]
    checks.add(bad, ERR_TOKENS, i, row, np.where(on_row, TOKEN_PADDING, TOKEN_NEGATIVE))


@dataclass
class _Rebuilt:
    """The recorded trees of one chunk of C rounds, as ``_rebuild_chunk`` returns them."""

    tokens: list[np.ndarray]  # per draft step i: [L_{i+1}, C] int64 level i+1 tokens
    chosen: list[np.ndarray]  # per draft step i: [h_i, C] int64 expanded nodes, level-local
    selection: np.ndarray  # [S, C] int8 SEL_* code of each step
    mismatch: list  # (step, differs [C], dump's parents [h, C], path-probability choice [h, C])
    level_lp: list  # per draft step i: [L_{i+1}, C] float64 path log-probs, None once a step has no scores
    checks: Checks  # rejection conditions found while rebuilding


def _rebuild_chunk(
    batch: RoundBatch,
    lo: int,
    hi: int,
    shape: TreeShape,
    static: bool,
    col: np.ndarray,
    given: list[np.ndarray] | None = None,
) -> _Rebuilt:
    """Tree of every round in [lo, hi): level tokens, expanded nodes, selection codes, notes to check,
    and the path log-probabilities of levels 1..S (float64, parent's plus the step's). Only the first
    ``shape.num_steps`` draft steps of ``batch`` are read (a shorter shape: the steps before a fault).
    given: per draft step i, [h_i, R] int64 the expanded nodes a replay chose (columns lo:hi read):
    the selection is then not made again, and the selection codes and notes are meaningless."""
    c = hi - lo
    checks = Checks()
    level_lp: list[np.ndarray | None] = []
    lp: np.ndarray | None = np.zeros((1, c))  # [L_i, C] path log-probs of level i; None once unknown
    tokens: list[np.ndarray] = []  # level i+1 tokens [L_{i+1}, C]
    chosen: list[np.ndarray] = []  # step i's expanded nodes [h_i, C], level-local
    selection = np.empty((shape.num_steps, c), dtype=np.int8)
    mismatch = []  # (step, differs [C], dump's parents [h, C], path-probability choice [h, C])
    for i, (st, m) in enumerate(zip(batch.steps, shape.maps)):
        _check_matrix_size(checks, st, shape, i, lo, hi)
        kept = level_tokens(st, m, lo, hi)
        _check_tokens(checks, kept, st.ids[: shape.heads[i], :, lo:hi], m, i)
        tokens.append(kept)
        par = None if st.parents is None else st.parents[: shape.heads[i], lo:hi].astype(np.int64)  # [h, C]
        if given is None:
            ch, selection[i], differs = _select_step(shape, i, par, lp, static, col, checks)
        else:
            ch, differs = given[i][:, lo:hi], None
        if differs is not None:
            mismatch.append(differs)
        chosen.append(ch)
        if lp is not None and st.logp is not None:
            step_lp = st.logp[m.slot_parent, m.slot_rank, lo:hi]
            parent_lp = lp[0][None, :] if i == 0 else _gather(lp, ch, col)[m.slot_parent]
            lp = parent_lp + step_lp  # float64 sums from the root down (root: 0.0 + x)
        else:
            lp = None
        level_lp.append(lp)
    if given is None:
        check_lost_companions(checks, batch, shape, selection, lo, hi)
    return _Rebuilt(tokens, chosen, selection, mismatch, level_lp, checks)


def _select_step(
    shape: TreeShape,
    i: int,
    par: np.ndarray | None,
    lp: np.ndarray | None,
    static: bool,
    col: np.ndarray,
    checks: Checks,
) -> tuple[np.ndarray, np.ndarray | int, tuple | None]:
    """Which level-i nodes draft step i expanded, as replay.core.selection.selection_method decides:
    ([h, C] int64 level-local nodes, SEL_* code(s), a parents-vs-scores mismatch or None).

    par: [h, C] int64 the dump's explicit parents (tree-order ids) or None; lp: [L_i, C] float64
    level i's path log-probs (NaN in rounds without scores) or None once a step had no scores.
    """
    m, h, level, c = shape.maps[i], shape.heads[i], shape.level_sizes[i], col.shape[0]
    how = selection_method(i, par is not None, lp is not None)  # lp: scores of some rounds
    if how == SELECT_ROOT:
        if par is not None:
            checks.add(par[0] != 0, ERR_PARENTS, 0, detail=PARENTS_ROOT)
        return np.zeros((1, c), dtype=np.int64), SEL_ROOT, None
    if how == SELECT_PARENTS:
        assert par is not None  # selection_method chose the explicit parents
        local = par - shape.starts[i]
        checks.add(invalid_parents_columns(local, level), ERR_PARENTS, i, detail=PARENTS_LEVEL)
        mismatch = None
        if static and lp is not None:  # a static tree's parents are checked against the scores
            expect = top_k_columns(lp, h, col)
            differs = ~np.isnan(lp).any(axis=0) & (expect != local).any(axis=0)
            if differs.any():
                mismatch = (i, differs, local + shape.starts[i], expect + shape.starts[i])
        return np.clip(local, 0, level - 1), SEL_PARENTS, mismatch
    if how == SELECT_PATH_PROB:
        assert lp is not None  # selection_method chose the scores
        have = ~np.isnan(lp).any(axis=0)  # rounds without scores fall back
        best = top_k_columns(lp, h, col)
        if have.all():
            return best, SEL_PATH, None
        return np.where(have, best, m.fallback[:, None]), np.where(have, SEL_PATH, SEL_FALLBACK), None
    return np.broadcast_to(m.fallback[:, None], (h, c)), SEL_FALLBACK, None


def unfit_faults(batch: RoundBatch, lo: int, hi: int, shape: TreeShape, step: int, static: bool):
    """([C] int8 code, [3, C] int64 place) of rounds [lo, hi) of a batch whose draft_step_``step``
    matrices are too small for ``shape`` (the stack's sizes: no tree can be rebuilt)."""
    last = Checks()
    _check_matrix_size(last, batch.steps[step], shape, step, lo, hi)
    prefix = tree_shape(shape.heads[:step], shape.widths[:step]) if step else None
    return _first_faults(batch, lo, hi, prefix, static, last)


def no_rows_faults(batch: RoundBatch, prefix: TreeShape, static: bool):
    """([R] int8 code, [3, R] int64 place) of a batch (a dynamic tree's) whose every round has no
    valid row at draft step k = ``prefix.num_steps``; prefix: their shape up to step k."""
    last = Checks()
    last.add(np.ones(len(batch), dtype=bool), ERR_NO_ROWS, prefix.num_steps)
    return _first_faults(batch, 0, len(batch), prefix, static, last)


def _first_faults(batch: RoundBatch, lo: int, hi: int, prefix: TreeShape | None, static: bool, last: Checks):
    """The reasons of rounds [lo, hi) that all fail at draft step k = ``prefix.num_steps`` for
    ``last``'s conditions: a fault of steps 0..k-1 comes first (each step is checked before the
    next is read). prefix: the rounds' shape up to step k, None when k = 0."""
    checks = Checks() if prefix is None else _rebuild_chunk(batch, lo, hi, prefix, static, _columns(hi - lo)).checks
    checks.conds += last.conds
    return checks.reasons(hi - lo)


def _validate_chunk(batch: RoundBatch, lo: int, hi: int, shape: TreeShape, deeper: tuple = ()):
    """(column 0 [vrows, C], layout is "all" [C] bool, rows the layout uses [C], rejection conditions);
    deeper: the all layout's row counts of deeper trees (a lost last step)."""
    checks = Checks()
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
    n_par, n_all = shape.validate_rows(LAYOUT_PARENTS), shape.validate_rows(LAYOUT_ALL)
    if deeper and batch.layout != LAYOUT_PARENTS:  # a lost last step, checked first
        _check_lost_step(checks, rows_used, deeper)
    if batch.layout is not None:
        need_v = n_par if batch.layout == LAYOUT_PARENTS else n_all
        # rows beyond the layout's that are not padding are unexplained
        checks.add(rows_used < need_v, ERR_VALIDATE_ROWS, row=rows_used, detail=ROWS_FEWER)
        if batch.layout == LAYOUT_PARENTS:
            checks.add(rows_used >= n_all, ERR_VALIDATE_ROWS, row=rows_used, detail=ROWS_OF_ALL)
        checks.add(rows_used > need_v, ERR_VALIDATE_ROWS, row=rows_used, detail=ROWS_UNEXPLAINED)
        is_all = np.full(c, batch.layout == LAYOUT_ALL)
        need = np.full(c, need_v)
    else:
        is_par = rows_used == n_par
        is_all = ~is_par & (rows_used == n_all)
        checks.add(rows_used > n_all, ERR_VALIDATE_ROWS, row=rows_used, detail=ROWS_UNEXPLAINED)
        checks.add(~(is_par | is_all), ERR_VALIDATE_ROWS, row=rows_used, detail=ROWS_NO_LAYOUT)
        need = np.where(is_par, n_par, n_all)
    _check_validate_cells(checks, v, val0, need)
    return val0, is_all, need, checks


def _check_lost_step(checks: Checks, rows_used: np.ndarray, deeper: tuple) -> None:
    """rows_used: [C] int64 validate rows before trailing padding; deeper: the all layout's rows of
    trees of 1, 2, .. more draft steps. A round with exactly one of them lost that many steps' files."""
    if not np.isin(rows_used, deeper).any():
        return
    lost = np.zeros(rows_used.shape[0], dtype=np.int64)
    for more, rows in enumerate(deeper, 1):  # at most gamma counts
        lost[rows_used == rows] = more
    checks.add(lost > 0, ERR_LOST_STEP, row=rows_used, detail=lost)


def _check_validate_cells(checks: Checks, v: np.ndarray, val0: np.ndarray, need: np.ndarray) -> None:
    """A validate row the layout uses (v: [vrows, K, C]; val0 its column 0 as int64; need: [C] int64
    the rows used) without a token in column 0, or with a negative id other than padding in any
    column (the sampling rule reads every column); the first such row is the one named."""
    fault = val0 < 0
    if v.shape[1] > 1 and any_not_token_ids(v):
        fault |= not_token_ids(v).any(axis=1)
    if (need == need[0]).all():
        fault = fault[: int(need[0])]
    else:
        fault &= np.arange(val0.shape[0])[:, None] < need
    bad = fault.any(axis=0)
    if bad.any():
        row = np.argmax(fault, axis=0)
        padded = val0[row, np.arange(val0.shape[1])] == PAD_TOKEN  # else a negative id, worded as a draft's
        checks.add(bad, ERR_VALIDATE_COL0, row=row, detail=np.where(padded, TOKEN_PADDING, TOKEN_NEGATIVE))


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


@dataclass
class _Walk:
    """The greedy walk of C rounds, one depth at a time. Lanes of rounds that already stopped keep
    computing on stale indices (cheaper than masking them); only ``alive`` lanes record anything."""

    cur: np.ndarray  # [C] int64 level-local index of the current node
    alive: np.ndarray  # [C] bool still walking
    length: np.ndarray  # [C] int64 accepted draft tokens
    wants: np.ndarray  # [S+1, C] int64 the target's top-1 at the depth-d node (PAD_TOKEN: no row)
    expanded_at: np.ndarray  # [S+1, C] bool the depth-d node has children
    nodes: np.ndarray  # [S, C] int64 accepted node ids, filled depth by depth
    tokens: np.ndarray  # [S, C] int64 accepted tokens
    ranks: np.ndarray  # [S, C] int64 sibling ranks of the accepted nodes

    @classmethod
    def start(cls, steps: int, c: int) -> _Walk:
        at_depth = np.empty((steps, c), dtype=np.int64)
        return cls(
            np.zeros(c, dtype=np.int64),
            np.ones(c, dtype=bool),
            np.zeros(c, dtype=np.int64),
            np.empty((steps + 1, c), dtype=np.int64),
            np.zeros((steps + 1, c), dtype=bool),
            at_depth,
            at_depth.copy(),
            at_depth.copy(),
        )

    def advance(self, d: int, new_cur: np.ndarray, rank: np.ndarray, token: np.ndarray, moving: np.ndarray, start: int):
        """Record depth d's step (moving [C] bool: the rounds that matched a child) and move on to
        the child (new_cur [C] int64 level-local, rank [C] int64, token [C] int64; start: its level's first id)."""
        self.nodes[d] = np.where(moving, new_cur + start, PAD_TOKEN)
        self.tokens[d] = np.where(moving, token, PAD_TOKEN)
        self.ranks[d] = np.where(moving, rank, PAD_TOKEN)
        self.length += moving
        self.cur, self.alive = new_cur, moving


@dataclass(frozen=True)
class _Targets:
    """The validate column 0 of a chunk, as the walk reads it: val0 [vrows, C] int64, is_all [C] bool."""

    val0: np.ndarray
    is_all: np.ndarray
    col: np.ndarray  # [C] int64 0..C-1

    @cached_property
    def all_rows(self) -> bool:
        return bool(self.is_all.all())

    @cached_property
    def no_all(self) -> bool:
        return not self.is_all.any()


def _accept_chunk(
    shape: TreeShape,
    tokens: list[np.ndarray],
    chosen: list[np.ndarray],
    val0: np.ndarray,
    is_all: np.ndarray,
    col: np.ndarray,
) -> _Accepted:
    """Greedy acceptance, one depth at a time, every round of the chunk at once: at each depth the
    target's top-1 at the current node, then the child that holds it, if any."""
    s_count = shape.num_steps
    walk = _Walk.start(s_count, col.shape[0])
    targets = _Targets(val0, is_all, col)
    for d in range(s_count + 1):
        j = _mark_expanded(shape, chosen, walk, d)
        walk.wants[d] = _target_top1(shape, targets, walk, d, j)
        if d < s_count:
            _step_down(shape, tokens[d], walk, d, j, col)
    return _walk_end(walk, col)


def _mark_expanded(shape: TreeShape, chosen: list[np.ndarray], walk: _Walk, d: int) -> np.ndarray | None:
    """Record whether each round's depth-d node has children; return its expanded slot of step d
    ([C] int64; h when not expanded: a stale lane, clipped by the gathers), None where step d
    has a single slot or none (the slot is then 0)."""
    h = shape.heads[d] if d < shape.num_steps else 0
    if d == 0:  # the root: expanded at step 0
        walk.expanded_at[0] = True
        return None
    if h == 1:
        walk.expanded_at[d] = chosen[d][0] == walk.cur
        return None
    if h:
        eq = chosen[d] == walk.cur
        walk.expanded_at[d] = eq.any(axis=0)
        return first_true(eq)
    return None  # the last level: leaves (expanded_at stays False)


def _target_top1(shape: TreeShape, targets: _Targets, walk: _Walk, d: int, j: np.ndarray | None) -> np.ndarray:
    """[C] int64 the target's top-1 at each round's depth-d node: its validate row (all layout: the
    node's own; parents layout: its expanded slot's, none when it was not expanded: PAD_TOKEN)."""
    val0, col = targets.val0, targets.col
    if d == 0:  # the root: target row 0 in both layouts
        out: np.ndarray = val0[0]
        return out
    node_row = shape.starts[d] + walk.cur
    if targets.all_rows:
        return _gather(val0, node_row, col)
    par_row = shape.head_offsets[min(d, shape.num_steps - 1)] + (0 if j is None else j)
    row = par_row if targets.no_all else validate_row(targets.is_all, node_row, par_row)
    return np.where(targets.is_all | walk.expanded_at[d], _gather(val0, row, col), PAD_TOKEN)


def _children(m: _StepMaps, level: np.ndarray, j: np.ndarray | None, d: int, col: np.ndarray):
    """(first child [C] int64 or int, their tokens [w, C] int64, real [w, C] bool or None) of each
    round's depth-d node, read from level d+1's tokens (level: [L_{d+1}, C] int64); w is the widest
    expanded node's child count, ``real`` marks the node's own children where widths differ."""
    wmax = int(m.width.max())
    uniform = int(m.width.min()) == wmax
    if j is None:
        first = int(m.child_offset[0])
    elif uniform:
        first = j * wmax
    else:
        first = np.take(m.child_offset, j, mode="clip")
    if d == 0:
        kids = level  # the root's children: all of level 1
    else:
        slots = first + np.arange(wmax)[:, None] if wmax > 1 else first + np.zeros((1, 1), dtype=np.int64)
        kids = _gather(level, np.broadcast_to(slots, (wmax, col.shape[0])), col)
    if uniform:
        return first, kids, None
    assert j is not None  # widths differ only where a step has several slots
    return first, kids, np.arange(wmax)[:, None] < np.take(m.width, j, mode="clip")


def _step_down(shape: TreeShape, level: np.ndarray, walk: _Walk, d: int, j: np.ndarray | None, col: np.ndarray):
    """Move each walking round from its depth-d node to the child whose token is the target's top-1
    there (the first such child), or stop it. level: [L_{d+1}, C] int64 level d+1's tokens."""
    first, kids, real = _children(shape.maps[d], level, j, d, col)
    match = kids == walk.wants[d]
    if real is not None:
        match &= real
    if d:
        match &= walk.expanded_at[d]
    if kids.shape[0] > 1:
        rank = first_true(match)  # w when nothing matched: only stopped lanes
        moving = walk.alive & match.any(axis=0)
        token = _gather(kids, rank, col)
    else:
        rank = np.zeros(col.shape[0], dtype=np.int64)
        moving = walk.alive & match[0]
        token = kids[0]
    walk.advance(d, first + rank, rank, token, moving, shape.starts[d + 1])


def _walk_end(walk: _Walk, col: np.ndarray) -> _Accepted:
    """Where the walk stopped: the target's token there is the bonus (PAD when the dump has no row)."""
    at = walk.length * col.shape[0] + col
    bonus = np.take(walk.wants.reshape(-1), at)
    had_kids = np.take(walk.expanded_at.reshape(-1), at)
    known = (bonus != PAD_TOKEN).view(np.uint8)
    kids = had_kids.view(np.uint8)
    # Codes looked up by (had children, target row known) on 0/1 bytes (two nested wheres cost 4x more).
    case = (kids << np.uint8(1)) | known
    return _Accepted(walk.nodes, walk.tokens, walk.ranks, walk.length, bonus, _BONUS_BY_CASE[case], _STOP_BY_CASE[case])


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
    deeper: tuple = (),
) -> None:
    """Replay rounds [lo, hi) of ``batch`` (all of ``shape``) into ``res`` rows [lo, hi)."""
    c = hi - lo
    col = _columns(c)
    sl = slice(lo, hi)
    tree = _rebuild_chunk(batch, lo, hi, shape, static, col)
    val0, is_all, need, validate_checks = _validate_chunk(batch, lo, hi, shape, deeper)
    checks = Checks(tree.checks.conds + validate_checks.conds)  # the tree's faults come first
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
        err, res.error_at[:, sl] = checks.reasons(c)
        res.error[sl] = err
        ok = err == ERR_OK
        res.clear_outcomes(lo + np.flatnonzero(~ok))
    for i, differs, got, expect in mismatch:
        for k in np.flatnonzero(differs if ok is None else differs & ok):  # rare: parents disagree with scores
            notes.setdefault(lo + int(k), []).append(
                parents_mismatch_note(i, got[:, k].tolist(), expect[:, k].tolist())
            )
