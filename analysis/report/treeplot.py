"""Draw draft trees: the static shape coloured by hit frequency, or one round with its tokens.

The tree is positioned by ``hierarchical_layout`` and drawn as one line collection, one scatter and
a text per node on a pyplot-free Figure. Token text needs a tokenizer (``load_decoder``), loaded only when asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.collections import LineCollection
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from replay.core.config import TreeConfig
from replay.core.tree import Tree
from replay.core.vocab import PAD_TOKEN
from replay.engine.batch.view import RoundView
from replay.util.bounded import MAX_JSON_BYTES, parse_json_bytes, read_file_bytes
from replay.util.errors import SpecReplayError

from . import plots as _plots  # noqa: F401  (selects the headless backend)

Decode = Callable[[int], str]


def _children(tree: Tree) -> list[list[int]]:
    """Each node's children in tree order (Tree.children)."""
    return [tree.children(u).tolist() for u in range(tree.tokens.shape[0])]


def hierarchical_layout(tree: Tree) -> dict[int, tuple[float, float]]:
    """Top-down positions: y = -depth, leaves at x = 0, 1, 2, ... in child order, parents centred."""
    children = _children(tree)
    pos: dict[int, tuple[float, float]] = {}
    next_x = [0.0]

    def place(u: int, depth: int) -> float:
        kids = children[u]
        if not kids:
            x = next_x[0]
            next_x[0] += 1.0
        else:
            xs = [place(v, depth + 1) for v in kids]
            x = (xs[0] + xs[-1]) / 2
        pos[u] = (x, -float(depth))
        return x

    place(0, 0)
    return pos


# networkx's draw_networkx_* defaults, written out so that the tree pictures draw those pixels
# without importing networkx (half a second at every start)
_EDGE_GREY = "#999999"
_LABEL_TEXT = {
    "color": "k",
    "family": "sans-serif",
    "weight": "normal",
    "alpha": None,
    "horizontalalignment": "center",
    "verticalalignment": "center",
    "bbox": None,
    "clip_on": True,
}


def _draw_edges(ax, pos: dict[int, tuple[float, float]], edges: list[tuple[int, int]], colors, widths) -> None:
    """The edges as one LineCollection under the nodes, the data limits padded by 5 % of the extent."""
    if not edges:
        return
    edge_pos = np.asarray([(pos[a], pos[b]) for a, b in edges])  # [E, 2, 2] float64
    lines = LineCollection(edge_pos, colors=colors, linewidths=widths, antialiaseds=(1,), linestyle="solid", alpha=None)
    lines.set_cmap(None)
    lines.set_clim(None, None)
    lines.set_zorder(1)
    lines.set_label(None)
    ax.add_collection(lines)
    minx, maxx = np.amin(np.ravel(edge_pos[:, :, 0])), np.amax(np.ravel(edge_pos[:, :, 0]))
    miny, maxy = np.amin(np.ravel(edge_pos[:, :, 1])), np.amax(np.ravel(edge_pos[:, :, 1]))
    padx, pady = 0.05 * (maxx - minx), 0.05 * (maxy - miny)
    ax.update_datalim(((minx - padx, miny - pady), (maxx + padx, maxy + pady)))
    ax.autoscale_view()


