"""Text output of a replay: the tree drawn as in the article, the accepted path, a summary."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from replay.core.config import SpecConfig, TreeConfig
from replay.core.headline import headline, headline_lines
from replay.core.vocab import BONUS_CORRECTION, PAD_TOKEN, STOP_NO_ROW
from replay.io.grouping import Skipped, describe_skipped

from .replayer import DirectoryReplay, RoundResult

ACCEPT_MARK = "✓"
EXPAND_MARK = "▸"  # the draft ran on this node (it has children)


def _tok(token: int) -> str:
    return "?" if token == PAD_TOKEN else str(int(token))


def render_tree(res: RoundResult) -> list[str]:
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


def render_levels(res: RoundResult) -> list[str]:
    tree = res.tree
    names = tree.names()
    out = []
    for d, size in enumerate(tree.level_sizes(), start=1):
        exp = tree.expanded[d] if d < tree.num_steps else np.zeros(0, dtype=np.int64)
        exp_txt = ", ".join(names[u] for u in exp) if exp.shape[0] else "none (leaves)"
        out.append(f"  level {d}: {size} node(s); expanded at step {d}: {exp_txt}")
    return out


def describe_bonus(res: RoundResult) -> str:
    a = res.acceptance
    last = res.tree.names()[a.last_node]
    if a.bonus_token is None:
        why = "no target row for it in this dump" if a.stop != STOP_NO_ROW else "no target row"
        if res.layout == "parents":
            why = f"the parents layout has no row for {last}"
        return f"not in dump ({why})"
    kind = "correction" if a.bonus_kind == BONUS_CORRECTION else "leaf bonus"
    return f"{a.bonus_token} ({kind}, target's top-1 at {last})"


def render_round(res: RoundResult) -> list[str]:
    tree = res.tree
    a = res.acceptance
    heads, widths = tree.shape()
    lines = [
        f"round {res.name}: {tree.num_steps} draft step(s), {tree.num_nodes} nodes, "
        f"validate layout {res.layout} ({res.layout_source}), selection {res.rebuilt.selection_summary}",
    ]
    lines += ["  " + line for line in render_tree(res)]
    lines += render_levels(res)
    path_tokens = " → ".join(["R"] + [str(t) for t in a.accepted_tokens])
    node_txt = ", ".join(str(u) for u in a.accepted_nodes) or "none"
    lines.append(f"  accepted path: {path_tokens}  (nodes {node_txt})")
    lines.append(f"  accepted length: {a.accepted_length}   bonus token: {describe_bonus(res)}")
    lines.append(f"  committed tokens: {len(a.committed_tokens)} {list(a.committed_tokens)}")
    for note in res.notes:
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


def figures_of(results: Sequence[RoundResult]) -> SummaryFigures:
    return SummaryFigures(
        np.array([r.acceptance.accepted_length for r in results], dtype=np.int64),
        np.array([r.tree.num_nodes for r in results], dtype=np.int64),
        np.array([r.tree.num_steps for r in results], dtype=np.int64),
        sum(1 for r in results if r.acceptance.bonus_token is not None),
        dict(Counter(r.rebuilt.selection_summary for r in results)),
    )


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
        lines.append(f"  config keys not used by replay (kept): {dict(config.unknown)}")
    if config.settings:
        lines.append(f"  run settings: {dict(config.settings)}")
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


def render_summary(rep: DirectoryReplay) -> list[str]:
    return summary_lines(
        f"summary of {rep.directory}",
        rep.config_source,
        rep.config,
        rep.tree,
        figures_of(rep.results),
        rep.skipped,
        rep.notes,
    )
