"""Text output of a replay: the tree drawn as in the article, the accepted path, a summary."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from replay.core.config import SpecConfig, TreeConfig
from replay.core.headline import bound_rounds, headline, headline_lines, metric_text
from replay.core.point_value import BOUNDS_MET, met_not_exact
from replay.core.selection import FALLBACK_WARNING
from replay.core.temperature import format_temperature
from replay.core.vocab import BONUS_CORRECTION, LAYOUT_PARENTS, PAD_TOKEN, STOP_NO_ROW
from replay.io.skipped import Skipped, describe_skipped
from replay.util.words import counted

from .batch.frames import distinct_columns
from .batch.result import BatchResult
from .batch.sampling import NO_SCORES_CODE, BatchSampling
from .batch.sampling_frames import from_node_logprobs
from .batch.view import RoundView
from .runs import RunReplay
from .sampling import length_at_bounds
from .sampling_runs import sampling_means

ACCEPT_MARK = "✓"
EXPAND_MARK = "▸"  # the draft ran on this node (it has children)


def _tok(token: int) -> str:
    return "?" if token == PAD_TOKEN else str(int(token))


def render_tree(res: RoundView) -> list[str]:
    """Sideways tree: one line per node, branches as in `tree`, accepted path ticked."""
    tree = res.tree
    names = tree.names()
    on_path = set(res.acceptance.accepted_nodes) | {0}
    children = [tree.children(u).tolist() for u in range(tree.num_nodes + 1)]
    has_kids = tree.has_children()

    def label(u: int) -> str:
        parts = [f"{names[u]}={_tok(tree.tokens[u])}" if u else f"R={_tok(tree.tokens[0])}"]
        if u in on_path and u:
            parts.append(ACCEPT_MARK)
        if has_kids[u]:
            parts.append(EXPAND_MARK)
        t = int(res.target_top1[u])
        if t != PAD_TOKEN:
            parts.append(f"target→{t}")
        return " ".join(parts)

    lines = [label(0)]

    def walk(u: int, prefix: str) -> None:
        kids = children[u]
        for k, v in enumerate(kids):
            last = k == len(kids) - 1
            lines.append(prefix + ("└── " if last else "├── ") + label(v))
            walk(v, prefix + ("    " if last else "│   "))

    walk(0, "")
    return lines


def render_levels(res: RoundView) -> list[str]:
    tree = res.tree
    names = tree.names()
    out = []
    for d, size in enumerate(tree.level_sizes(), start=1):
        if d >= tree.num_steps:  # no draft step d (steps are 0..num_steps-1): its nodes are the leaves
            out.append(f"  level {d}: {size} node(s); leaves")
            continue
        exp = tree.expanded[d]
        exp_txt = ", ".join(names[u] for u in exp) if exp.shape[0] else "none"
        out.append(f"  level {d}: {size} node(s); expanded at step {d}: {exp_txt}")
    return out


def describe_bonus(res: RoundView) -> str:
    a = res.acceptance
    last = res.tree.names()[a.last_node]
    if a.bonus_token is None:
        why = "no target row for it in this dump" if a.stop != STOP_NO_ROW else "no target row"
        if res.layout == LAYOUT_PARENTS:
            why = f"the parents layout has no row for {last}"
        return f"not in dump ({why})"
    kind = "correction" if a.bonus_kind == BONUS_CORRECTION else "leaf bonus"
    return f"{a.bonus_token} ({kind}, target's top-1 at {last})"


def render_round(res: RoundView) -> list[str]:
    """One round's block: its header, the tree drawn, its levels, the accepted path and its notes."""
    tree = res.tree
    a = res.acceptance
    heads, widths = tree.shape()
    lines = [
        f"round {res.name}: {tree.num_steps} draft step(s), {tree.num_nodes} nodes, "
        f"validate layout {res.layout} ({res.layout_source}), selection {res.selection_summary}",
    ]
    lines += ["  " + line for line in render_tree(res)]
    lines += render_levels(res)
    path_tokens = " → ".join(["R"] + [str(t) for t in a.accepted_tokens])
    node_txt = ", ".join(str(u) for u in a.accepted_nodes) or "none"
    lines.append(f"  accepted path: {path_tokens}  (nodes {node_txt})")
    lines.append(f"  accepted length: {a.accepted_length}   bonus token: {describe_bonus(res)}")
    lines.append(f"  committed tokens: {len(a.committed_tokens)} {list(a.committed_tokens)}")
    for note in res.notes:
        if note != FALLBACK_WARNING:  # said once for the run, on stderr (the run's warnings)
            lines.append(f"  note: {note}")
    return lines