def _draw(
    ax, tree: Tree, colors, labels: dict[int, str], edge_colors=None, node_size: float = 900, cmap=None, norm=None
):
    """edge_colors: per node v = 1..N (index v - 1) the colour of its edge from its parent; None: grey."""
    pos = hierarchical_layout(tree)
    # drawn by parent, then child (each parent's children in tree order): a level's parents are the
    # previous step's expanded nodes in selection order, not node order, so colours go by child node
    edges = [(u, v) for u, kids in enumerate(_children(tree)) for v in kids]
    greys = [_EDGE_GREY] * len(edges) if edge_colors is None else [edge_colors[v - 1] for _, v in edges]
    _draw_edges(ax, pos, edges, greys, [2.5 if c != _EDGE_GREY else 1.0 for c in greys])
    xy = np.asarray([pos[v] for v in range(tree.tokens.shape[0])])  # [N+1, 2]
    nodes = ax.scatter(
        xy[:, 0],
        xy[:, 1],
        s=node_size,
        c=colors,
        marker="o",
        cmap=cmap,
        vmin=None if norm is None else norm.vmin,
        vmax=None if norm is None else norm.vmax,
        alpha=None,
        linewidths=0.6,
        edgecolors="black",
        label=None,
    )
    nodes.set_zorder(2)
    for u, label in labels.items():
        x, y = pos[u]
        ax.text(x, y, label, size=7, transform=ax.transData, **_LABEL_TEXT)
    ax.tick_params(axis="both", which="both", bottom=False, left=False, labelbottom=False, labelleft=False)
    ax.set_axis_off()
    xs = [p[0] for p in pos.values()]
    ax.set_xlim(min(xs) - 0.7, max(xs) + 0.7)
    ys = [p[1] for p in pos.values()]
    ax.set_ylim(min(ys) - 0.5, 0.5)
    return pos


def plot_tree_hits(shape: Tree, hits: pd.DataFrame, run: str, cfg: TreeConfig) -> Figure:
    """The config's static shape, slot u coloured by how often it lay on the accepted path.

    hits: rows of analysis.tables.metrics.slot_hit_frequency for this run (slot, slot_name, frequency,
    rounds_present). A slot is (depth, expanded parent in selection order, child rank), not a node:
    the labels say so (B:p2c1 = top-1 child of the 2nd node expanded at step 1).
    """
    h = hits.set_index("slot")
    freq = h["frequency"].reindex(range(shape.num_nodes + 1)).fillna(0.0).to_numpy(dtype=float)
    present = h["rounds_present"].reindex(range(shape.num_nodes + 1)).fillna(0).astype(int).to_numpy()
    names = h["slot_name"].reindex(range(shape.num_nodes + 1)).fillna("?").tolist()
    n = shape.num_nodes + 1
    fig = Figure(
        figsize=(
            max(6.0, 0.75 * int(np.count_nonzero(~shape.has_children())) + 2.5),
            1.6 + 1.25 * (shape.num_steps + 1),
        ),
        layout="constrained",
    )
    ax = fig.add_subplot()
    cmap = colormaps["YlOrRd"]
    norm = Normalize(0.0, 1.0)
    labels = {u: f"{names[u]}\n{100 * freq[u]:.0f}%" for u in range(n)}
    _draw(ax, shape, list(freq), labels, cmap=cmap, norm=norm, node_size=1100)
    sm = ScalarMappable(norm=norm, cmap=cmap)
    fig.colorbar(sm, ax=ax, label="fraction of rounds with the slot on the accepted path", shrink=0.8)
    rounds = int(present[0])
    other = int(h["rounds_other_shape"].iloc[0]) if "rounds_other_shape" in h.columns and len(h) else 0
    extra = f"; {other} rounds of another shape left out" if other else ""
    ax.set_title(
        f"Per-slot hit frequency — {run}, {rounds} rounds, config {cfg.short()} topHead {list(cfg.top_head)}{extra}\n"
        "slot B:p2c1 = top-1 child of the 2nd node expanded at step 1, whichever node that was (per node: stats' node_hits)",
        fontsize=9,
    )
    return fig


