"""Human-readable end-of-run lines (the CLI prints them; nothing here computes)."""

from __future__ import annotations

from .run import Comparison, RunSummary


def format_summary(summary: RunSummary, comparison: Comparison | None = None) -> str:
    lines = [
        f"sequences:              {summary.sequences}",
        f"new tokens:             {summary.new_tokens}",
        f"rounds:                 {summary.rounds}",
        f"mean accepted length:   {summary.mean_accepted_length:.3f} (draft tokens per round, bonus excluded)",
        f"block efficiency:       {summary.block_efficiency:.3f} (committed tokens per target forward)",
        f"tokens/s:               {summary.tokens_per_s:.2f}",
        f"draft time per round:   {summary.draft_s_per_round * 1e3:.2f} ms",
        f"verify time per round:  {summary.verify_s_per_round * 1e3:.2f} ms",
    ]
    if comparison is not None:
        same = {True: "yes", False: "NO", None: "n/a (sampling)"}[comparison.identical]
        lines += [
            f"baseline tokens/s:      {comparison.baseline.tokens_per_s:.2f} (target-only, {comparison.baseline.rounds} forwards)",
            f"speedup:                {comparison.speedup:.3f}x",
            f"outputs identical:      {same}",
        ]
    return "\n".join(lines)
