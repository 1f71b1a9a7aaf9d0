"""The summaries of a reference replay (replay.testing.replayer's DirectoryReplay, its RoundResults,
their RoundSamplings from replay.engine.sampling.round_sampling), drawn with replay.engine.render's
lines: tests hold ``replay --summary`` and the sampling summary of ``replay --temperature``, made from
the batch arrays, to these bytes. No library module imports this (tests/test_layers.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from replay.engine.render import SummaryFigures, sampling_summary_arrays, summary_lines
from replay.testing.replayer import DirectoryReplay, RoundResult


def figures_of(results: Sequence[RoundResult]) -> SummaryFigures:
    """The summary's figures of replayed rounds, in their order."""
    return SummaryFigures(
        np.array([r.acceptance.accepted_length for r in results], dtype=np.int64),
        np.array([r.tree.num_nodes for r in results], dtype=np.int64),
        np.array([r.tree.num_steps for r in results], dtype=np.int64),
        sum(1 for r in results if r.acceptance.bonus_token is not None),
        dict(Counter(r.rebuilt.selection_summary for r in results)),
    )


def render_summary(rep: DirectoryReplay) -> list[str]:
    """``replay --summary``'s stdout lines of a reference replay."""
    return summary_lines(
        f"summary of {rep.directory}",
        rep.config_source,
        rep.config,
        rep.tree,
        figures_of(rep.results),
        rep.skipped,
        rep.notes,
    )


def sampling_summary(samplings, skipped: int = 0, no_scores: int = 0) -> list[str]:
    """Means over replayed rounds (RoundSampling objects) at T; see sampling_summary_arrays."""
    depth = max(len(s.length_ge_lo) for s in samplings)

    def ge(s, side):
        vals = (1.0, *(s.length_ge_lo if side == 0 else s.length_ge_hi))
        return list(vals) + [0.0] * (depth + 1 - len(vals))

    return sampling_summary_arrays(
        samplings[0].temperature,
        np.array([s.expected_lo for s in samplings]),
        np.array([s.expected_hi for s in samplings]),
        np.array([ge(s, 0) for s in samplings]),
        np.array([ge(s, 1) for s in samplings]),
        np.array([s.exact for s in samplings]),
        sum(s.from_node_logprobs for s in samplings),
        skipped,
        no_scores,
    )
