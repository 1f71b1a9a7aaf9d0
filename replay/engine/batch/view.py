"""One replayed round of a batch as a small view: its tree, the target's top-1 at each node and its
acceptance, read from a RoundBatch and the BatchResult that replay_batch made of it.

Drawing a round (replay.engine.render.render_round) needs the tree node by node; the batch replay
keeps it as arrays (the level tokens in the draft stacks, each expanded slot's node in
``BatchResult.expanded``). ``round_view`` turns one round of those arrays into the view, rebuilding
nothing: the acceptance is the batch's own (accepted nodes, bonus, stop), never walked again here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from replay.core.acceptance import Acceptance, target_top1_per_node
from replay.core.tree import Tree
from replay.io.dumpnames import Key
from replay.io.roundbatch import RoundBatch
from replay.util.words import round_name

from .codes import ERR_OK
from .kernel import level_tokens
from .result import BatchResult
from .shapes import TreeShape, round_tree


@dataclass(frozen=True, eq=False)
class RoundView:
    """What drawing one replayed round needs (replay.engine.render.render_round)."""

    name: str  # "A_B", the validate file's numbers
    tree: Tree  # the rebuilt tree, nodes in tree order
    acceptance: Acceptance  # the batch replay's outcome of the round
    layout: str  # "parents" or "all"
    layout_source: str  # "stated" or "detected"
    target_top1: np.ndarray  # [num_nodes + 1] int64 the target's top-1 at each node, PAD_TOKEN without a row
    selection_summary: str  # how draft steps 1.. chose their expanded nodes (BatchResult.selection_summary)
    notes: tuple[str, ...]  # the round's own notes (BatchResult.notes)


def round_view(batch: RoundBatch, result: BatchResult, i: int, record: dict | None = None) -> RoundView:
    """Round ``i`` of ``batch`` (``result`` = its batch replay; the round must be replayed, error 0);
    ``record``: the round's record (``result.round_json(i)``) when made already."""
    if result.error[i] != ERR_OK:
        raise ValueError(f"round {round_name(batch.key(i))} was rejected by the batch replay: it has no tree to draw")
    if result.expanded is None:
        raise ValueError("the batch result kept no expanded slots (BatchResult.expanded): its trees are unknown")
    rec = result.round_json(i) if record is None else record
    shape = result.shapes[int(result.shape_index[i])]
    tree = _round_tree(batch, result.expanded[:, i], shape, i)
    acceptance = Acceptance(
        tuple(rec["accepted_nodes"]), tuple(rec["accepted_tokens"]), rec["bonus_token"], rec["bonus_kind"], rec["stop"]
    )
    return RoundView(
        rec["round"],
        tree,
        acceptance,
        rec["layout"],
        rec["layout_source"],
        _target_top1(batch, tree, rec["layout"], shape, i),
        rec["selection"],
        tuple(rec["notes"]),
    )


def round_views(batch: RoundBatch, result: BatchResult) -> dict[Key, RoundView]:
    """Every replayed round of ``batch`` by its key (the keys of one run are distinct)."""
    ok = np.flatnonzero(result.ok).tolist()
    return {batch.key(i): round_view(batch, result, i, rec) for i, rec in zip(ok, result.iter_json())}


def _round_tree(batch: RoundBatch, slots: np.ndarray, shape: TreeShape, i: int) -> Tree:
    """The Tree of round ``i`` from its level tokens and its expanded slots.

    slots: [H] int32 the round's column of BatchResult.expanded: slot j of draft step s (row
    shape.head_offsets[s] + j) holds the level-local node the replay expanded there."""
    chosen = [slots[o : o + h].astype(np.int64) for o, h in zip(shape.head_offsets, shape.heads)]  # [h_s]
    levels = [level_tokens(st, m, i, i + 1)[:, 0] for st, m in zip(batch.steps, shape.maps)]  # [L_{s+1}] each
    tokens = np.concatenate([[int(batch.root_tokens[i])], *levels]).astype(np.int64)
    tree = round_tree(shape, chosen, tokens)
    return replace(tree, logprobs=_path_logprobs(batch, shape, tree.parents, i))


def _path_logprobs(batch: RoundBatch, shape: TreeShape, parents: np.ndarray, i: int) -> np.ndarray:
    """[N+1] float64 each node's path log-probability, summed root first as the rebuild sums them
    (0 at the root); NaN from the first draft step without scores on. parents: [N+1] int64 the round's."""
    out = np.full(shape.num_nodes + 1, np.nan)
    out[0] = 0.0
    for s, (st, m) in enumerate(zip(batch.steps, shape.maps)):
        if st.logp is None:
            break
        lo, hi = shape.starts[s + 1], shape.starts[s + 1] + m.slot_rank.shape[0]
        out[lo:hi] = out[parents[lo:hi]] + st.logp[m.slot_parent, m.slot_rank, i].astype(np.float64)
    return out


def _target_top1(batch: RoundBatch, tree: Tree, layout: str, shape: TreeShape, i: int) -> np.ndarray:
    """[N+1] int64 the target's top-1 at each node: column 0 of the rows the round's layout uses."""
    rows = shape.validate_rows(layout)
    ids = np.asarray(batch.validate.ids[:rows, :, i], dtype=np.int64)  # [rows, K] the round's used rows
    return target_top1_per_node(tree, ids, layout)
