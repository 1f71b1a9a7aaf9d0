"""Rebuild a round's draft tree from its draft_step matrices and the tree config.

Which level-i nodes the draft expanded at step i (row j of draft_step_i = the j-th selected):
1. explicit parents in the dump, when present (and, for a static tree with scores, checked
   against the path-probability selection);
2. otherwise path probability recomputed from the scores (highest first; ties: rank_ties
   (replay/core/selection.py));
3. otherwise the documented fallback: nodes ordered by (child rank, parent order) — all rank-0
   children first — which reproduces the article (A1, A2, then B11, B21). Reported loudly.
The rule itself lives in replay.core.selection; this reference orders levels by its test-side
form, replay.testing.selection_ref, so that the batch engine is checked against a sort.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from replay.core.config import TREE_DYNAMIC, TreeConfig
from replay.core.selection import (
    FALLBACK_WARNING,
    fallback_guesses,
    parents_mismatch_note,
    rank_major_keys,
    repeated_row_note,
    selection_method,
    selection_summary,
)
from replay.core.tree import Tree
from replay.core.vocab import (
    NO_PARENT,
    NO_RANK,
    PAD_TOKEN,
    SELECT_PARENTS,
    SELECT_PATH_PROB,
    SELECT_ROOT,
    first_not_token_id,
    not_token_ids,
)
from replay.engine.batch.rejections import (
    lost_companion_words,
    matrix_columns_words,
    matrix_rows_words,
    negative_words,
    no_valid_row_words,
    padding_words,
    parents_words,
    root_parent_words,
    too_many_steps_words,
)
from replay.io.formats.matrix_io import DumpMatrix
from replay.io.rounds import Round
from replay.testing.selection_ref import select_ref
from replay.util.errors import RoundError


def parents_are_valid(chosen: Sequence[int], level: Sequence[int]) -> bool:
    """Explicit parents must be distinct nodes of the level they expand."""
    members = set(level)
    return all(p in members for p in chosen) and len(set(chosen)) == len(chosen)


@dataclass(frozen=True, eq=False)
class Rebuilt:
    tree: Tree
    candidates: np.ndarray  # [num_expanded, cols] int64: each expanded node's recorded draft row, PAD-padded
    candidate_logp: np.ndarray | None  # [num_expanded, cols] float64 or None
    selection: tuple[str, ...]  # per draft step: SELECT_* used
    notes: tuple[str, ...]  # disagreements and fallbacks worth showing the user
    parents_differ: bool = False  # some step's dump parents differ from the path-probability selection

    @property
    def selection_summary(self) -> str:
        return selection_summary(self.selection[1:])


def _valid_rows(ids: np.ndarray) -> int:
    """Leading rows that are not entirely PAD_TOKEN."""
    pad = np.all(ids == PAD_TOKEN, axis=1)
    return int(np.argmax(pad)) if pad.any() else int(ids.shape[0])


def _step_shape(cfg: TreeConfig, i: int, mat: DumpMatrix, level_size: int, key, heads_given: int | None):
    """(heads, widths) to read from draft_step_i: the config's for static trees, the dump's for dynamic."""
    if cfg.tree_type != TREE_DYNAMIC:
        return cfg.top_head[i], list(cfg.top_k_spec[i])
    heads = heads_given if heads_given is not None else _valid_rows(mat.ids)
    heads = min(heads, level_size) if i else 1
    cfg_widths = list(cfg.top_k_spec[i]) if i < cfg.gamma else []
    widths = []
    for j in range(heads):
        w = cfg_widths[j] if j < len(cfg_widths) else (cfg_widths[-1] if cfg_widths else mat.cols)
        row = mat.ids[j]
        nonpad = int(np.argmax(row == PAD_TOKEN)) if (row == PAD_TOKEN).any() else mat.cols
        widths.append(max(1, min(w, nonpad)))
    return heads, widths


def _check_step(key, i: int, mat: DumpMatrix, heads: int, widths: list[int], cfg: TreeConfig) -> None:
    if not widths:  # dynamic tree: every row padding (or every parent negative)
        raise RoundError(key, no_valid_row_words(i), mat.path)
    if mat.rows < heads:
        raise RoundError(key, matrix_rows_words(i, mat.rows, heads), mat.path)
    if mat.cols < max(widths):
        raise RoundError(key, matrix_columns_words(i, mat.cols, widths), mat.path)
    for j, w in enumerate(widths):  # an expanded row: padding among its kept tokens, a negative id anywhere
        if np.any(mat.ids[j, :w] == PAD_TOKEN):
            raise RoundError(key, padding_words(i, j, w), mat.path)
        if np.any(not_token_ids(mat.ids[j])):
            raise RoundError(key, negative_words(f"draft_step_{i}", j, *first_not_token_id(mat.ids[j])), mat.path)


def _select_by_path_prob(level: list[int], logprobs: np.ndarray, heads: int) -> list[int]:
    return [level[j] for j in select_ref(logprobs[level].tolist(), heads)]


def _select_fallback(
    level: list[int], ranks: np.ndarray, parent_order: dict[int, int], parents: np.ndarray, heads: int
) -> list[int]:
    keys = rank_major_keys(ranks[level], [parent_order[int(parents[u])] for u in level])
    return [level[j] for j in select_ref(keys, heads)]


def _refuse_lost_companion(rnd: Round, level_sizes: list[int], guessed_at: int | None) -> None:
    """A draft step >= 1 with a level of two or more nodes and no parents in a round some draft step
    of which has parents; else a fallback guess at step ``guessed_at`` in a round with scores."""
    parented = [k for k, m in enumerate(rnd.steps) if m.parents is not None and (m.parents != PAD_TOKEN).any()]
    scored = [k for k, m in enumerate(rnd.steps) if m.logp is not None and not np.isnan(m.logp).all()]
    for i, size in enumerate(level_sizes):
        if parented and i >= 1 and size > 1 and i not in parented:
            words = lost_companion_words("parents", i, parented[0], i)
            raise _lost(RoundError(rnd.key, words, rnd.steps[i].path), "parents")
    if scored and guessed_at is not None:
        lost = next(k for k in range(len(rnd.steps)) if k not in scored)
        words = lost_companion_words("scores", lost, scored[0], guessed_at)
        raise _lost(RoundError(rnd.key, words, rnd.steps[lost].path), "scores")


def _repeated_row_notes(rnd: Round, heads: list[int]) -> list[str]:
    """Per draft step, its first row beyond its ``heads`` rows (topHead) that is no padding and repeats
    one of them, as a note (replay.core.selection.repeated_row_note)."""
    out = []
    for i, (mat, h) in enumerate(zip(rnd.steps, heads)):
        for row in range(h, mat.ids.shape[0]):
            same = [j for j in range(h) if (mat.ids[j] == mat.ids[row]).all()]
            if same and not (mat.ids[row] == PAD_TOKEN).all():
                out.append(repeated_row_note(i, row, same[0], h))
                break
    return out


def _lost(exc: RoundError, kind: str) -> RoundError:
    """``exc`` marked as a lost ``kind`` companion's (the replayer names a misspelt one in its entry)."""
    exc.lost_companion = kind  # type: ignore[attr-defined]
    return exc


