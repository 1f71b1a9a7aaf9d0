"""Other tree configs at temperature T on recorded rounds, round by round: the reference of the
sampling walk on each config's sub-tree (a test oracle; the commands walk the batch arrays in
analysis.compare.sampling_batch, tests/test_compare_sampling_batch.py holds the two equal).

The greedy counterfactual (replay.testing.subtree_walk) rebuilds a config's tree on a recorded round,
node for node by (parent, draft rank), with the recording's selection rule. At temperature T the
walk can take any edge, not one path, so the sampling counterfactual needs every part of that tree
the walk can reach (docs/analysis.md "Sampling-mode replay", "Other configs at T"):

* the sub-tree's edges are recorded edges, so P(reach n) = product of p_T over its edges, bounded
  by replay.core.sampling exactly as for the recorded tree (the same rows, the same rule);
* a node whose existence, expansion or children the recording does not determine (MAYBE selection,
  a kept width that depends on an unknown slot, an early stop that depends on unrecorded rows, a
  node expanded by the config but not by the recording, a candidate beyond the recorded columns) is
  *doubtful*. The round is *determined* at T when the walk reaches no doubtful node: the upper
  bound of its reach probability is 0. Otherwise it is *undetermined*: counted, with the reason, and
  never given a number of its own (the all-rounds bounds count it anywhere in [0, the steps run]).

At T = 0 only the greedy path has a positive reach, so the determined rounds are exactly the rounds
the greedy counterfactual decides, with the same accepted length (tests/test_compare_sampling.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.compare.sampling import (
    REACHED,
    SAMPLING_COLUMNS,
    SAMPLING_PER_ROUND_COLUMNS,
    SamplingComparison,
    summarize_sampling_sums,
)
from analysis.compare.subtree import (
    MAYBE,
    OUT,
    WHY_BEYOND,
    WHY_MAYBE,
    WHY_THRESHOLD,
    WHY_UNEXPANDED,
    WHY_WIDTH,
    reason_text,
)
from replay.core.config import TreeConfig
from replay.core.sampling import greedy_logp, sampling_bounds
from replay.core.sampling_problems import problem_words
from replay.core.sampling_recorded import recorded_bounds, recorded_column
from replay.core.vocab import NO_PARENT, PAD_TOKEN
from replay.testing.replayer import RoundResult
from replay.testing.round_sampling import node_rows, round_sampling

from .subtree_walk import simulate_subconfig


@dataclass(frozen=True)
class _Doubt:
    """A part of the sub-tree the recording does not determine, and what bounds its reach.

    node: its own possible-tree index (reach_hi[node] bounds it), or for a candidate of unknown
    token its parent's; siblings: then the parent's earlier children of known token, whose reach_lo
    is subtracted (distinct tokens are disjoint draws). no_row: that parent has no validate row, so
    at T = 0 the walk stops there (the greedy ``no_row`` stop)."""

    why: int
    depth: int
    node: int
    siblings: tuple[int, ...] = ()
    rank: int = -1
    unknown_token: bool = False
    no_row: bool = False


@dataclass(frozen=True, eq=False)
class SubTreeRound:
    """One config's possible sub-tree on one recorded round, in tree order (T-independent): every
    node the config may have whose token is known, with its recorded node's validate row."""

    name: str
    tokens: np.ndarray  # [n] int64
    parents: np.ndarray  # [n] int64 (NO_PARENT at the root)
    depths: np.ndarray  # [n] int64
    ids: np.ndarray  # [n, K] the recorded node's validate row (PAD_TOKEN when none)
    logp: np.ndarray  # [n, K]
    has_row: np.ndarray  # [n] bool
    doubts: tuple[_Doubt, ...]
    steps_hi: int  # draft steps the config possibly runs: E[L] <= steps_hi
    recs: np.ndarray  # [n] each node's recorded node (-1: an extra node, not in the recording)


