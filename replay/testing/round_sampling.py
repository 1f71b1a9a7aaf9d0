"""Sampling-mode facts read off reference RoundResults (replay.engine.replayer), one round at a
time: the oracles of the batch path's own (replay.engine.batch.recorded), which tests hold equal.
No library module imports this (tests/test_layers.py).
"""

from __future__ import annotations

from collections.abc import Sequence


def node_logprob_gaps(results: Sequence) -> tuple[list[str], list[str]]:
    """Names of replayed rounds (RoundResults) whose walk cannot read node_logprobs at a recorded T:
    (those in the parents layout, whose validate rows are not tree nodes; those without the array)."""
    parents = [r.name for r in results if r.node_logp_unused]
    return parents, [r.name for r in results if r.node_logp is None and not r.node_logp_unused]
