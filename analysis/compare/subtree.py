"""The words of the exact sub-tree replay of another config, and which configs it can replay.

Another config's tree is rebuilt on each recorded round with the recording's selection rule and
walked without guessing (docs/analysis.md, "Offline comparison"): on the batch arrays by
analysis.compare.subtree_batch (greedy) and analysis.compare.sampling_subtrees (at T). What
both walks share lives here: a node's selection status (IN / OUT / MAYBE), the selection rules'
names, the smallest named score of a recorded row (the bound on the path key of a candidate the
row does not name: replay.core.level_loops.child_level_loop), the stop word of an undecidable round and why it is undecidable (codes and words), and the
containment rule (is_contained, beyond_recorded), with the configs it admits (contained_configs,
fit_levels, truncated).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from enum import IntEnum

import numpy as np

from replay.core.config import TreeConfig
from replay.core.vocab import PAD_TOKEN, SELECT_FALLBACK, SELECT_PATH_PROB, SELECT_RECORDED_ORDER, score_known
from replay.util.rows import unique_rows

RULE_PATH = SELECT_PATH_PROB
RULE_RECORDED_ORDER = SELECT_RECORDED_ORDER
RULE_FALLBACK = SELECT_FALLBACK

UNDECIDABLE = "undecidable"


def smallest_named_score(ids: np.ndarray, logp: np.ndarray, axis: int = -1) -> np.ndarray:
    """The smallest recorded log-probability among the named cells (token known, score known) of
    draft rows along ``axis``, NaN for a row that has none.

    A draft row names the draft's most probable candidates, so a candidate it does not name (past
    its columns, or a padding cell) is no more probable than any it names, in whatever order the row
    holds them: its log-probability is at most this value."""
    named = (ids != PAD_TOKEN) & score_known(logp)
    smallest = np.min(np.where(named, logp, np.inf), axis=axis)
    return np.where(named.any(axis=axis), smallest, np.nan)


class NodeStatus(IntEnum):
    """Whether the sub-config's step expands a node: surely (IN), surely not (OUT), or it depends on
    unrecorded scores (MAYBE). Ints, so that analysis.compare.subtree_batch keeps them in int8 arrays."""

    OUT = 0
    IN = 1
    MAYBE = 2


IN, OUT, MAYBE = NodeStatus.IN, NodeStatus.OUT, NodeStatus.MAYBE

# Why a round is undecidable, as codes (analysis.compare.subtree_batch keeps them in arrays) and as text.
WHY_NONE, WHY_THRESHOLD, WHY_MAYBE, WHY_UNEXPANDED, WHY_BEYOND, WHY_WIDTH = 0, 1, 2, 3, 4, 5
NOT_OPENED = -1  # how a walk leaves a leaf (OUT, or past the draft steps run): it ends there, no doubt
# the codes the compiled level loops read (replay.core.level_loops._expansion: how a walk leaves a
# node, one rule for the greedy walk and the walk at T)
LEVEL_CODES = np.array(
    [OUT, MAYBE, WHY_WIDTH, WHY_THRESHOLD, WHY_MAYBE, WHY_UNEXPANDED, WHY_BEYOND, WHY_NONE, NOT_OPENED], dtype=np.int8
)
_WHY_TEXT = {
    WHY_NONE: "",
    WHY_THRESHOLD: "whether draft step {d} runs (gammaThreshold) needs unrecorded draft rows",
    WHY_MAYBE: "whether {name} is expanded at step {d} depends on unrecorded scores",
    WHY_UNEXPANDED: "{name} is expanded at step {d} but the recording did not expand it",
    WHY_BEYOND: "the rank-{rank} candidate at depth {next} is beyond the recorded columns",
    WHY_WIDTH: "the kept width at {name} depends on its unknown selection slot",
}


def reason_text(why: int, depth: int, rank: int = -1, node: str = "the accepted node") -> str:
    """The reason of an undecidable round: the walk stopped at ``depth``; ``rank``: the candidate's
    draft rank (WHY_BEYOND only); ``node``: how the node at ``depth`` is named (the sampling walk
    has no single accepted path: analysis.compare.sampling.REACHED names it)."""
    name = "the root" if depth == 0 else f"{node} at depth {depth}"
    return _WHY_TEXT[why].format(d=depth, name=name, rank=rank, next=depth + 1)


def reason_texts(why: np.ndarray, depth: np.ndarray, rank: np.ndarray, node: str = "the accepted node") -> np.ndarray:
    """[R] object reason_text of each round's ([R] int) why, depth and rank ("" where WHY_NONE): one
    text per distinct (why, depth, rank), whatever the rounds."""
    uniq, inverse = unique_rows(np.stack([why.astype(np.int64), depth, rank], axis=1))
    texts = [reason_text(int(w), int(d), int(r), node) for w, d, r in uniq.tolist()]
    return np.asarray(texts or [""], dtype=object)[inverse]


def is_contained(sub: TreeConfig, recorded: TreeConfig) -> bool:
    """Shape containment: no more steps, heads or per-slot widths than the recorded config.

    A contained config's outcome is often but not always decidable: its own selection can pick a
    node the recording did not expand (docs/analysis.md, "Offline comparison").
    """
    return beyond_recorded(sub, recorded) is None


def beyond_recorded(sub: TreeConfig, recorded: TreeConfig) -> str | None:
    """The first field where ``sub`` is deeper or wider than ``recorded`` (``"gamma 4 > 3"``,
    ``"topKSpec[0][0] = 8 > 6"``), None when it is contained: the containment rule, stated once."""
    if sub.gamma > recorded.gamma:
        return f"gamma {sub.gamma} > {recorded.gamma}"
    for i in range(sub.gamma):
        if sub.top_head[i] > recorded.top_head[i]:
            return f"topHead[{i}] = {sub.top_head[i]} > {recorded.top_head[i]}"
        for j, w in enumerate(sub.top_k_spec[i]):
            if w > recorded.top_k_spec[i][j]:
                return f"topKSpec[{i}][{j}] = {w} > {recorded.top_k_spec[i][j]}"
    return None


def fit_levels(top_k_spec: Sequence[Sequence[int]], top_head: Sequence[int], like: TreeConfig) -> TreeConfig:
    """The tree of ``top_k_spec`` / ``top_head`` with every step expanding at most the nodes its
    level holds (``like``'s tree type and gammaThreshold).

    The one narrowing rule: narrowing a level (a smaller root, a slimmer step) leaves fewer nodes
    for the next step to expand, so a step whose topHead exceeds them keeps its first, best-ranked
    slots and drops the rest with their widths. Applied to a prefix of a config's rows and
    widths, the result is a valid config contained in it (tests/test_user_mistakes.py).
    """
    spec, heads, level = [], [], 1
    for widths, h in zip(top_k_spec, top_head):
        kept = tuple(widths[: min(h, level)])
        spec.append(kept)
        heads.append(len(kept))
        level = sum(kept)
    return TreeConfig.from_lists(spec, heads, like.tree_type, like.gamma_threshold)


def contained_configs(recorded: TreeConfig, limit: int = 10000) -> list[TreeConfig]:
    """Every static config contained in ``recorded`` (same gammaThreshold), smallest gamma first.

    Widths are non-increasing across a step's slots (a later slot never keeps more children than an
    earlier, better one), which keeps the list to what an engineer would try.
    """
    out: list[TreeConfig] = []

    def widths_for(max_row: Sequence[int], heads: int) -> Iterable[tuple[int, ...]]:
        ranges = [range(1, max_row[j] + 1) for j in range(heads)]
        for combo in itertools.product(*ranges):
            if all(combo[k] >= combo[k + 1] for k in range(len(combo) - 1)):
                yield combo

    def extend(spec: list[tuple[int, ...]], heads: list[int], level: int) -> None:
        if len(out) >= limit:
            return
        if spec:
            out.append(TreeConfig.from_lists(spec, heads, gamma_threshold=recorded.gamma_threshold))
        i = len(spec)
        if i >= recorded.gamma:
            return
        for h in range(1, min(recorded.top_head[i], level) + 1):
            for ws in widths_for(recorded.top_k_spec[i], h):
                extend(spec + [ws], heads + [h], sum(ws))

    extend([], [], 1)
    return sorted(out, key=lambda c: (c.gamma, c.num_nodes, c.short()))


def truncated(cfg: TreeConfig, gamma: int) -> TreeConfig:
    """The first ``gamma`` steps of ``cfg`` (what a dynamic-gamma strategy runs)."""
    if not 1 <= gamma <= cfg.gamma:
        raise ValueError(f"gamma must be in 1..{cfg.gamma}, got {gamma}")
    return TreeConfig.from_lists(cfg.top_k_spec[:gamma], cfg.top_head[:gamma], cfg.tree_type, cfg.gamma_threshold)