def histogram_lines(counts: np.ndarray, width: int = 40) -> list[str]:
    """Text bars from counts. counts: [max_value + 1] int64, counts[v] = rounds with value v."""
    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim != 1:
        raise ValueError(f"counts: expected 1-D, got shape {counts.shape}")
    total = int(counts.sum())
    if total == 0:
        return ["  (no rounds)"]
    top = int(counts.max())
    return [
        f"  {v:>3} | {'█' * round(width * int(c) / top):<{width}} {int(c):>6} ({100.0 * int(c) / total:5.1f}%)"
        for v, c in enumerate(counts)
    ]


@dataclass(frozen=True, eq=False)
class SummaryFigures:
    """What a replay summary shows, however the rounds were replayed (one by one or batched)."""

    accepted: np.ndarray  # [rounds] int64 accepted length of each replayed round
    drafted: np.ndarray  # [rounds] int64 draft nodes of each replayed round (root excluded)
    steps: np.ndarray  # [rounds] int64 draft steps of each replayed round
    bonus_known: int  # rounds whose bonus token is in the dump
    selections: Mapping[str, int]  # selection summary -> rounds, in first-use order


def batch_figures(res: BatchResult) -> SummaryFigures:
    """The summary's figures of the rounds a batch replay replayed (``res.ok``), in run order."""
    ok = res.ok
    return SummaryFigures(
        res.accepted_length[ok].astype(np.int64),
        res.num_nodes[ok].astype(np.int64),
        res.num_steps[ok].astype(np.int64),
        int((res.bonus_token[ok] >= 0).sum()),
        _selection_counts(res),
    )


def _selection_counts(res: BatchResult) -> dict[str, int]:
    """Selection summary -> replayed rounds, in first-use order; each distinct column of selection
    codes is worded once (two columns can word alike: their rounds add up)."""
    ok = np.flatnonzero(res.ok)
    out: dict[str, int] = {}
    if not ok.shape[0]:
        return out
    first, inverse = distinct_columns(res.selection[:, ok])
    counts = np.bincount(inverse, minlength=first.shape[0])
    for i, c in sorted(zip(first.tolist(), counts.tolist())):
        text = res.selection_summary(int(ok[i]))
        out[text] = out.get(text, 0) + c
    return out


def run_summary(rep: RunReplay, title: str | None = None, extra: Sequence[str] = ()) -> list[str]:
    """The summary block (summary_lines) of a run replayed in batches, its figures from the batch
    arrays; titled ``summary of DIR`` unless ``title`` is given."""
    figs = batch_figures(rep.result)
    title = f"summary of {rep.directory}" if title is None else title
    return summary_lines(title, rep.config_source, rep.config, rep.tree, figs, rep.skipped, rep.notes, extra)


def summary_lines(
    title: str,
    config_source: str,
    config: SpecConfig,
    tree: TreeConfig,
    figs: SummaryFigures,
    skipped: Sequence[Skipped],
    notes: Sequence[str],
    extra: Sequence[str] = (),
) -> list[str]:
    """The summary block of ``replay`` and ``batch``; ``extra`` lines go after the histogram."""
    n = int(figs.accepted.shape[0])
    lines = [
        title,
        f"  config ({config_source}): {tree.short()}  {json.dumps(tree.to_json())}",
    ]  # both paste back into --config
    if config.unknown:
        lines.append(f"  config keys not used by replay (kept): {json.dumps(dict(config.unknown))}")
    if config.settings:
        lines.append(f"  run settings: {json.dumps(dict(config.settings))}")
    listed = " (each listed on stderr)" if skipped else ""  # the reasons are not results: stdout keeps only these
    lines.append(f"  rounds replayed: {n}   skipped: {describe_skipped(skipped)}{listed}")
    if n:
        lines += [
            f"  {line}" for line in headline_lines(headline(figs.accepted, figs.drafted, figs.steps, figs.bonus_known))
        ]
        lines.append("  selection: " + ", ".join(f"{k} ×{v}" for k, v in figs.selections.items()))
        lines.append("  accepted length histogram:")
        lines += histogram_lines(np.bincount(figs.accepted))
    lines += [f"  {line}" for line in extra]
    for note in notes:
        lines.append(f"  note: {note}")
    return lines


def _span(lo: float, hi: float, exact: bool = True) -> str:
    """One value where its bounds are one float (replay.core.point_value; BOUNDS_MET said where not
    ``exact``), else the bounds with their width (metric_text each)."""
    if lo == hi:
        return metric_text(lo) + (f" ({BOUNDS_MET})" if met_not_exact(lo, hi, exact) else "")
    return f"[{metric_text(lo)}, {metric_text(hi)}] (width {metric_text(hi - lo)})"


def _round_kind(smp) -> str:
    """What a round's expected accepted length is: proved (exact), one value its bounds met at, or bounds."""
    if smp.from_node_logprobs:
        return "exact, from node_logprobs"
    if smp.exact:
        return "exact"
    return BOUNDS_MET if met_not_exact(smp.expected_lo, smp.expected_hi, smp.exact) else "bounds"


