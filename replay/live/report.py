"""Human-readable end-of-run lines (the CLI prints them; the headline figures come from
replay.core.headline, as every command's)."""

from __future__ import annotations

from collections.abc import Sequence

from replay.core.headline import Headline, headline, headline_lines, metric_text

from .generate import Generation
from .run import BaselineComparison, RunSummary
from .timing import Timing


def generation_headline(generations: Sequence[Generation]) -> Headline | None:
    """The headline of speculative generations (None for target-only ones: no rounds). A live round
    always knows its target token, so the acceptance length is counted, never derived."""
    rounds = [r for g in generations for r in g.rounds]
    if not rounds:
        return None
    return headline([r.accepted_length for r in rounds], [r.num_nodes for r in rounds], [r.draft_steps for r in rounds])


def format_summary(
    summary: RunSummary,
    comparison: BaselineComparison | None = None,
    timing: Timing | None = None,
    speedup_lines: Sequence[str] | None = None,
    head: Headline | None = None,
) -> str:
    """``head`` (generation_headline) leads in vLLM's words; without it the mean accepted length stands
    alone. ``speedup_lines`` (the CLI passes analysis.cost.timings' lines, the words and numbers
    ``compare`` shows for the same manifest) replace the one end-to-end speedup line."""
    if head is not None:
        lines = headline_lines(head)
        committed = head.accepted + head.rounds
        if committed != summary.new_tokens:  # a sequence's last round may commit past its end
            lines.append(
                f"committed tokens: {committed} in {head.rounds} rounds (the rates above count them all); "
                f"{summary.new_tokens} kept as output, {committed - summary.new_tokens} cut at --max-new-tokens "
                "or after an EOS token"
            )
    else:
        lines = [f"mean accepted length (bonus excluded): {metric_text(summary.mean_accepted_length)}"]
    lines += [
        f"sequences:              {summary.sequences}",
        f"new tokens:             {summary.new_tokens}",
        f"rounds:                 {summary.rounds} (target forwards after prefill)",
        f"tokens/s:               {summary.tokens_per_s:.2f}{_range(summary.tokens_per_s_min, summary.tokens_per_s_max, summary.timed_passes, '.2f')}",
        f"draft time per round:   {summary.draft_s_per_round * 1e3:.2f} ms",
        f"verify time per round:  {summary.verify_s_per_round * 1e3:.2f} ms",
    ]
    if comparison is not None:
        same = {True: "yes", False: "NO", None: "n/a (sampling)"}[comparison.identical]
        base = comparison.baseline
        lines += [
            f"baseline tokens/s:      {base.tokens_per_s:.2f}{_range(base.tokens_per_s_min, base.tokens_per_s_max, base.timed_passes, '.2f')}"
            f" (target-only, {base.rounds} forwards)",
            *(
                speedup_lines
                if speedup_lines is not None
                else [
                    f"speedup (end to end):   {comparison.speedup:.3f}x{_range(comparison.speedup_min, comparison.speedup_max, summary.timed_passes, '.3f')}"
                ]
            ),
            f"outputs identical:      {same}",
        ]
    if timing is not None:
        load = timing.load_before
        busy = "" if timing.cpu_busy_percent is None else f", CPUs {timing.cpu_busy_percent:.0f}% busy while timing"
        lines.append(
            f"machine load:           {load.load_1m:.2f} (1-min average before timing) on {load.usable_cpus} CPUs{busy}"
        )
    return "\n".join(lines)


def _range(low: float | None, high: float | None, passes: int, fmt: str) -> str:
    if low is None or high is None or passes < 1:
        return ""
    return f" (median of {passes} passes; min {low:{fmt}}, max {high:{fmt}})"
