"""Text output of a replay: the tree drawn as in the article, the accepted path, a summary."""

from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

from .replayer import DirectoryReplay, RoundResult
from .vocab import BONUS_CORRECTION, PAD_TOKEN, STOP_NO_ROW

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


def text_histogram(values: Sequence[int], width: int = 40) -> list[str]:
    counts = Counter(values)
    if not counts:
        return ["  (no rounds)"]
    top = max(counts.values())
    total = sum(counts.values())
    out = []
    for v in range(0, max(counts) + 1):
        c = counts.get(v, 0)
        bar = "█" * (round(width * c / top) if top else 0)
        out.append(f"  {v:>3} | {bar:<{width}} {c:>6} ({100.0 * c / total:5.1f}%)")
    return out


def render_summary(rep: DirectoryReplay) -> list[str]:
    res = rep.results
    acc = [r.acceptance.accepted_length for r in res]
    com = [len(r.acceptance.committed_tokens) for r in res]
    bonus_known = sum(1 for r in res if r.acceptance.bonus_token is not None)
    lines = [f"summary of {rep.directory}", f"  config ({rep.config_source}): {rep.tree.to_json()}"]
    if rep.config.unknown:
        lines.append(f"  config keys not used by replay (kept): {dict(rep.config.unknown)}")
    if rep.config.settings:
        lines.append(f"  run settings: {dict(rep.config.settings)}")
    lines.append(f"  rounds replayed: {len(res)}   skipped: {len(rep.skipped)}")
    if res:
        lines.append(f"  mean accepted length (bonus excluded): {np.mean(acc):.4f}")
        lines.append(f"  mean committed tokens per round (block efficiency): {np.mean(com):.4f}")
        lines.append(f"  bonus token known in {bonus_known} of {len(res)} round(s)")
        selections = Counter(r.rebuilt.selection_summary for r in res)
        lines.append("  selection: " + ", ".join(f"{k} ×{v}" for k, v in selections.items()))
        lines.append("  accepted length histogram:")
        lines += text_histogram(acc)
    for note in rep.notes:
        lines.append(f"  note: {note}")
    if rep.skipped:
        lines.append("  skipped (not analysed):")
        for s in rep.skipped:
            lines.append(f"    {s.what}: {s.reason}")
    return lines
