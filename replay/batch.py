"""Batch replay: many rounds of one tree shape at once, as numpy array operations.

``replay.replayer.replay_round`` stays the readable reference; this module must give the same
per-round results, the same skip decisions included (tests/test_batch_property.py compares the two
on random dumps, tests/test_batch_samples.py on the bundled samples).

Python loops here run over draft steps (depth) and over the few expanded slots of one fixed shape
(constants of the tree config), never over rounds. Rounds are processed in chunks of 16,384 so
that every temporary stays in cache, on a small thread pool (numpy releases the GIL).

Every array has the round axis last: a matrix of R rounds is ``[rows, cols, R]``, a tree level of
a chunk of C rounds is ``[slots, C]``. numpy then works on contiguous vectors over rounds and
reduces the short slot axis with contiguous inner loops, about ten times faster than reducing the
short last axis of a ``[C, slots]`` array (measured on the 2-core development machine: 3.7 vs 34
ns per round for a max over 6 slots).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from .config import TREE_DYNAMIC, TreeConfig
from .matrix_io import DumpMatrix
from .parallel import default_workers, ordered_map  # noqa: F401  (default_workers re-exported)
from .records import shape_text
from .rounds import Round
from .selection import (
    FALLBACK_WARNING,
    first_true,
    invalid_parents_columns,
    parents_mismatch_note,
    rank_major_keys,
    select_top,
    selection_method,
    top_k_columns,
)
from .vocab import (
    BONUS_CORRECTION,
    BONUS_LEAF,
    PAD_TOKEN,
    SELECT_FALLBACK,
    SELECT_PARENTS,
    SELECT_PATH_PROB,
    SELECT_ROOT,
    STOP_LEAF,
    STOP_MISMATCH,
    STOP_NO_ROW,
)
from .roundbatch import LAYOUT_NAMES, MatrixStack, RoundBatch, SourceNames, batch_from_rounds, signature_of  # noqa: F401  (re-exported)

DEFAULT_CHUNK_ROUNDS = 16384  # ~2 MB of temporaries per array for the article config: cache-sized

# Per-step selection codes (BatchResult.selection); -1 = no such step.
SEL_NONE, SEL_ROOT, SEL_PARENTS, SEL_PATH, SEL_FALLBACK = -1, 0, 1, 2, 3
SELECTION_NAMES = {SEL_ROOT: SELECT_ROOT, SEL_PARENTS: SELECT_PARENTS, SEL_PATH: SELECT_PATH_PROB, SEL_FALLBACK: SELECT_FALLBACK}

STOP_CODES = (STOP_LEAF, STOP_MISMATCH, STOP_NO_ROW)  # stop codes 0, 1, 2
BONUS_NONE, BONUS_CODE_CORRECTION, BONUS_CODE_LEAF = 0, 1, 2
BONUS_NAMES = {BONUS_NONE: None, BONUS_CODE_CORRECTION: BONUS_CORRECTION, BONUS_CODE_LEAF: BONUS_LEAF}

# Why a round was rejected (the first failing check, in the reference's order). The exact message
# is the reference's own, obtained by replaying just the rejected rounds (replay.runs).
ERR_OK = 0
ERR_TOO_MANY_STEPS = 1
ERR_MATRIX_SHAPE = 2  # fewer rows/columns than the shape needs
ERR_TOKENS = 3  # padding or negative ids inside the kept columns
ERR_PARENTS = 4  # explicit parents outside the level or repeated
ERR_VALIDATE_ROWS = 5  # validate row count fits neither layout
ERR_VALIDATE_COL0 = 6  # a used validate row has no token in column 0
ERR_NO_ROWS = 7  # dynamic tree: a draft step with no valid row
ERROR_NAMES = {
    ERR_OK: "ok",
    ERR_TOO_MANY_STEPS: "more draft steps than gamma",
    ERR_MATRIX_SHAPE: "draft matrix smaller than the shape",
    ERR_TOKENS: "padding or negative id in kept columns",
    ERR_PARENTS: "bad explicit parents",
    ERR_VALIDATE_ROWS: "validate rows fit no layout",
    ERR_VALIDATE_COL0: "validate row without a column-0 token",
    ERR_NO_ROWS: "draft step without valid rows",
}


# --------------------------------------------------------------------------------------------
# Tree shapes


@dataclass(frozen=True)
class TreeShape:
    """One round shape: heads and widths per draft step actually run (early stop = fewer steps)."""

    heads: tuple[int, ...]
    widths: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        if len(self.heads) != len(self.widths) or not self.heads or self.heads[0] != 1:
            raise ValueError(f"bad shape heads={self.heads} widths={self.widths}")
        for h, w in zip(self.heads, self.widths):
            if len(w) != h or min(w) < 1:
                raise ValueError(f"bad shape heads={self.heads} widths={self.widths}")

    @property
    def num_steps(self) -> int:
        return len(self.heads)

    @cached_property
    def level_sizes(self) -> tuple[int, ...]:
        """Nodes per level 0..S (level 0 = the root)."""
        return (1,) + tuple(sum(w) for w in self.widths)

    @cached_property
    def starts(self) -> tuple[int, ...]:
        """Tree-order id of each level's first node."""
        return tuple(int(v) for v in np.concatenate([[0], np.cumsum(self.level_sizes)[:-1]]))

    @property
    def num_nodes(self) -> int:
        """Draft nodes, root excluded."""
        return sum(self.level_sizes) - 1

    @property
    def num_expanded(self) -> int:
        return sum(self.heads)

    @cached_property
    def head_offsets(self) -> tuple[int, ...]:
        """Row of step i's first expanded node in a parents-layout validate."""
        return tuple(int(v) for v in np.concatenate([[0], np.cumsum(self.heads)[:-1]]))

    @cached_property
    def maps(self) -> tuple["_StepMaps", ...]:
        return tuple(_StepMaps.build(self, i) for i in range(self.num_steps))

    def to_json(self) -> dict:
        return {"topHead": list(self.heads), "topKSpec": [list(w) for w in self.widths]}