def sub_tree_round(
    res: RoundResult, sub: TreeConfig, gamma_threshold: float | None = None, recorded_gamma: int | None = None
) -> SubTreeRound:
    """``sub``'s possible sub-tree on ``res`` (replay.testing.subtree_walk.simulate_subconfig), its doubts listed."""
    sim = simulate_subconfig(res, sub, gamma_threshold, recorded_gamma)
    logp = res.validate_logp if res.validate_logp is not None else greedy_logp(res.validate_ids)
    rec_ids, rec_lp, rec_has = node_rows(
        res.tree.tokens.shape[0], res.validate_ids, logp, res.layout, res.tree.expanded_order
    )
    index = {id(sim.root): 0}
    nodes = [(int(sim.root.token), NO_PARENT, 0, 0)]  # (token, parent, depth, recorded node)
    doubts: list[_Doubt] = []
    for level in sim.levels:
        for u in level:
            i = index.get(id(u))
            if i is None:
                continue  # below a candidate of unknown token: never in the possible tree
            d = u.depth
            if not u.sure:
                doubts.append(_Doubt(WHY_WIDTH, d - 1, i))
            if d >= sim.max_steps or u.status == OUT:
                continue  # a leaf of the simulated tree
            why = WHY_THRESHOLD if d >= sim.sure_steps else WHY_MAYBE if u.status == MAYBE else None
            if why is None and u.row < 0:
                why = WHY_UNEXPANDED
            if why is not None:
                doubts.append(_Doubt(why, d, i))
                continue
            known: list[int] = []
            no_row = not bool(rec_has[u.rec])
            for child in u.children:
                if child.token == PAD_TOKEN:
                    doubts.append(_Doubt(WHY_BEYOND, d, i, tuple(known), child.rank, True, no_row))
                    continue
                index[id(child)] = len(nodes)
                known.append(len(nodes))
                nodes.append((int(child.token), i, d + 1, child.rec))
    tokens, parents, depths, recs = (np.array(col, dtype=np.int64) for col in zip(*nodes))
    where = np.maximum(recs, 0)
    has = rec_has[where] & (recs >= 0)
    ids = np.where(has[:, None], rec_ids[where], PAD_TOKEN)
    lp = np.where(has[:, None], rec_lp[where], -np.inf)
    return SubTreeRound(res.name, tokens, parents, depths, ids, lp, has, tuple(doubts), int(sim.max_steps), recs)


def recorded_edges(tr: SubTreeRound, node_logp: np.ndarray | None, column: int | None) -> np.ndarray | None:
    """[n] each sub-tree node's log-prob under its parent from the recording's node_logprobs column
    ``column`` (replay.core.sampling_recorded.recorded_column), or None when the round has none or the
    sub-tree holds an extra node (a candidate the recording never kept: no recorded value; the round
    then takes the top-K rows). Every other edge of the sub-tree joins two recorded nodes, so it is a
    recorded edge and its value is the recording's."""
    if column is None or node_logp is None or bool((tr.recs[1:] < 0).any()):
        return None
    if int(tr.recs.max()) >= node_logp.shape[0]:
        return None  # rows cut short: those nodes have no recorded value
    edge = np.asarray(node_logp[:, column], dtype=np.float64)[tr.recs]
    edge[0] = 0.0  # the root: no edge
    return edge


@dataclass(frozen=True)
class SubRoundAtT:
    """One round of one config at T: the bounds when determined, else the reason."""

    determined: bool
    expected_lo: float  # NaN when undetermined
    expected_hi: float
    length_ge_lo: tuple[float, ...]  # P(L >= d), d = 1 .. depth of the sub-tree (empty when undetermined)
    length_ge_hi: tuple[float, ...]
    exact: bool
    steps_hi: int
    reason: str = ""
    problem: str = ""  # a bad validate row (the round is then skipped, never given a number)
    needs_vocab: bool = False


def _doubt_reach(dt: _Doubt, t: float, reach_lo: np.ndarray, reach_hi: np.ndarray) -> float:
    """An upper bound on the probability that the walk reaches the doubtful part."""
    if not dt.unknown_token:
        return float(reach_hi[dt.node])
    if t == 0.0 and dt.no_row:
        return 0.0
    return float(reach_hi[dt.node] - sum(reach_lo[s] for s in dt.siblings))


def subtree_sampling(
    trees: Sequence[SubTreeRound],
    temperature: float,
    vocab_size: int | None = None,
    edges: Sequence[np.ndarray | None] | None = None,
) -> list[SubRoundAtT]:
    """Every sub-tree at T: replay.core.sampling.sampling_bounds on trees of one size at a time.
    ``edges`` (recorded_edges per tree): where given, the tree's walk takes its edge probabilities
    from the recorded node_logprobs at T (replay.core.sampling_recorded.recorded_bounds, exact),
    as replay --temperature does for the recorded tree; elsewhere from the top-K rows."""
    out: list[SubRoundAtT | None] = [None] * len(trees)
    own = list(edges) if edges is not None else [None] * len(trees)
    groups: dict[tuple[int, int, bool], list[int]] = {}
    for k, tr in enumerate(trees):
        groups.setdefault((tr.tokens.shape[0], tr.ids.shape[1], own[k] is not None), []).append(k)
    for (_, _, from_nodes), members in groups.items():
        stack = lambda f: np.stack([getattr(trees[k], f) for k in members])  # noqa: E731
        if from_nodes:
            lp = np.stack([own[k] for k in members])  # type: ignore[misc]
            b = recorded_bounds(stack("tokens"), stack("parents"), stack("depths"), lp, temperature)
        else:
            b = sampling_bounds(
                stack("tokens"),
                stack("parents"),
                stack("depths"),
                stack("ids"),
                stack("logp"),
                stack("has_row"),
                temperature,
                vocab_size,
            )
        for j, k in enumerate(members):
            out[k] = _at_t(trees[k], b, j, temperature, vocab_size)
    return [o for o in out if o is not None]


