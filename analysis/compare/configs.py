"""Compare tree configs offline on a recorded run, and several runs side by side.

Each config is replayed exactly on every recorded round (analysis.compare.batch on the batch
arrays); ``summarize_arrays`` summarises: nodes, then the headline in vLLM's words (mean acceptance
length, draft acceptance rate, per-position acceptance rate; replay.core.headline), mean accepted
length and modelled speedup, each as a [lo, hi] pair that collapses to one value when every round
is decidable. ``with_speed`` adds the cost model's source and, on the recorded config's row, the measured speedup; ``speed_row``
puts a run's measured and modelled speedup side by side (words: analysis.tables.definitions).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from analysis.cost.model import CostModel
from analysis.cost.timings import Speedup
from analysis.tables.metrics import depth_acceptance, summary
from analysis.tables.runs import RoundSizes
from replay.core.config import TREE_DYNAMIC, TreeConfig, distinct_configs
from replay.core.config_grammar import parse_config_list, parse_configs
from replay.core.headline import (
    ACCEPTANCE_FIGURES,
    METRIC_DIGITS,
    fixed_text,
    greedy_rounds,
    per_position_rates,
    summary_row,
)
from replay.util.errors import SpecReplayError

from .subtree import beyond_recorded, is_contained

COMPARE_COLUMNS = [
    "config",
    "gamma",
    "top_head",
    "nodes",
    "contained",
    "rounds",
    "decided",
    "undecidable",
    "mean_acceptance_length_lo",
    "mean_acceptance_length_hi",
    "draft_acceptance_rate_lo",
    "draft_acceptance_rate_hi",
    "per_position_acceptance_rate_lo",  # lists: depth 1 .. the config's gamma
    "per_position_acceptance_rate_hi",
    "mean_accepted_length_lo",
    "mean_accepted_length_hi",
    "mean_round_cost_lo",
    "mean_round_cost_hi",
    "modelled_speedup_lo",  # modelled (cost model), never measured: the name says so
    "modelled_speedup_hi",
]

PER_ROUND_COLUMNS = ["config", "round", "decided", "lower", "upper", "stop", "steps_lo", "steps_hi", "rule", "reason"]


def summarize_arrays(
    cfg: TreeConfig,
    recorded: TreeConfig,
    cost: CostModel,
    decided: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    steps_lo: np.ndarray,
    steps_hi: np.ndarray,
    nodes_lo: np.ndarray,
    nodes_hi: np.ndarray,
) -> dict:
    """One comparison row (COMPARE_COLUMNS) from a config's per-round outcomes, in round order
    (decided: [R] bool; the others [R] int64).

    Undecidable rounds count at their lower bound in *_lo and at their upper bound in *_hi;
    modelled_speedup_lo pairs the fewest tokens with the highest cost, modelled_speedup_hi the reverse,
    and draft_acceptance_rate_lo the fewest accepted with the most drafted tokens. The acceptance
    length of a config is always accepted + 1 (derived: no dump holds the target's token of a
    config that was not run).
    """
    R = int(decided.shape[0])
    lo = lower.astype(np.float64)
    hi = upper.astype(np.float64)
    c_lo = cost.round_costs(steps_lo, nodes_lo)
    c_hi = cost.round_costs(steps_hi, nodes_hi)
    n_decided = int(decided.sum())
    nan = float("nan")
    lo_rates = per_position_rates(lower, cfg.gamma).tolist() if R else []
    hi_rates = per_position_rates(upper, cfg.gamma).tolist() if R else []
    # the fewest accepted with the most drafted tokens, and the reverse (SUMMARY_METRICS' formulas)
    least = summary_row(greedy_rounds(lower, {"num_nodes": nodes_hi}), names=ACCEPTANCE_FIGURES)
    most = summary_row(greedy_rounds(upper, {"num_nodes": nodes_lo}), names=ACCEPTANCE_FIGURES)
    return {
        "config": cfg.short(),
        "gamma": cfg.gamma,
        "top_head": list(cfg.top_head),
        "nodes": cfg.num_nodes,
        "contained": is_contained(cfg, recorded),
        "rounds": R,
        "decided": n_decided,
        "undecidable": R - n_decided,
        "mean_acceptance_length_lo": least["mean_acceptance_length"],
        "mean_acceptance_length_hi": most["mean_acceptance_length"],
        "draft_acceptance_rate_lo": least["draft_acceptance_rate"],
        "draft_acceptance_rate_hi": most["draft_acceptance_rate"],
        "per_position_acceptance_rate_lo": lo_rates,
        "per_position_acceptance_rate_hi": hi_rates,
        "mean_accepted_length_lo": least["mean_accepted_length"],
        "mean_accepted_length_hi": most["mean_accepted_length"],
        "mean_round_cost_lo": c_lo.mean() if R else nan,
        "mean_round_cost_hi": c_hi.mean() if R else nan,
        "modelled_speedup_lo": cost.speedup(lo.sum() + R, c_hi.sum()) if R else nan,
        "modelled_speedup_hi": cost.speedup(hi.sum() + R, c_lo.sum()) if R else nan,
    }


def is_own_tree(cfg: TreeConfig, recorded: TreeConfig, gamma_threshold: float | None) -> bool:
    """A dynamic recording's own config with no early stop simulated: each round's tree is the one
    the dump holds (its heads chosen round by round, padded slots absent), so its outcome and its
    drafted nodes are the replay's, not a walk of a static shape. A simulated gammaThreshold is our
    model's early stop, which a replay cannot apply: that row is the walk."""
    return recorded.tree_type == TREE_DYNAMIC and cfg == recorded and not gamma_threshold