def rebuild_tree(rnd: Round, cfg: TreeConfig) -> Rebuilt:
    """Nodes in tree order from the round's draft steps; raises RoundError on disagreement."""
    key = rnd.key
    if len(rnd.steps) > cfg.gamma:
        raise RoundError(key, too_many_steps_words(len(rnd.steps), cfg.gamma), rnd.steps[-1].path)
    tokens, parents, depths, ranks, logps = [rnd.root_token], [NO_PARENT], [0], [NO_RANK], [0.0]
    expanded: list[list[int]] = []
    selection: list[str] = []
    notes: list[str] = []
    parents_differ = False
    level = [0]
    level_sizes: list[int] = []  # of the level each draft step expands
    guessed_at: int | None = None  # the first step where the fallback chose among two or more nodes
    parent_order = {0: 0}  # node → its position among the previous step's expanded nodes
    cand_rows: list[np.ndarray] = []
    cand_logp: list[np.ndarray | None] = []
    for i, mat in enumerate(rnd.steps):
        heads_given = None
        if mat.parents is not None and cfg.tree_type == TREE_DYNAMIC:
            heads_given = int(np.count_nonzero(mat.parents[: _valid_rows(mat.ids)] >= 0))
        heads, widths = _step_shape(cfg, i, mat, len(level), key, heads_given)
        level_sizes.append(len(level))
        _check_step(key, i, mat, heads, widths, cfg)
        lp_arr = np.asarray(logps)
        have_scores = not np.isnan(lp_arr[level]).any()
        how = selection_method(i, mat.parents is not None, have_scores)
        if how == SELECT_ROOT:
            chosen = [0]
            if mat.parents is not None and int(mat.parents[0]) != 0:
                raise RoundError(key, root_parent_words(int(mat.parents[0])), mat.path)
        elif how == SELECT_PARENTS:
            chosen = [int(p) for p in mat.parents[:heads]]
            if not parents_are_valid(chosen, level):
                raise RoundError(key, parents_words(i, chosen, level[0], level[-1]), mat.path)
            if have_scores and cfg.tree_type != TREE_DYNAMIC:
                expect = _select_by_path_prob(level, lp_arr, heads)
                if expect != chosen:
                    notes.append(parents_mismatch_note(i, chosen, expect))
                    parents_differ = True
        elif how == SELECT_PATH_PROB:
            chosen = _select_by_path_prob(level, lp_arr, heads)
        else:
            chosen = _select_fallback(level, np.asarray(ranks), parent_order, np.asarray(parents), heads)
            if guessed_at is None and fallback_guesses(len(level)):
                guessed_at = i
        expanded.append(chosen)
        selection.append(how)
        new_level: list[int] = []
        for j, u in enumerate(chosen):
            cand_rows.append(mat.ids[j])
            cand_logp.append(None if mat.logp is None else mat.logp[j])
            for r in range(widths[j]):
                tokens.append(int(mat.ids[j, r]))
                parents.append(u)
                depths.append(i + 1)
                ranks.append(r)
                logps.append(logps[u] + float(mat.logp[j, r]) if mat.logp is not None else float("nan"))
                new_level.append(len(tokens) - 1)
        parent_order = {u: j for j, u in enumerate(chosen)}
        level = new_level
    _refuse_lost_companion(rnd, level_sizes, guessed_at)
    if cfg.tree_type != TREE_DYNAMIC:
        notes += _repeated_row_notes(rnd, [len(e) for e in expanded])
    if guessed_at is not None:
        notes.append(FALLBACK_WARNING)
    tree = Tree(
        np.asarray(tokens, dtype=np.int64),
        np.asarray(parents, dtype=np.int64),
        np.asarray(depths, dtype=np.int64),
        np.asarray(ranks, dtype=np.int64),
        np.asarray(logps, dtype=np.float64),
        tuple(np.asarray(e, dtype=np.int64) for e in expanded),
    )
    candidates = _stack(cand_rows, PAD_TOKEN, np.int64)
    return Rebuilt(tree, candidates, _stack_opt(cand_logp), tuple(selection), tuple(notes), parents_differ)


def _stack(rows: list[np.ndarray], fill, dtype) -> np.ndarray:
    width = max((r.shape[0] for r in rows), default=0)
    out = np.full((len(rows), width), fill, dtype=dtype)
    for k, r in enumerate(rows):
        out[k, : r.shape[0]] = r
    return out


def _stack_opt(rows: list[np.ndarray | None]) -> np.ndarray | None:
    if not rows or any(r is None for r in rows):
        return None
    return _stack(rows, -np.inf, np.float64)  # type: ignore[arg-type]
