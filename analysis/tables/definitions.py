"""Every metric specreplay prints, defined once in words: its name (the table column or JSON key), a
short label for plots and headers, its formula as text, its meaning and the engines' name for the same
number. The summary metrics' formulas as code are replay.core.headline.SUMMARY_METRICS, one per
metric (the run-time layers below analysis use them too); SUMMARY_NAMES is their order.

``stats``, ``compare``, ``report`` and the plots take their words from here; docs/vocabulary.md
repeats the table for readers (tests/test_analysis_definitions.py keeps the two equal).
Notation (docs/analysis.md): R rounds; round r has accepted length L_r (draft tokens on the
accepted path, the bonus excluded), b_r = 1 when the dump holds its bonus token, nodes_r draft
nodes (root excluded: the draft tokens the target verified) and steps_r draft steps.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from replay.core.headline import SUMMARY_METRICS


@dataclass(frozen=True)
class Definition:
    name: str  # table column / JSON key
    label: str  # short words for plot axes, legends and table headers
    formula: str
    meaning: str
    engines: str  # the engines' name for the same number ("" when no engine reports it)


DEFINITIONS: tuple[Definition, ...] = (
    Definition(
        "mean_acceptance_length",
        "mean acceptance length (bonus included)",
        "(1/R) Σ_r (L_r + 1)",
        "tokens a round commits, i.e. per target forward: the accepted draft tokens and the one token the target "
        "adds (correction or leaf bonus); derived as accepted + 1 where the dump does not hold that token "
        "(bonus_known_fraction < 1; outputs say 'derived'); = mean_accepted_length + 1",
        "vLLM 'Mean acceptance length' (1 + accepted / drafts), SGLang 'accept length', HiAI block_efficiency "
        "(committed tokens per target forward)",
    ),
    Definition(
        "draft_acceptance_rate",
        "draft acceptance rate",
        "Σ_r L_r / Σ_r nodes_r",
        "share of the drafted tokens that were accepted; drafted = every draft node of the tree (root "
        "excluded), i.e. the draft tokens the target verified; for a chain nodes_r = steps_r",
        "vLLM 'Draft acceptance rate' (num_accepted_tokens / num_draft_tokens), llama.cpp 'draft acceptance rate' (accepted / generated)",
    ),
    Definition(
        "mean_accepted_length",
        "mean accepted length (bonus excluded)",
        "(1/R) Σ_r L_r",
        "draft tokens accepted per round; the target's own token (bonus or correction) is not counted",
        "vLLM's mean acceptance length − 1",
    ),
    Definition(
        "per_position_acceptance_rate",
        "per-position acceptance rate P(L ≥ d)",
        "#{r : L_r ≥ d} / R",
        "share of all rounds whose accepted path reached depth d (our former 'cumulative acceptance')",
        "vLLM 'Per-position acceptance rate' at position d",
    ),
    Definition(
        "conditional",
        "conditional acceptance P(L ≥ d | L ≥ d−1)",
        "#{r : L_r ≥ d} / #{r : L_r ≥ d − 1}",
        "accepted at depth d among the rounds that reached depth d − 1",
        "",
    ),
    Definition(
        "conditional_when_expanded",
        "conditional acceptance when the node had children",
        "#{r : L_r ≥ d} / attempts_d",
        "as conditional, over the rounds whose path reached depth d − 1 at a node with children (a leaf makes no attempt)",
        "",
    ),
    Definition(
        "bonus_known_fraction", "bonus known", "(1/R) Σ_r b_r", "share of rounds whose bonus token the dump holds", ""
    ),
    Definition(
        "full_depth_fraction",
        "full depth",
        "#{r : L_r ≥ steps_r} / R",
        "share of rounds whose path reached the tree's last level",
        "",
    ),
    Definition(
        "mean_num_nodes", "drafted tokens per round", "(1/R) Σ_r nodes_r", "draft nodes per round, root excluded", ""
    ),
    Definition(
        "mean_num_steps",
        "draft steps per round",
        "(1/R) Σ_r steps_r",
        "draft steps per round (fewer than gamma after an early stop)",
        "",
    ),
    Definition(
        "modelled_speedup",
        "modelled speedup (× target alone)",
        "Σ_r (L_r + 1) · t_verify(1) / Σ_r (steps_r · t_draft + t_verify(nodes_r + 1))",
        "speedup predicted by a cost model (measured timings when the dump carries them, else the default "
        "relative cost); the only speedup a config that was not run can have",
        "",
    ),
    Definition(
        "measured_speedup",
        "measured speedup (decode only, prefill excluded)",
        "(T_base − P_base) / N_base ÷ (T_spec − P_spec) / N_spec",
        "measured decode seconds per token of the target alone over those of the speculative run, prefill "
        "excluded (manifest totals: T total_s, P prefill_s, N new_tokens); only when both sides were timed "
        "in one interleaved session, else 'not comparable'",
        "",
    ),
    Definition(
        "measured_speedup_wall",
        "measured speedup (end to end, prefill included)",
        "median over passes p of (N_spec,p / T_spec,p) ÷ (N_base,p / T_base,p)",
        "the harness's own 'speedup' (generate, sweep): tokens per second over those of the target alone, prefill "
        "included, pass by pass in one interleaved session (totals.timing), else 'not comparable'",
        "",
    ),
)

BY_NAME: dict[str, Definition] = {d.name: d for d in DEFINITIONS}

# The metric tables analysis.tables.metrics.all_metrics gives, in the order stats prints them.
METRIC_TABLES = (
    "summary",
    "accepted_length",
    "depth_acceptance",
    "rank_of_hit",
    "hit_outcome",
    "parent_slot",
    "slot_hits",
    "node_hits",
)

# The round-table columns each round metric of analysis.tables.metrics reads (summary,
# accepted_length_distribution, depth_acceptance). A run whose node metrics are counted block by
# block keeps only these of its round table (analysis.tables.batch.SLIM_ROUND_COLUMNS is built
# from them): a summary metric reading another round column names it here, else stats stops on
# "missing column(s)"; stats --temperature carries the same "summary" columns of the rounds it uses
# (analysis.tables.sampling.RunSampling.rounds; a column a replayed result gives alone:
# analysis.tables.batch.result_columns).
ROUND_COLUMNS_READ = {
    "summary": ("run", "accepted_length", "bonus_known", "num_nodes", "num_steps"),
    "accepted_length": ("run", "accepted_length"),
    "depth_acceptance": ("run", "accepted_length", "stop", "num_steps"),
}

# The summary metrics in the order stats prints them (their formulas: SUMMARY_METRICS).
SUMMARY_NAMES = tuple(m.name for m in SUMMARY_METRICS)
DEPTH_NAMES = ("per_position_acceptance_rate", "conditional", "conditional_when_expanded")
HEADLINE_NAMES = (
    "mean_acceptance_length",
    "draft_acceptance_rate",
    "per_position_acceptance_rate",
)  # what outputs lead with


def definition(name: str) -> Definition:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no definition for {name!r}; known: {', '.join(BY_NAME)}") from None


def label(name: str) -> str:
    """The short words for ``name`` on plots and headers."""
    return definition(name).label


def definitions_text(names: Iterable[str], indent: str = "  ") -> str:
    """Two lines per metric: ``name = formula`` and its meaning with the engines' name."""
    lines = []
    for name in names:
        d = definition(name)
        lines.append(f"{indent}{d.name} = {d.formula}")
        engines = f" [engines: {d.engines}]" if d.engines else ""
        lines.append(f"{indent}    {d.meaning}{engines}")
    return "\n".join(lines)


def definitions_rows(names: Iterable[str] | None = None) -> list[dict[str, str]]:
    """name, formula, meaning, engines per metric (every one when ``names`` is None)."""
    chosen = DEFINITIONS if names is None else [definition(n) for n in names]
    return [{"name": d.name, "formula": d.formula, "meaning": d.meaning, "engines": d.engines} for d in chosen]