NOT_COMPARABLE = "not comparable"  # what a table shows for a speedup whose two sides were not timed together


NO_TIMINGS = f"{NOT_COMPARABLE}: the dump records no timings (manifest totals of the run and of the target alone)"
NOT_RUN = f"{NOT_COMPARABLE}: this config was not run (only the recorded one has timings)"


def measured_status(measured: Speedup | None) -> str:
    """The ``measured_status`` cell: ``measured`` or ``not comparable: REASON`` (no totals in the dump,
    or sides not timed together: analysis.cost.timings.measured_speedup decides)."""
    if measured is None:
        return NO_TIMINGS
    return "measured" if measured.comparable else f"{NOT_COMPARABLE}: {measured.reason}"


def with_speed(table: pd.DataFrame, recorded: TreeConfig, cost: CostModel, measured: Speedup | None) -> pd.DataFrame:
    """The comparison table (COMPARE_COLUMNS) with the speed columns: every row's cost source, and the
    measured speedups on the recorded config's row only (no other config was run; NaN there, and
    NaN with ``measured_status`` saying why when the two sides were not timed together)."""
    out = table.copy()
    is_recorded = (out["config"] == recorded.short()) & out["top_head"].map(
        lambda h: tuple(h) == tuple(recorded.top_head)
    )
    out["cost_source"] = cost.source
    nan = float("nan")
    out["measured_speedup"] = [measured.decode if (r and measured) else nan for r in is_recorded]
    out["measured_speedup_wall"] = [measured.wall if (r and measured) else nan for r in is_recorded]
    out["measured_status"] = [measured_status(measured) if r else NOT_RUN for r in is_recorded]
    return out


def simulated_threshold_note(gamma_threshold: float | None) -> str:
    """What a comparison that simulates an early stop says of it ("" when it inherits the recorded ones)."""
    if not gamma_threshold:  # None, or 0: the config grammar's "off"
        return ""
    return (
        f"gammaThreshold {gamma_threshold:g} simulated for every config (our model of the early stop, "
        "docs/analysis.md), so the first row can differ from the replay"
    )


def first_row_words(recorded: str, gamma_threshold: float | None) -> str:
    """compare's header words for its first row (the recorded config ``recorded``), with the simulated stop."""
    note = simulated_threshold_note(gamma_threshold)
    return f"recorded {recorded} (first row)" + (f"; {note}" if note else "")


def unsimulated_threshold_notes(
    configs: Sequence[TreeConfig], recorded: TreeConfig, gamma_threshold: float | None, label: str
) -> list[str]:
    """One line per compared config (the recorded one aside: its stops are in the dump) whose own
    gammaThreshold (``@X``) is not the one simulated: compare simulates one threshold for every config,
    only with --gamma-threshold."""
    notes = []
    for cfg in configs:
        own = cfg.gamma_threshold
        if cfg == recorded or own <= 0 or own == gamma_threshold:
            continue
        done = (
            f"simulates gammaThreshold {gamma_threshold:g} for every config"
            if gamma_threshold is not None
            else "inherits the recorded early stops only"
        )
        notes.append(
            f"{label}: {cfg.short()} states gammaThreshold {own:g}, which this comparison does not simulate (it "
            f"{done}); pass --gamma-threshold {own:g} to simulate it"
        )
    return notes