@dataclass(frozen=True, eq=False)
class _StepMaps:
    """Index maps of draft step i, the same for every round of a shape."""

    slot_parent: np.ndarray  # [L_{i+1}] int64: which expanded position j each new slot hangs under
    slot_rank: np.ndarray  # [L_{i+1}] int64: the slot's draft rank r
    child_offset: np.ndarray  # [h_i] int64: level-local index of the j-th expanded node's first child
    width: np.ndarray  # [h_i] int64
    fallback: np.ndarray  # [h_i] int64 level-local nodes chosen by the rank-major fallback

    @classmethod
    def build(cls, shape: TreeShape, i: int) -> "_StepMaps":
        w = np.asarray(shape.widths[i], dtype=np.int64)
        rs, js = _rank_and_parent(w)
        offs = np.concatenate([[0], np.cumsum(w)[:-1]]).astype(np.int64)
        if i == 0:
            fallback = np.zeros(1, dtype=np.int64)
        else:
            # The same for every round of the shape: the scalar rule, once per shape.
            ranks, parent_pos = _rank_and_parent(shape.widths[i - 1])
            fallback = np.asarray(select_top(rank_major_keys(ranks, parent_pos), shape.heads[i]))
        return cls(js, rs, offs, w, fallback.astype(np.int64))


