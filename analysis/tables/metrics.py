"""Acceptance metrics, each computed from the round/node tables (analysis.tables.build), per run.

Every metric's name, formula and engine name live in analysis.tables.definitions (docs/vocabulary.md
and docs/analysis.md repeat them); the summary formulas and the per-position rate are computed by
replay.core.headline (SUMMARY_METRICS, per_position_rates), as every command's headline; the
docstrings repeat the formula in short. Notation: R rounds,
L_r the accepted length of round r (bonus excluded), b_r = 1 when the dump holds round r's bonus
token, else 0, nodes_r its draft nodes (root excluded).

The round metrics are here; the node metrics are finished by analysis.tables.path_metrics (what
the accepted path met at each depth) and analysis.tables.slot_hits (which slots and nodes it went
through). all_metrics gives every table; combine_node_counts finishes the node metrics from the
counts of blocks of rounds (a loaded run's, from its batch arrays: analysis.tables.node_counts, the
one run-time count; replay.testing.frame_counts counts a node table as the reference).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from replay.core.headline import (
    EXPECTED,
    GREEDY_ONLY,
    SAME_AT_ANY_T,
    greedy_rounds,
    metric_text,
    per_position_rates,
    summary_row,
)
from replay.core.vocab import DEPTH_RULE, STOP_MISMATCH, STOP_NO_ROW

from .build import IN_UNEXPANDED, require_columns
from .definitions import ROUND_COLUMNS_READ, SUMMARY_NAMES
from .intervals import wilson
from .node_counts import no_named_counts
from .path_metrics import RANK_KEYS, SLOT_KEYS, hit_outcome_finish, parent_slot_finish, rank_of_hit_finish
from .slot_hits import node_hits_finish, slot_hits_finish


def summary(rounds: pd.DataFrame) -> pd.DataFrame:
    """One row per run, the headline figures first: each SUMMARY_METRICS formula on the run's rounds.

    mean_acceptance_length  = (1/R) Σ (L_r + 1)        the target's token counted (vLLM's); derived
                                                       where bonus_known_fraction < 1
    draft_acceptance_rate   = Σ L_r / Σ nodes_r        accepted over drafted (verified) draft tokens
    mean_accepted_length    = (1/R) Σ L_r
    bonus_known_fraction    = (1/R) Σ b_r
    full_depth_fraction     = share of rounds whose path reached the tree's last level
    """
    names = ROUND_COLUMNS_READ["summary"]
    require_columns(rounds, names, "rounds")
    rows = []
    for run, g in rounds.groupby("run", sort=False):
        lengths = g["accepted_length"].to_numpy(dtype=np.int64)
        columns = {c: g[c].to_numpy() for c in names if c != "run"}
        figures = summary_row(greedy_rounds(lengths, columns), (EXPECTED, SAME_AT_ANY_T, GREEDY_ONLY))
        rows.append({"run": run, "rounds": len(g), **figures})
    return pd.DataFrame(rows, columns=["run", "rounds", *SUMMARY_NAMES])


def derived_notes(summary_table: pd.DataFrame) -> list[str]:
    """One line per run whose mean acceptance length is derived (some bonus token not in the dump)."""
    out = []
    for _, row in summary_table.iterrows():
        if row["bonus_known_fraction"] < 1:
            known = round(row["bonus_known_fraction"] * row["rounds"])
            out.append(
                f"{row['run']}: mean_acceptance_length {row['mean_acceptance_length']:.4f} is derived (accepted + 1): "
                f"the dump holds the bonus token of {known} of {int(row['rounds'])} round(s)"
            )
    return out


def accepted_length_distribution(rounds: pd.DataFrame) -> pd.DataFrame:
    """P(L = k) per run for k = 0..max L over all runs: columns run, accepted_length, rounds, fraction."""
    require_columns(rounds, ROUND_COLUMNS_READ["accepted_length"], "rounds")
    top = int(rounds["accepted_length"].max()) if len(rounds) else 0
    rows = []
    for run, grp in rounds.groupby("run", sort=False):
        counts = np.bincount(grp["accepted_length"].to_numpy(dtype=np.int64), minlength=top + 1)
        for k, c in enumerate(counts):
            rows.append({"run": run, "accepted_length": k, "rounds": int(c), "fraction": c / len(grp)})
    return pd.DataFrame(rows, columns=["run", "accepted_length", "rounds", "fraction"])


def depth_acceptance(rounds: pd.DataFrame) -> pd.DataFrame:
    """Per run and depth d = 1..the run's max steps, two rates the field often mixes up:

    per_position_acceptance_rate_d = #{r : L_r >= d} / R      reached depth d, over all rounds
                                                              (vLLM's name; "cumulative" acceptance)
    conditional_d = #{r : L_r >= d} / #{r : L_r >= d-1}       accepted at d given d-1 was reached
    conditional_when_expanded_d = #{r : L_r >= d} / attempts_d, where attempts_d counts rounds
        whose path reached depth d-1 at a node that had children (a leaf at d-1 is no attempt).
    per_position_acceptance_rate_d = Π_{k<=d} conditional_k.

    Depth d is the d-th draft token (1 = the root's children; DESIGN.md's level d). Each rate has
    its 95% Wilson interval (analysis.tables.intervals) in ``RATE_ci95_lo`` / ``RATE_ci95_hi``; its n is
    the rate's denominator column (DEPTH_RATE_N): a 0.667 from 3 rounds shows as [0.208, 0.939].
    """
    require_columns(rounds, ROUND_COLUMNS_READ["depth_acceptance"], "rounds")
    rows = []
    for run, grp in rounds.groupby("run", sort=False):
        max_depth = int(grp["num_steps"].max())  # a run's own depth: others may be deeper
        L = grp["accepted_length"].to_numpy(dtype=np.int64)
        had_children = grp["stop"].isin([STOP_MISMATCH, STOP_NO_ROW]).to_numpy()
        total = L.shape[0]
        per_position = per_position_rates(L, max_depth)  # [max_depth] P(L >= d), d = 1..max_depth
        for d in range(1, max_depth + 1):
            reached = int(np.count_nonzero(L >= d))
            prev = int(np.count_nonzero(L >= d - 1))
            attempts = reached + int(np.count_nonzero((L == d - 1) & had_children))
            rows.append(
                {
                    "run": run,
                    "depth": d,
                    "rounds": total,
                    "reached_prev": prev,
                    "attempts": attempts,
                    "reached": reached,
                    "conditional": reached / prev if prev else np.nan,
                    "per_position_acceptance_rate": float(per_position[d - 1]),
                    "conditional_when_expanded": reached / attempts if attempts else np.nan,
                }
            )
    cols = [
        "run",
        "depth",
        "rounds",
        "reached_prev",
        "attempts",
        "reached",
        "conditional",
        "per_position_acceptance_rate",
        "conditional_when_expanded",
    ]
    out = pd.DataFrame(rows, columns=cols)
    for rate, n in DEPTH_RATE_N.items():
        lo, hi = wilson(out["reached"].to_numpy(dtype=np.float64), out[n].to_numpy(dtype=np.float64))
        nan = out[n].to_numpy() == 0  # no trial: the rate is NaN, so is its interval
        out.insert(out.columns.get_loc(rate) + 1, f"{rate}_ci95_lo", np.where(nan, np.nan, lo))
        out.insert(out.columns.get_loc(rate) + 2, f"{rate}_ci95_hi", np.where(nan, np.nan, hi))
    return out


# Each per-depth rate's denominator: the n of its Wilson interval (the numerator is ``reached``).
DEPTH_RATE_N = {
    "conditional": "reached_prev",
    "per_position_acceptance_rate": "rounds",
    "conditional_when_expanded": "attempts",
}
DEPTH_HEADER = f"{DEPTH_RULE}; each rate [95% Wilson interval] n = its denominator"


def depth_display(depth: pd.DataFrame) -> pd.DataFrame:
    """The depth table as people read it: each rate one cell ``0.6667 [0.2077,0.9385] n=3``.

    For the text of ``stats`` and the report; files and JSON keep the separate columns."""
    out = depth.drop(columns=[c for c in depth.columns if c.endswith(("_ci95_lo", "_ci95_hi"))])
    for rate, n in DEPTH_RATE_N.items():
        out[rate] = [
            "–" if k == 0 else f"{metric_text(p)} [{metric_text(lo)},{metric_text(hi)}] n={k}"
            for p, lo, hi, k in zip(depth[rate], depth[f"{rate}_ci95_lo"], depth[f"{rate}_ci95_hi"], depth[n])
        ]
    return out


def all_metrics(tables) -> dict[str, pd.DataFrame]:
    """Every metric table of analysis.tables.build.Tables, by name (what stats/report print and export).

    The node metrics are finished from the counts the tables bring (``node_counts``: counted from
    the batch arrays block by block as analysis.tables.runs.load_run read the runs)."""
    if tables.node_counts is None:
        raise ValueError(
            "all_metrics: tables without their node counts; build them from loaded runs with "
            "analysis.tables.build.build_tables"
        )
    return {
        "summary": summary(tables.rounds),
        "accepted_length": accepted_length_distribution(tables.rounds),
        "depth_acceptance": depth_acceptance(tables.rounds),
        **combine_node_counts(tables.node_counts, tables.configs),
    }


def combine_node_counts(parts: list[dict], configs: dict) -> dict[str, pd.DataFrame]:
    """The node metrics of all the rounds of ``parts`` (the counts of disjoint sets of rounds,
    in run order): the same tables as the metric functions give on those rounds' node table."""

    def added(name: str, keys: list[str], total: str) -> pd.DataFrame | None:
        got = [p[name] for p in parts if p[name] is not None]
        if not got:
            return None
        return pd.concat(got, ignore_index=True).groupby(keys, sort=False, dropna=False)[total].sum().reset_index()

    outcomes: dict[tuple, dict] = {}
    for p in parts:
        for row in p["hit_outcome"]:
            key = (row["run"], row["depth"])
            if key in outcomes:
                kept = outcomes[key]
                outcomes[key] = {k: v if k in ("run", "depth") else v + row[k] for k, v in kept.items()}
            else:
                outcomes[key] = dict(row)
    slots: dict[str, tuple] = {}
    for p in parts:
        for run, counts in p["slot_hits"].items():
            slots[run] = counts if run not in slots else tuple(a + b for a, b in zip(slots[run], counts))
    named = pd.concat([p["node_hits"] for p in parts], ignore_index=True) if parts else None
    if named is None or named.empty:
        named = no_named_counts()
    else:
        g = named.groupby(["run", "name"], sort=False)
        named = pd.DataFrame(
            {
                "depth": g["depth"].first(),
                "rank": g["rank"].first(),
                "rounds_present": g["rounds_present"].sum(),
                "on_path": g["on_path"].sum(),
                "_path": g["_path"].first(),
            }
        ).reset_index()
    return {
        "rank_of_hit": rank_of_hit_finish(added("rank_of_hit", RANK_KEYS, "count")),
        "hit_outcome": hit_outcome_finish(list(outcomes.values())),
        "parent_slot": parent_slot_finish(added("parent_slot", SLOT_KEYS, "rounds")),
        "slot_hits": slot_hits_finish(slots, configs),
        "node_hits": node_hits_finish(named),
    }


__all__ = [
    "summary",
    "accepted_length_distribution",
    "depth_acceptance",
    "all_metrics",
    "combine_node_counts",
    "IN_UNEXPANDED",
]