def plot_round_tree(res: RoundView, decode: Decode | None = None, run: str = "", why: str = "") -> Figure:
    """One round's tree: draft tokens (decoded text when a tokenizer is given), accepted path in green,
    the target's top-1 under each node that has a target row. ``why``: how the round was chosen
    (analysis.report.example_round), shown under the title."""
    tree = res.tree
    n = tree.num_nodes + 1
    names = tree.names()
    on_path = {0, *res.acceptance.accepted_nodes}

    def tok(t: int) -> str:
        if t == PAD_TOKEN:
            return "?"
        if decode is None:
            return str(t)
        text = decode(int(t)).replace("\n", "\\n")
        return repr(text[:10])[1:-1] if text.strip() else repr(text)

    labels = {}
    for u in range(n):
        lab = f"{names[u]}\n{tok(int(tree.tokens[u]))}"
        t = int(res.target_top1[u])
        if t != PAD_TOKEN:
            lab += f"\n→{tok(t)}"
        labels[u] = lab
    expanded = tree.has_children()
    colors = ["#2ca02c" if u in on_path else ("#9ecae1" if expanded[u] else "#eeeeee") for u in range(n)]
    edge_colors = ["#2ca02c" if (int(tree.parents[v]) in on_path and v in on_path) else _EDGE_GREY for v in range(1, n)]
    leaves = int(np.count_nonzero(~expanded))
    fig = Figure(figsize=(max(6.0, 1.0 * leaves + 2), 1.8 + 1.5 * (tree.num_steps + 1)), layout="constrained")
    ax = fig.add_subplot()
    _draw(ax, tree, colors, labels, edge_colors=edge_colors, node_size=1500)
    a = res.acceptance
    bonus = "not in dump" if a.bonus_token is None else tok(a.bonus_token)
    chosen = f"{why}\n" if why else ""
    ax.set_title(
        f"{run + ': ' if run else ''}round {res.name} (1 round) — accepted length {a.accepted_length}, stop {a.stop}, bonus {bonus}\n"
        f"{chosen}green = accepted path, blue = expanded, '→' = the target's top-1 at the node",
        fontsize=9,
        wrap=True,
    )
    return fig


GGUF_MAGIC = b"GGUF"


def _is_gguf(file: Path) -> bool:
    with open(file, "rb") as fh:
        return fh.read(len(GGUF_MAGIC)) == GGUF_MAGIC


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def load_decoder(path: str | Path) -> Decode:
    """A token-id → text function from a ``tokenizer.json`` (tokenizers) or a model directory.

    Loaded lazily, only when a picture with token text is asked for, with the small ``tokenizers``
    package: never transformers, which would bring torch into the offline side (tests/test_layers.py).
    """
    path = Path(path)
    file = path / "tokenizer.json" if path.is_dir() else path
    if file.is_file() and _is_gguf(file):
        # Rebuilding a tokenizer from GGUF metadata needs transformers (torch) and ~12 s: refuse it here.
        raise SpecReplayError(
            f"--tokenizer {path}: a GGUF model file, not a tokenizer; pass a tokenizer.json "
            "or a model directory holding one (transformers writes one: AutoTokenizer.from_pretrained("
            "DIR, gguf_file=NAME).save_pretrained(OUT))"
        )
    if path.is_dir() and not file.is_file():
        raise SpecReplayError(
            f"--tokenizer {path}: no tokenizer.json in this directory (transformers writes one: "
            "AutoTokenizer.from_pretrained(DIR).save_pretrained(OUT))"
        )
    if not file.is_file():
        raise SpecReplayError(f"--tokenizer {path}: not a tokenizer.json file or a directory holding one")

    # Bounded and checked before the package is needed, so a wrong file is named as wrong with or
    # without tokenizers installed, and a huge or hostile file is never handed to the Rust parser.
    def fail(message: str) -> SpecReplayError:
        return SpecReplayError(f"--tokenizer {file}: not a tokenizer.json ({message})")

    data = read_file_bytes(file, MAX_JSON_BYTES, fail)
    body = parse_json_bytes(data, fail)
    if not isinstance(body, dict) or not isinstance(body.get("model"), dict):
        raise fail('expected a JSON object with a "model" object, as tokenizers and transformers write it')
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise SpecReplayError(
            f"--tokenizer {file}: reading a tokenizer.json needs the tokenizers package (pip install tokenizers)"
        ) from None
    try:
        tk = Tokenizer.from_str(data.decode("utf-8-sig"))
    except Exception as exc:  # tokenizers raises a bare Exception for any unreadable file
        raise SpecReplayError(f"--tokenizer {file}: not a tokenizer.json ({_first_line(exc)})") from None
    return lambda t: tk.decode([int(t)], skip_special_tokens=False)