def _rank_and_parent(widths: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """([L] draft rank, [L] expanded position j) of the L slots that widths create."""
    w = np.asarray(widths, dtype=np.int64)
    js = np.repeat(np.arange(w.shape[0]), w)
    offs = np.concatenate([[0], np.cumsum(w)[:-1]])
    return np.arange(js.shape[0]) - offs[js], js


def static_shape(cfg: TreeConfig, steps: int) -> TreeShape:
    return TreeShape(tuple(cfg.top_head[:steps]), tuple(tuple(w) for w in cfg.top_k_spec[:steps]))


# --------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True, eq=False)
class BatchResult:
    """Per-round replay outcomes as arrays (R rounds, G = the config's gamma), round axis last.

    Rejected rounds (``error != 0``) hold PAD_TOKEN/0 in every outcome field.
    """

    keys: np.ndarray  # [2, R] int64
    root_tokens: np.ndarray  # [R] int64
    error: np.ndarray  # [R] int8 ERR_* code, 0 = replayed
    shape_index: np.ndarray  # [R] int16 into ``shapes``; -1 when no shape could be derived
    shapes: tuple[TreeShape, ...]
    layout: np.ndarray  # [R] int8: 0 parents, 1 all
    layout_stated: np.ndarray  # [R] bool
    validate_extra_rows: np.ndarray  # [R] int32 rows beyond the layout (ignored as padding)
    selection: np.ndarray  # [G, R] int8 SEL_* per draft step
    accepted_nodes: np.ndarray  # [G, R] int32 tree-order ids, PAD_TOKEN after the path
    accepted_tokens: np.ndarray  # [G, R] int64, PAD_TOKEN after the path
    accepted_ranks: np.ndarray  # [G, R] int8 draft rank of each accepted node, PAD_TOKEN after
    accepted_length: np.ndarray  # [R] int8
    bonus_token: np.ndarray  # [R] int64, PAD_TOKEN when the dump has no target row for it
    bonus_kind: np.ndarray  # [R] int8 BONUS_NONE / BONUS_CODE_CORRECTION / BONUS_CODE_LEAF
    stop: np.ndarray  # [R] int8 index into STOP_CODES
    ordinals: np.ndarray | None = None  # [R] int64 position in the run, when known
    selection_notes: Mapping[int, tuple[str, ...]] = field(default_factory=dict)  # round → parents-vs-score notes

    def __post_init__(self) -> None:
        r = self.keys.shape[-1]
        for name in _ROUND_ARRAYS:
            arr = getattr(self, name)
            if arr.shape[-1] != r:
                raise ValueError(f"{name}: {arr.shape[-1]} rounds in the last axis, keys have {r}")
        depths = {getattr(self, n).shape[0] for n in ("selection", "accepted_nodes", "accepted_tokens", "accepted_ranks")}
        if len(depths) != 1:
            raise ValueError(f"per-depth arrays disagree on gamma: {sorted(depths)}")

    def __len__(self) -> int:
        return int(self.keys.shape[1])

    @property
    def gamma(self) -> int:
        return int(self.selection.shape[0])

    @property
    def ok(self) -> np.ndarray:
        """[R] bool: rounds the reference replays too (the others it skips)."""
        return self.error == ERR_OK

    @property
    def num_committed(self) -> np.ndarray:
        """[R] int8 accepted tokens plus the bonus token when known."""
        return (self.accepted_length + (self.bonus_token != PAD_TOKEN)).astype(np.int8)

    def _shape_table(self, attr: Callable[[TreeShape], int]) -> np.ndarray:
        table = np.asarray([attr(s) for s in self.shapes] + [0], dtype=np.int64)
        return table[self.shape_index]  # -1 picks the trailing 0

    @property
    def num_steps(self) -> np.ndarray:
        """[R] int64 draft steps of each round (0 when rejected before a shape was known)."""
        return self._shape_table(lambda s: s.num_steps)

    @property
    def num_nodes(self) -> np.ndarray:
        return self._shape_table(lambda s: s.num_nodes)

    def selection_summary(self, i: int) -> str:
        """As Rebuilt.selection_summary: the methods of steps 1.. in first-use order."""
        used = [SELECTION_NAMES[int(c)] for c in self.selection[1:, i] if c != SEL_NONE]
        return "+".join(dict.fromkeys(used)) if used else SELECT_ROOT

    def notes(self, i: int) -> list[str]:
        out = list(self.selection_notes.get(i, ()))
        if SEL_FALLBACK in self.selection[:, i]:
            out.append(FALLBACK_WARNING)
        extra = int(self.validate_extra_rows[i])
        if extra > 0:
            out.append(f"validate: {extra} row(s) beyond the {LAYOUT_NAMES[self.layout[i]]} layout ignored as padding")
        return out

    def round_json(self, i: int) -> dict:
        """Round i as a replay.records.RoundRecord dict, exactly as RoundResult.to_json() (the round must be ok)."""
        if self.error[i] != ERR_OK:
            raise ValueError(f"round {self.keys[:, i].tolist()} was rejected ({ERROR_NAMES[int(self.error[i])]})")
        shape = self.shapes[int(self.shape_index[i])]
        n = int(self.accepted_length[i])
        tokens = [int(t) for t in self.accepted_tokens[:n, i]]
        bonus = int(self.bonus_token[i])
        bonus_v = None if bonus == PAD_TOKEN else bonus
        root = int(self.root_tokens[i])
        key_a, key_b = int(self.keys[0, i]), int(self.keys[1, i])
        return {
            "round": f"{key_a}_{key_b}",
            "key_a": key_a,
            "key_b": key_b,
            "root_token": None if root == PAD_TOKEN else root,
            "num_steps": shape.num_steps,
            "num_nodes": shape.num_nodes,
            "shape": shape_text(shape.widths),
            "layout": LAYOUT_NAMES[self.layout[i]],
            "layout_source": "stated" if self.layout_stated[i] else "detected",
            "selection": self.selection_summary(i),
            "accepted_length": n,
            "accepted_tokens": tokens,
            "accepted_nodes": [int(u) for u in self.accepted_nodes[:n, i]],
            "bonus_token": bonus_v,
            "bonus_kind": BONUS_NAMES[int(self.bonus_kind[i])],
            "stop": STOP_CODES[int(self.stop[i])],
            "committed_tokens": tokens + ([] if bonus_v is None else [bonus_v]),
            "num_committed": n + (bonus_v is not None),
            "notes": self.notes(i),
        }

    def iter_json(self) -> Iterable[dict]:
        for i in np.flatnonzero(self.ok):
            yield self.round_json(int(i))

    def take(self, index: np.ndarray) -> "BatchResult":
        """Rounds ``index`` (an int array), notes renumbered."""
        index = np.asarray(index, dtype=np.int64)
        pos = {int(old): new for new, old in enumerate(index)}
        notes = {pos[k]: v for k, v in self.selection_notes.items() if k in pos}
        return BatchResult(
            **{name: getattr(self, name)[..., index] for name in _ROUND_ARRAYS},
            shapes=self.shapes,
            ordinals=None if self.ordinals is None else self.ordinals[index],
            selection_notes=notes,
        )

    def sorted_by_ordinal(self) -> "BatchResult":
        if self.ordinals is None:
            return self
        return self.take(np.argsort(self.ordinals, kind="stable"))

    @staticmethod
    def concat(parts: Sequence["BatchResult"]) -> "BatchResult":
        """One result from several (shapes are merged; ordinals kept when every part has them)."""
        if not parts:
            raise ValueError("nothing to concatenate")
        gammas = {p.gamma for p in parts}
        if len(gammas) != 1:
            raise ValueError(f"results of different gamma {sorted(gammas)}")
        shapes: list[TreeShape] = []
        where: dict[TreeShape, int] = {}
        arrays: dict[str, list[np.ndarray]] = {name: [] for name in _ROUND_ARRAYS}
        notes: dict[int, tuple[str, ...]] = {}
        base = 0
        for p in parts:
            remap = np.empty(len(p.shapes) + 1, dtype=np.int16)
            remap[-1] = -1
            for k, s in enumerate(p.shapes):
                if s not in where:
                    where[s] = len(shapes)
                    shapes.append(s)
                remap[k] = where[s]
            for name in _ROUND_ARRAYS:
                arr = getattr(p, name)
                arrays[name].append(remap[arr] if name == "shape_index" else arr)
            notes.update({base + k: v for k, v in p.selection_notes.items()})
            base += len(p)
        ords = None if any(p.ordinals is None for p in parts) else np.concatenate([p.ordinals for p in parts])
        return BatchResult(
            **{name: np.concatenate(v, axis=-1) for name, v in arrays.items()},
            shapes=tuple(shapes),
            ordinals=ords,
            selection_notes=notes,
        )

    def to_frame(self, rank_columns: int | None = None):
        """One row per round (pandas): the columns analysis and Dask summaries work on.

        rank_columns: how many ``accepted_rank_d`` columns (default gamma; more are PAD_TOKEN), so
        that runs of different depths give frames of one schema.
        """
        import pandas as pd

        data = {
            "key_a": self.keys[0],
            "key_b": self.keys[1],
            "ok": self.ok,
            "error": pd.Categorical.from_codes(self.error.astype(np.int64), [ERROR_NAMES[k] for k in range(len(ERROR_NAMES))]),
            "root_token": self.root_tokens,
            "num_steps": self.num_steps,
            "num_nodes": self.num_nodes,
            "layout": pd.Categorical.from_codes(self.layout.astype(np.int64), list(LAYOUT_NAMES)),
            "accepted_length": self.accepted_length,
            "num_committed": self.num_committed,
            "bonus_token": self.bonus_token,
            "bonus_kind": pd.Categorical.from_codes(self.bonus_kind.astype(np.int64), ["none", BONUS_CORRECTION, BONUS_LEAF]),
            "stop": pd.Categorical.from_codes(self.stop.astype(np.int64), list(STOP_CODES)),
        }
        for d in range(self.gamma if rank_columns is None else rank_columns):
            data[f"accepted_rank_{d + 1}"] = self.accepted_ranks[d] if d < self.gamma else np.full(len(self), PAD_TOKEN, dtype=np.int8)
        return pd.DataFrame(data)


_ROUND_ARRAYS = (
    "keys",
    "root_tokens",
    "error",
    "shape_index",
    "layout",
    "layout_stated",
    "validate_extra_rows",
    "selection",
    "accepted_nodes",
    "accepted_tokens",
    "accepted_ranks",
    "accepted_length",
    "bonus_token",
    "bonus_kind",
    "stop",
)


def empty_result(gamma: int) -> BatchResult:
    """A result of zero rounds (a run whose rounds were all unreadable)."""
    z = np.zeros((2, 0), dtype=np.int64)
    empty = RoundBatch(z, z[0].copy(), (MatrixStack(np.zeros((1, 1, 0), dtype=np.int64)),), MatrixStack(np.zeros((1, 1, 0), dtype=np.int64)))
    return _empty_result(empty, gamma)


def _empty_result(batch: RoundBatch, gamma: int) -> BatchResult:
    r = len(batch)
    return BatchResult(
        keys=np.asarray(batch.keys, dtype=np.int64),
        root_tokens=np.asarray(batch.root_tokens, dtype=np.int64),
        error=np.zeros(r, dtype=np.int8),
        shape_index=np.full(r, -1, dtype=np.int16),
        shapes=(),
        layout=np.zeros(r, dtype=np.int8),
        layout_stated=np.full(r, batch.layout is not None),
        validate_extra_rows=np.zeros(r, dtype=np.int32),
        selection=np.full((gamma, r), SEL_NONE, dtype=np.int8),
        accepted_nodes=np.full((gamma, r), PAD_TOKEN, dtype=np.int32),
        accepted_tokens=np.full((gamma, r), PAD_TOKEN, dtype=np.int64),
        accepted_ranks=np.full((gamma, r), PAD_TOKEN, dtype=np.int8),
        accepted_length=np.zeros(r, dtype=np.int8),
        bonus_token=np.full(r, PAD_TOKEN, dtype=np.int64),
        bonus_kind=np.zeros(r, dtype=np.int8),
        stop=np.zeros(r, dtype=np.int8),
        ordinals=None if batch.ordinals is None else np.asarray(batch.ordinals, dtype=np.int64),
    )


# --------------------------------------------------------------------------------------------
# The kernel


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


def _rebuild_chunk(batch: RoundBatch, lo: int, hi: int, shape: TreeShape, static: bool, checks: _Checks, col: np.ndarray):
    """Tree of every round in [lo, hi): (level tokens, expanded nodes, selection codes, notes to check)."""
    c = hi - lo
    lp: np.ndarray | None = np.zeros((1, c))  # [L_i, C] path log-probs of level i; None once unknown
    tokens: list[np.ndarray] = []  # level i+1 tokens [L_{i+1}, C]
    chosen: list[np.ndarray] = []  # step i's expanded nodes [h_i, C], level-local
    selection = np.empty((shape.num_steps, c), dtype=np.int8)
    mismatch = []  # (step, differs [C], dump's parents [h, C], path-probability choice [h, C])
    for i, st in enumerate(batch.steps):
        m = shape.maps[i]
        h, level = shape.heads[i], shape.level_sizes[i]
        kept = st.ids[m.slot_parent, m.slot_rank, lo:hi]  # [L_{i+1}, C] the tree's cells, copied
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
    return tokens, chosen, selection, mismatch


def _validate_chunk(batch: RoundBatch, lo: int, hi: int, shape: TreeShape, checks: _Checks):
    """(column 0 [vrows, C], layout is "all" [C] bool, rows the layout uses [C]) as resolve_layout."""
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
    if batch.layout is not None:
        need_v = n_par if batch.layout == "parents" else n_all
        checks.add(rows_used < need_v, ERR_VALIDATE_ROWS)
        is_all = np.full(c, batch.layout == "all")
        need = np.full(c, need_v)
    else:
        is_par = rows_used == n_par
        is_all = ~is_par & (rows_used >= n_all)
        checks.add(~(is_par | is_all), ERR_VALIDATE_ROWS)
        need = np.where(is_par, n_par, n_all)
    if (need == need[0]).all():
        checks.add(val0[: int(need[0])].min(axis=0) < 0, ERR_VALIDATE_COL0)
    else:
        checks.add(((val0 < 0) & (row_no < need)).any(axis=0), ERR_VALIDATE_COL0)
    return val0, is_all, need


def _accept_chunk(shape: TreeShape, tokens, chosen, val0: np.ndarray, is_all: np.ndarray, col: np.ndarray, res: BatchResult, sl: slice) -> None:
    """Greedy acceptance, one depth at a time, every round of the chunk at once; writes ``res[sl]``.

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
        res.accepted_nodes[d, sl] = np.where(moving, new_cur + shape.starts[d + 1], PAD_TOKEN)
        res.accepted_tokens[d, sl] = np.where(moving, tok, PAD_TOKEN)
        res.accepted_ranks[d, sl] = np.where(moving, r, PAD_TOKEN)
        length += moving
        cur = new_cur
        alive = moving
    # Where the walk stopped: the target's token there is the bonus (PAD when the dump has no row).
    at = length * c + col
    bonus = np.take(wants.reshape(-1), at)
    had_kids = np.take(expanded_at.reshape(-1), at)
    known = (bonus != PAD_TOKEN).view(np.uint8)
    kids = had_kids.view(np.uint8)
    res.accepted_length[sl] = length
    res.bonus_token[sl] = bonus
    # Codes by arithmetic on 0/1 bytes (two nested wheres cost 4x more):
    # bonus kind: none 0 / correction 1 (had children) / leaf bonus 2; stop: leaf 0 / mismatch 1 / no row 2
    res.bonus_kind[sl] = known * (np.uint8(2) - kids)
    res.stop[sl] = kids * (np.uint8(2) - known)


def _replay_chunk(batch: RoundBatch, lo: int, hi: int, shape: TreeShape, static: bool, res: BatchResult, notes: dict) -> None:
    """Replay rounds [lo, hi) of ``batch`` (all of ``shape``) into ``res`` rows [lo, hi)."""
    c = hi - lo
    col = _columns(c)
    sl = slice(lo, hi)
    checks = _Checks()
    tokens, chosen, selection, mismatch = _rebuild_chunk(batch, lo, hi, shape, static, checks, col)
    val0, is_all, need = _validate_chunk(batch, lo, hi, shape, checks)
    _accept_chunk(shape, tokens, chosen, val0, is_all, col, res, sl)
    res.layout[sl] = is_all
    res.validate_extra_rows[sl] = batch.validate.rows - need
    res.selection[: shape.num_steps, sl] = selection
    ok = None
    if checks.conds:  # rejected rounds get the defaults (PAD_TOKEN / 0) in every outcome
        err = checks.codes(c)
        res.error[sl] = err
        ok = err == ERR_OK
        bad = lo + np.flatnonzero(~ok)
        for name, fill in _OUTCOME_DEFAULTS:
            getattr(res, name)[..., bad] = fill
    for i, differs, got, expect in mismatch:
        for k in np.flatnonzero(differs if ok is None else differs & ok):  # rare: parents disagree with scores
            notes.setdefault(lo + int(k), []).append(parents_mismatch_note(i, got[:, k].tolist(), expect[:, k].tolist()))


_OUTCOME_DEFAULTS = (
    ("layout", 0),
    ("validate_extra_rows", 0),
    ("selection", SEL_NONE),
    ("accepted_nodes", PAD_TOKEN),
    ("accepted_tokens", PAD_TOKEN),
    ("accepted_ranks", PAD_TOKEN),
    ("accepted_length", 0),
    ("bonus_token", PAD_TOKEN),
    ("bonus_kind", BONUS_NONE),
    ("stop", 0),
)


def _chunks(n: int, size: int) -> list[tuple[int, int]]:
    return [(lo, min(n, lo + size)) for lo in range(0, n, size)]


def _run_chunks(n: int, chunk: int, workers: int, fn: Callable[[int, int], None]) -> None:
    spans = _chunks(n, chunk)
    for _ in ordered_map(lambda span: fn(*span), spans, min(workers, len(spans))):
        pass


def _replay_fixed(batch: RoundBatch, shape: TreeShape, static: bool, gamma: int, workers: int, chunk: int) -> BatchResult:
    """Every round of ``batch`` has ``shape``; structural mismatches reject the whole batch."""
    res = replace(_empty_result(batch, gamma), shapes=(shape,))
    res.shape_index[:] = 0
    for st, h, w in zip(batch.steps, shape.heads, shape.widths):
        if st.rows < h or st.cols < max(w):
            res.error[:] = ERR_MATRIX_SHAPE  # every round of the batch has these matrix sizes
            return res
    notes: dict[int, list[str]] = {}
    _run_chunks(len(batch), chunk, workers, lambda lo, hi: _replay_chunk(batch, lo, hi, shape, static, res, notes))
    return replace(res, selection_notes={k: tuple(v) for k, v in notes.items()})


def dynamic_shapes(batch: RoundBatch, cfg: TreeConfig) -> tuple[np.ndarray, list[TreeShape], np.ndarray]:
    """Each round's own shape when the tree is dynamic (as rebuild._step_shape reads it).

    Returns (shape index [R] int64, -1 when rejected; shapes; error [R] int8).
    """
    r = len(batch)
    level = np.ones(r, dtype=np.int64)
    err = np.zeros(r, dtype=np.int8)
    parts = []
    for i, st in enumerate(batch.steps):
        pad = np.moveaxis(np.asarray(st.ids), -1, 0) == PAD_TOKEN  # [R, rows, cols]
        row_pad = pad.all(axis=2)
        valid_rows = np.where(row_pad.any(axis=1), row_pad.argmax(axis=1), st.rows)
        if st.parents is not None:
            in_valid = np.arange(st.rows)[None, :] < valid_rows[:, None]
            heads = ((np.asarray(st.parents)[: st.rows].T >= 0) & in_valid).sum(axis=1)
        else:
            heads = valid_rows
        heads = np.ones(r, dtype=np.int64) if i == 0 else np.minimum(heads, level)
        if i:
            err[(err == ERR_OK) & (heads == 0)] = ERR_NO_ROWS
        cfg_w = list(cfg.top_k_spec[i])
        want = np.asarray([cfg_w[j] if j < len(cfg_w) else cfg_w[-1] for j in range(st.rows)], dtype=np.int64)
        first_pad = np.where(pad.any(axis=2), pad.argmax(axis=2), st.cols)  # [R, rows]
        widths = np.maximum(1, np.minimum(want[None, :], first_pad))
        widths = np.where(np.arange(st.rows)[None, :] < heads[:, None], widths, 0)
        level = widths.sum(axis=1)
        parts += [heads[:, None], widths]
    code = np.concatenate(parts, axis=1)
    uniq, inverse = np.unique(code, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    shapes, index_of = [], np.full(uniq.shape[0], -1, dtype=np.int64)
    for u, row in enumerate(uniq):  # one iteration per distinct shape, not per round
        heads, widths, pos = [], [], 0
        for st in batch.steps:
            h = int(row[pos])
            heads.append(h)
            widths.append(tuple(int(x) for x in row[pos + 1 : pos + 1 + h]))
            pos += 1 + st.rows
        if min(heads) >= 1:
            index_of[u] = len(shapes)
            shapes.append(TreeShape(tuple(heads), tuple(widths)))
    return index_of[inverse], shapes, err


def replay_batch(
    batch: RoundBatch,
    cfg: TreeConfig,
    workers: int | None = None,
    chunk_rounds: int = DEFAULT_CHUNK_ROUNDS,
) -> BatchResult:
    """Replay every round of ``batch`` with the tree config ``cfg``; same outcomes as replay_round.

    Rounds the reference would reject come back with ``error != 0`` (their message: replay.runs).
    """
    workers = default_workers() if workers is None else workers
    gamma = cfg.gamma
    if batch.num_steps > gamma:
        res = _empty_result(batch, gamma)
        res.error[:] = ERR_TOO_MANY_STEPS
        return res
    if cfg.tree_type != TREE_DYNAMIC:
        return _replay_fixed(batch, static_shape(cfg, batch.num_steps), True, gamma, workers, chunk_rounds)
    index, shapes, err = dynamic_shapes(batch, cfg)
    res = _empty_result(batch, gamma)
    res.error[:] = err
    parts = []
    for k, shape in enumerate(shapes):
        members = np.flatnonzero((index == k) & (err == ERR_OK))
        if members.shape[0]:
            part = _replay_fixed(batch.take(members), shape, False, gamma, workers, chunk_rounds)
            parts.append((members, part, k))
    out = replace(res, shapes=tuple(shapes))
    notes = {}
    for members, part, k in parts:
        for name in _ROUND_ARRAYS:
            if name not in ("keys", "root_tokens", "layout_stated"):
                getattr(out, name)[..., members] = getattr(part, name)
        out.shape_index[members] = np.where(part.shape_index >= 0, k, -1)
        notes.update({int(members[i]): v for i, v in part.selection_notes.items()})
    return replace(out, selection_notes=notes)


def expanded_nodes(batch: RoundBatch, shape: TreeShape, static: bool, chunk_rounds: int = DEFAULT_CHUNK_ROUNDS) -> list[np.ndarray]:
    """The selection replay_batch makes for rounds of ``shape``: per draft step i, [h_i, R] int64
    level-local index of the node expanded in each slot, in selection order (analysis needs the
    recorded trees, not only the accepted paths). Rounds replay_batch rejects hold meaningless values.
    """
    out = [np.empty((h, len(batch)), dtype=np.int64) for h in shape.heads]
    for lo, hi in _chunks(len(batch), chunk_rounds):
        _, chosen, _, _ = _rebuild_chunk(batch, lo, hi, shape, static, _Checks(), _columns(hi - lo))
        for i, ch in enumerate(chosen):
            out[i][:, lo:hi] = ch
    return out


def replay_batches(batches: Iterable[RoundBatch], cfg: TreeConfig, workers: int | None = None, chunk_rounds: int = DEFAULT_CHUNK_ROUNDS) -> BatchResult:
    """Several batches (one run's groups) → one result in run order when ordinals are known."""
    parts = [replay_batch(b, cfg, workers, chunk_rounds) for b in batches]
    if not parts:
        raise ValueError("no rounds to replay")
    return BatchResult.concat(parts).sorted_by_ordinal()
