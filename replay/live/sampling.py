"""Lossless acceptance at temperature > 0 for deterministic (top-k) children: the rule and why it
is lossless are in docs/live-harness.md, "Sampling (temperature > 0) and why it is lossless".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import torch

from replay.core.acceptance import Acceptance
from replay.core.tree import Tree
from replay.core.vocab import BONUS_CORRECTION, BONUS_LEAF, STOP_LEAF, STOP_MISMATCH

from .checks import check_shape


def target_probs(logits: torch.Tensor, temperature: float) -> np.ndarray:
    """[n, V] float64 probabilities of softmax(logits / temperature); logits [n, V]."""
    check_shape("logits", logits, (None, None))
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for sampling, got {temperature}")
    return torch.softmax(logits.double() / temperature, dim=-1).cpu().numpy()  # logits' shape, float64


def sample_token(probs: np.ndarray, rng: np.random.Generator) -> int:
    """One draw from ``probs`` ([V] float64, sums to 1)."""
    check_shape("probs", probs, (None,))
    return int(rng.choice(probs.shape[0], p=probs))


class NodeRows(Protocol):
    """Target logits per tree node, e.g. ``replay.live.verify.TargetLogits`` (rows made on demand)."""

    num_rows: int

    def rows(self, nodes: Sequence[int]) -> torch.Tensor: ...  # [len(nodes), V] float32


def accept_sampled(
    tree: Tree, logits: torch.Tensor | NodeRows, temperature: float, rng: np.random.Generator
) -> Acceptance:
    """Walk the tree drawing from the target at each visited node.

    logits: [num_nodes + 1, V] target logits in tree order (the verification forward's output),
    or a NodeRows giving them per node.
    Only visited rows are turned into probabilities: a full [n, V] float64 softmax of a 150k
    vocabulary would cost more than the walk.
    """
    if isinstance(logits, torch.Tensor):
        check_shape("logits", logits, (tree.tokens.shape[0], None))
        row = lambda u: logits[u : u + 1]  # noqa: E731
    else:
        if logits.num_rows != tree.tokens.shape[0]:
            raise ValueError(f"logits: expected {tree.tokens.shape[0]} rows, got {logits.num_rows}")
        row = lambda u: logits.rows([u])  # noqa: E731
    has_children = tree.has_children()
    node, path = 0, []
    while True:
        draw = sample_token(target_probs(row(node), temperature)[0], rng)
        kids = tree.children(node)
        hit = kids[tree.tokens[kids] == draw]
        if hit.shape[0] == 0:
            kind, stop = (BONUS_CORRECTION, STOP_MISMATCH) if has_children[node] else (BONUS_LEAF, STOP_LEAF)
            tokens = tuple(int(tree.tokens[u]) for u in path)
            return Acceptance(tuple(path), tokens, draw, kind, stop)
        node = int(hit[0])
        path.append(node)