def sampling_lines(smp) -> list[str]:
    """A round's replay.engine.sampling.RoundSampling, under its tree."""
    lines = [
        f"  at T = {format_temperature(smp.temperature)}: expected accepted length {_span(smp.expected_lo, smp.expected_hi)}"
        + f"  ({_round_kind(smp)})"
    ]
    ge = ", ".join(
        f"P(L>={d}) {_span(lo, hi)}" for d, (lo, hi) in enumerate(zip(smp.length_ge_lo, smp.length_ge_hi), 1)
    )
    lines.append(f"    {ge}")
    if smp.variance is not None:
        lines.append(f"    variance of the accepted length {smp.variance:.4f}")
    return lines


def batch_sampling_summary(smp: BatchSampling, result: BatchResult, rows: np.ndarray) -> list[str]:
    """The sampling summary (sampling_summary_arrays) over rounds ``rows`` of a batch replay (each
    usable at T), the rounds refused at T counted from ``smp``. rows: [n] int64 indices into ``result``.

    The batch's P(L >= d) columns run to the config's gamma; the distribution stops at the deepest
    tree among ``rows`` (replay and batch alike), since P(L = d) is 0 for every d past it."""
    depth = int(result.num_steps[rows].max())
    ge_lo, ge_hi = (a[rows, : depth + 1] for a in (smp.length_ge_lo, smp.length_ge_hi))
    refused = result.ok & ~smp.usable
    no_scores = refused & (smp.problem == NO_SCORES_CODE)
    return sampling_summary_arrays(
        smp.temperature,
        smp.expected_lo[rows],
        smp.expected_hi[rows],
        ge_lo,
        ge_hi,
        smp.exact[rows],
        int(from_node_logprobs(smp)[rows].sum()),
        int((refused & ~no_scores).sum()),
        int(no_scores.sum()),
    )


def rounds_with_scores(n: int, t: float, skipped: int = 0) -> str:
    """ "1 round" / "n rounds", "with scores" added above T = 0 (T = 0 is the greedy replay: it reads no score).

    n: the rounds used; skipped: rounds with scores refused at T all the same (a bad row, listed on
    stderr), counted among those with scores and said: "300 rounds with scores, 1 of them skipped"."""
    words = counted(n + skipped, "round") + (" with scores" if t > 0 else "")
    return words + (f", {skipped} of them skipped (listed on stderr)" if skipped else "")


def sampling_summary_arrays(
    t, exp_lo, exp_hi, ge_lo, ge_hi, exact, own: int = 0, skipped: int = 0, no_scores: int = 0
) -> list[str]:
    """Means over n rounds at T: expectations with bounds, and the expected length distribution.

    exp_lo, exp_hi, exact: [n]; ge_lo, ge_hi: [n, D+1] P(L >= d) for d = 0..D (column 0 is 1); own:
    how many of the rounds the dump's node_logprobs decided; skipped: as rounds_with_scores;
    no_scores: replayed rounds without scores, skipped at T only (the greedy summary above them
    counts them as replayed: its "skipped" is the reading's alone).
    """
    m = sampling_means(bound_rounds(exp_lo, ge_lo, {}), bound_rounds(exp_hi, ge_hi, {}), exact)
    used = f" of the {m.rounds} used" if skipped else ""
    without = f"; {counted(no_scores, 'replayed round')} without scores skipped (listed on stderr)" if no_scores else ""
    counts = f"{rounds_with_scores(m.rounds, t, skipped)}, {m.exact_rounds} exact{used}{without}"
    exact_all = m.exact_rounds == m.rounds
    at_lo, at_hi = (a.mean(axis=0) for a in length_at_bounds(ge_lo, ge_hi))  # P(L = d), d = 0..D
    met = not exact_all and bool((at_lo == at_hi).any())  # one value stated for some L, not proved
    lines = [
        f"sampling at T = {format_temperature(t)} ({counts}):",
        f"  expected accepted length per round: {_span(m.accepted_lo, m.accepted_hi, exact_all)}",
        f"  expected block efficiency:          {_span(m.block_efficiency_lo, m.block_efficiency_hi, exact_all)}",
        "  expected distribution of the accepted length (fraction of rounds"
        + (f"; one value: {BOUNDS_MET}):" if met else "):"),
    ]
    for d in range(ge_lo.shape[1]):
        lines.append(f"    L = {d}: {_span(float(at_lo[d]), float(at_hi[d]))}")
    if own:  # say where the exact numbers came from (the top-K rows alone bound them at most T)
        lines.insert(1, f"  exact from the dump's node_logprobs at T: {own} round(s)")
    return lines