def _at_t(tr: SubTreeRound, b, j: int, t: float, vocab_size: int | None = None) -> SubRoundAtT:
    nan = float("nan")
    if b.problem[j]:
        return SubRoundAtT(
            False, nan, nan, (), (), False, tr.steps_hi, problem=problem_words(int(b.problem[j]), vocab_size)
        )
    for dt in tr.doubts:
        if _doubt_reach(dt, t, b.reach_lo[j], b.reach_hi[j]) > 0.0:
            why = reason_text(dt.why, dt.depth, dt.rank, REACHED)
            return SubRoundAtT(False, nan, nan, (), (), False, tr.steps_hi, reason=why, needs_vocab=b.needs_vocab)
    return SubRoundAtT(
        True,
        float(b.expected_lo[j]),
        float(b.expected_hi[j]),
        tuple(float(x) for x in b.length_ge_lo[j, 1:]),
        tuple(float(x) for x in b.length_ge_hi[j, 1:]),
        bool(b.exact[j]),
        tr.steps_hi,
        needs_vocab=b.needs_vocab,
    )


def summarize_sampling(cfg: TreeConfig, recorded: TreeConfig, t: float, rounds: Sequence[SubRoundAtT]) -> dict:
    """One SAMPLING_COLUMNS row from a config's rounds at T (undetermined ones counted, not averaged),
    each sum math.fsum's over the determined rounds in run order."""
    det = [r for r in rounds if r.determined]
    ge = [
        [math.fsum(_padded(getattr(r, side), cfg.gamma)[d] for r in det) for d in range(cfg.gamma)]
        for side in ("length_ge_lo", "length_ge_hi")
    ]
    return summarize_sampling_sums(
        cfg,
        recorded,
        t,
        len(rounds),
        len(det),
        sum(r.exact for r in det),
        math.fsum(r.expected_lo for r in det),
        math.fsum(r.expected_hi for r in det),
        np.array(ge, dtype=np.float64),
        float(sum(r.steps_hi for r in rounds if not r.determined)),
    )


def _padded(values: Sequence[float], gamma: int) -> list[float]:
    """A round's P(L >= d) for d = 1 .. gamma: zeros past its sub-tree."""
    return [*values[:gamma], *[0.0] * (gamma - len(values[:gamma]))]


def compare_sampling(
    results: Sequence[RoundResult],
    recorded: TreeConfig,
    configs: Sequence[TreeConfig],
    temperatures: Sequence[float],
    vocab_size: int | None = None,
    gamma_threshold: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    node_temperatures: Sequence[float] | None = None,
) -> SamplingComparison:
    """Each config at each T on the recorded rounds (module docstring). A round whose recorded
    replay at T is refused (no scores, a bad row: replay.engine.sampling.round_sampling) is skipped
    for every config at that T; gamma_threshold as replay.testing.compare_reference.compare_configs.
    node_temperatures: the manifest's node_logprob_temperatures; at one of them a round carrying
    node_logprobs is walked from those on every config's sub-tree (recorded_edges), exact."""
    threshold = 0.0 if gamma_threshold is None else gamma_threshold
    skipped: list[tuple[str, float, str]] = []
    usable: dict[float, list[int]] = {}
    column = {t: recorded_column(t, node_temperatures) for t in temperatures}
    # whether a round is refused depends only on T > 0 and on which node_logprobs column T reads
    refused: dict[tuple[bool, int | None], dict[int, str]] = {}
    for t in temperatures:
        key = (t > 0.0, column[t])
        if key not in refused:
            refused[key] = {}
            for k, res in enumerate(results):
                try:
                    round_sampling(res, t, vocab_size, node_temperatures)
                except ValueError as exc:
                    refused[key][k] = str(exc)
        why = refused[key]
        usable[t] = [k for k in range(len(results)) if k not in why]
        skipped.extend((results[k].name, t, text) for k, text in why.items())
    rows, per_round, needs_vocab = [], [], False
    for c, cfg in enumerate(configs):
        trees = {}
        for t in temperatures:
            todo = [k for k in usable[t] if k not in trees]
            for k in todo:
                trees[k] = sub_tree_round(results[k], cfg, threshold, recorded.gamma)
            col = column[t]
            edges = [recorded_edges(trees[k], results[k].node_logp, col) for k in usable[t]]
            at = subtree_sampling([trees[k] for k in usable[t]], t, vocab_size, edges)
            for k, r in zip(usable[t], at):
                if r.problem:  # the sub-tree reads the recorded tree's rows: its check comes first
                    raise RuntimeError(f"round {results[k].name}: {r.problem}, yet its recorded replay passed")
            needs_vocab |= any(r.needs_vocab for r in at)
            rows.append(summarize_sampling(cfg, recorded, t, at))
            per_round.extend(
                (cfg.short(), t, results[k].name, r.determined, r.expected_lo, r.expected_hi, r.exact, r.reason)
                for k, r in zip(usable[t], at)
            )
        if progress:
            progress(c + 1, len(configs))
    return SamplingComparison(
        pd.DataFrame(rows, columns=SAMPLING_COLUMNS),
        pd.DataFrame(per_round, columns=SAMPLING_PER_ROUND_COLUMNS),
        skipped,
        needs_vocab,
    )