def beyond_recorded_notes(
    table: pd.DataFrame, configs: Sequence[TreeConfig], recorded: TreeConfig, label: str
) -> list[str]:
    """One line per compared config that is deeper or wider than ``recorded`` and so cannot be
    replayed on every round: the dump holds no draft rows (or columns) the recording never made.
    ``table``: compare_run's summary, one row per config in ``configs``' order."""
    notes = []
    for cfg, (_, row) in zip(configs, table.iterrows()):
        why = beyond_recorded(cfg, recorded)
        if why is None or not int(row["undecidable"]):
            continue  # contained, or the dump's extra columns decided every round
        notes.append(
            f"{label}: {cfg.short()} is deeper or wider than the recorded {recorded.short()} ({why}); the dump holds no "
            f"draft rows beyond the recording, so {int(row['undecidable'])} of {int(row['rounds'])} round(s) are "
            "undecidable and its figures are lo..hi bounds; to decide them, record a dump with a config that contains it"
        )
    return notes


def modelled_speedup(sizes: RoundSizes, cost: CostModel) -> float:
    """The recorded rounds' modelled speedup: Σ (L_r + 1) · t_verify(1) / Σ (steps_r · t_draft + t_verify(nodes_r + 1)).
    sizes: ([R] accepted length, [R] draft steps, [R] draft nodes) int64 (analysis.tables.runs.LabelledRun.sizes)."""
    lengths, steps, nodes = sizes
    if not lengths.shape[0]:
        return float("nan")
    tokens = int(lengths.sum()) + int(lengths.shape[0])
    return cost.speedup(tokens, float(np.sum(cost.round_cost(steps, nodes))))


def speed_row(label: str, sizes: RoundSizes, cost: CostModel, measured: Speedup | None) -> dict:
    """One run's speedups side by side: modelled (with its cost source) and measured (NaN when the
    dump has no target-only baseline timed together with the run; ``measured_status`` says why).
    sizes: as modelled_speedup's."""
    nan = float("nan")
    return {
        "run": label,
        "rounds": int(sizes[0].shape[0]),
        "modelled_speedup": modelled_speedup(sizes, cost),
        "cost_source": cost.source,
        "measured_speedup": measured.decode if measured else nan,
        "measured_speedup_wall": measured.wall if measured else nan,
        "measured_status": measured_status(measured),
    }


SPEEDUP_DIGITS = 3  # decimals of a speedup, as every command prints one (x.xxx)


def format_bounds(lo: float, hi: float, digits: int = METRIC_DIGITS) -> str:
    """``1.6200`` when exact, ``1.5200..1.7000`` when the dump leaves a range: an acceptance figure
    as every command prints it (replay.core.headline.METRIC_DIGITS); a speedup with SPEEDUP_DIGITS."""
    if np.isnan(lo):
        return "n/a"
    if np.isclose(lo, hi, rtol=0, atol=10 ** -(digits + 3)):
        return fixed_text(lo, digits)
    return f"{fixed_text(lo, digits)}..{fixed_text(hi, digits)}"


MEASURED_HEADER = "measured speedup (decode only)"


def top_rows(table: pd.DataFrame, n: int, by: str) -> pd.DataFrame:
    """compare --top: per run, in the table's run order, its recorded config (the first row) and the
    ``n`` others with the largest ``by``."""
    parts = []
    for _, rows in table.groupby("run", sort=False):
        parts += [rows.head(1), rows.iloc[1:].sort_values(by, ascending=False).head(n)]
    return pd.concat(parts, ignore_index=True)


def compare_display(df: pd.DataFrame) -> pd.DataFrame:
    """The comparison table with each [lo, hi] pair as one readable column; the speedup column is
    headed "modelled speedup", and "measured speedup (decode only)" follows it when the recorded row
    has one ("not comparable" when its two sides were not timed together)."""
    out = df[["config", "top_head", "nodes", "contained", "rounds", "undecidable"]].copy()
    out["top_head"] = out["top_head"].map(lambda h: "[" + ",".join(str(v) for v in h) + "]")
    for name in ("mean_acceptance_length", "draft_acceptance_rate"):
        out[name] = [format_bounds(a, b) for a, b in zip(df[f"{name}_lo"], df[f"{name}_hi"])]
    out["per_position_acceptance_rate"] = [
        " ".join(format_bounds(a, b) for a, b in zip(lo, hi)) or "n/a"
        for lo, hi in zip(df["per_position_acceptance_rate_lo"], df["per_position_acceptance_rate_hi"])
    ]
    out["mean_accepted_length"] = [
        format_bounds(a, b) for a, b in zip(df["mean_accepted_length_lo"], df["mean_accepted_length_hi"])
    ]
    out["modelled speedup"] = [
        format_bounds(a, b, SPEEDUP_DIGITS) for a, b in zip(df["modelled_speedup_lo"], df["modelled_speedup_hi"])
    ]
    if "measured_status" in df.columns and (~df["measured_status"].isin((NO_TIMINGS, NOT_RUN))).any():
        out[MEASURED_HEADER] = [
            f"{v:.{SPEEDUP_DIGITS}f}" if s == "measured" else ("" if s == NOT_RUN else NOT_COMPARABLE)
            for v, s in zip(df["measured_speedup"], df["measured_status"])
        ]
    return out


def strategies_display(df: pd.DataFrame) -> pd.DataFrame:
    """Dynamic-gamma strategy rows (StrategyResult.to_row) with each [lo, hi] pair as one column."""
    cols = [
        c
        for c in ("run", "strategy", "name", "ema_window", "config", "rounds", "undecidable_rounds")
        if c in df.columns
    ]
    out = df[cols].copy()
    for name in ("mean_gamma", "mean_acceptance_length", "mean_accepted_length"):
        out[name] = [format_bounds(a, b) for a, b in zip(df[f"{name}_lo"], df[f"{name}_hi"])]
    out["modelled speedup"] = [
        format_bounds(a, b, SPEEDUP_DIGITS) for a, b in zip(df["modelled_speedup_lo"], df["modelled_speedup_hi"])
    ]
    return out


def runs_side_by_side(rounds: pd.DataFrame) -> pd.DataFrame:
    """Summary metrics and per-depth rates of several runs as columns (one row per metric)."""
    s = summary(rounds).set_index("run")
    d = depth_acceptance(rounds)
    parts = [s.T]
    for col, row in (
        ("per_position_acceptance_rate", "per_position_acceptance_rate"),
        ("conditional", "conditional_acceptance"),
    ):
        p = d.pivot(index="depth", columns="run", values=col)
        p.index = [f"{row}_depth_{k}" for k in p.index]
        parts.append(p[s.index])
    out = pd.concat(parts)
    out.columns.name = None
    out.index.name = "metric"
    return out


# ---------------------------------------------------------------------------------------------
# Config arguments: files, topKSpec lists, grids.


def parse_config_arg(text: str, option: str = "--configs", notes: list[str] | None = None) -> list[TreeConfig]:
    """A config given on the command line, in any form of replay.core.config_grammar (a specTree file or
    a JSON list yields all its trees); notes: the misspelt keys' warning (parse_configs)."""
    return parse_configs(text, option, notes)


def parse_config_list_arg(
    text: str, option: str = "--grid", notes: list[str] | None = None
) -> tuple[list[TreeConfig], list[str]]:
    """An explicit list ``A;B;C`` of configs (replay.core.config_grammar, the same as ``sweep --grid``)."""
    return parse_config_list(text, option, notes)


def is_generator_text(text: str) -> bool:
    """``compare --grid``'s deprecated generator spelling (``root=2,4 heads=1,2``), which ``--generate`` takes."""
    return "=" in text


_GRID_KEYS = ("root", "heads", "width", "gamma")
_GRID_ITEM = re.compile(r"^\s*(\w+)\s*=\s*([\d,\s:]+)$")


def _grid_values(key: str, text: str, option: str) -> list[int]:
    values: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if ":" in part:
            a, _, b = part.partition(":")
            if not (a.strip().isdigit() and b.strip().isdigit()):
                raise SpecReplayError(f"{option} {key}: expected a range like 2:6, got {part!r}")
            values.extend(range(int(a), int(b) + 1))
        elif part:
            values.append(int(part))
    if not values or any(v < 1 for v in values):
        raise SpecReplayError(f"{option} {key}: expected positive integers like 1,2,4 or 2:6, got {text!r}")
    return sorted(set(values))


def generate_funnels(text: str, option: str = "--generate") -> list[TreeConfig]:
    """``"root=2,4,6 heads=1,2 width=1,2 gamma=1:3"``: funnel trees with one root width, then
    ``heads`` parents per step each keeping ``width`` children (heads capped by the level size)."""
    spec: dict[str, list[int]] = {"root": [6], "heads": [1], "width": [1], "gamma": [3]}
    for item in text.replace(";", " ").split():
        m = _GRID_ITEM.match(item)
        if not m or m.group(1) not in _GRID_KEYS:
            raise SpecReplayError(
                f"{option}: cannot read {item!r}; expected KEY=VALUES with KEY in {', '.join(_GRID_KEYS)}"
            )
        spec[m.group(1)] = _grid_values(m.group(1), m.group(2), option)
    out = []
    for g in spec["gamma"]:
        for root in spec["root"]:
            for h in spec["heads"]:
                for w in spec["width"]:
                    rows, heads, level = [[root]], [1], root
                    for _ in range(1, g):
                        hh = min(h, level)
                        rows.append([w] * hh)
                        heads.append(hh)
                        level = hh * w
                    out.append(TreeConfig.from_lists(rows, heads))
    return distinct_configs(out)
