"""Run many tree configs on the same prompts and models; one row per config, resumable.

Layout of OUT:
    sweep.json            what the sweep runs on (models, prompts, options); a resume must match
    baseline.json         target-only run on the same prompts (once)
    rows/<name>.json      one finished config (written atomically, last) - the resume marker
    dumps/<name>/         that config's dump (cleared and redone if its row is missing)
    results.csv/.parquet  the table assembled from rows/ (rewritten after every config)
    cost_curve.json       optional verification cost curve
    plots/                nodes vs block efficiency, nodes vs tokens/s, Pareto front
A killed sweep rerun with the same arguments skips every config whose row exists.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ..atomic import atomic_path, write_json_atomic
from ..config import TreeConfig
from .dumps import run_manifest, write_run_manifest
from .errors import SweepError
from .generate import DecodeOptions
from .grid import config_name
from .models import LiveModel
from .run import Progress, run_baseline, run_speculative, summarize

ConfigHook = Callable[[str], None]  # called with a config's name once its row is saved


@dataclass(frozen=True)
class SweepResult:
    table: Any  # pandas DataFrame, one row per config in the order given
    computed: tuple[str, ...]  # configs run by this call
    skipped: tuple[str, ...]  # configs whose rows already existed


def run_sweep(
    draft: LiveModel,
    target: LiveModel,
    configs: Sequence[TreeConfig],
    prompts: Sequence[Sequence[int]],
    options: DecodeOptions,
    out_dir: str | Path,
    progress: Progress | None = None,
    after_config: ConfigHook | None = None,
    plots: bool = True,
) -> SweepResult:
    """Run every config not yet finished in ``out_dir``; ``after_config`` runs after each new row
    (tests use it to simulate a kill)."""
    out = Path(out_dir)
    _claim(out, _settings(draft, target, prompts, options))
    baseline = _baseline(out, target, prompts, options)
    computed, skipped = [], []
    for config in configs:
        name = config_name(config)
        if (out / "rows" / f"{name}.json").is_file():
            skipped.append(name)
            continue
        write_json_atomic(out / "rows" / f"{name}.json", _run_config(draft, target, config, prompts, options, out, baseline, progress))
        computed.append(name)
        write_table(out, [config_name(c) for c in configs])
        if after_config is not None:
            after_config(name)
    table = write_table(out, [config_name(c) for c in configs])
    if plots and len(table):
        from analysis.sweep_plots import plot_sweep

        plot_sweep(table, out / "plots")
    return SweepResult(table, tuple(computed), tuple(skipped))


def _settings(draft: LiveModel, target: LiveModel, prompts: Sequence[Sequence[int]], options: DecodeOptions) -> dict[str, Any]:
    return {
        "draft": {"path": draft.name, "dtype": draft.dtype_name},
        "target": {"path": target.name, "dtype": target.dtype_name},
        "device": str(target.device),
        "prompts": [list(p) for p in prompts],
        "options": asdict(options),
    }


def _claim(out: Path, settings: dict[str, Any]) -> None:
    """Record the settings, or check that a resumed sweep runs on the same ones."""
    path = out / "sweep.json"
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        if old != json.loads(json.dumps(settings)):
            raise SweepError(f"{out} holds a sweep with other models, prompts or options; use a new -o/--output")
        return
    write_json_atomic(path, settings)


def _baseline(out: Path, target: LiveModel, prompts, options: DecodeOptions) -> dict[str, Any]:
    path = out / "baseline.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    gens = run_baseline(target, prompts, options)
    body = {"summary": asdict(summarize(gens)), "outputs": [list(g.output_ids) for g in gens]}
    write_json_atomic(path, body)
    return body


def _run_config(draft, target, config: TreeConfig, prompts, options, out: Path, baseline: dict, progress) -> dict[str, Any]:
    name = config_name(config)
    dump_dir = out / "dumps" / name
    shutil.rmtree(dump_dir, ignore_errors=True)  # a killed run may have left part of this config
    gens = run_speculative(draft, target, prompts, config, options, dump_dir, progress)
    s = summarize(gens)
    models = {"draft": {"path": draft.name, "dtype": draft.dtype_name}, "target": {"path": target.name, "dtype": target.dtype_name}}
    run = {"device": str(target.device), "temperature": options.temperature, "seed": options.seed, "dtype": target.dtype_name}
    write_run_manifest(dump_dir, run_manifest(config, models, run, gens, asdict(s)))
    base_tps = baseline["summary"]["tokens_per_s"]
    identical = None if options.temperature > 0 else [list(g.output_ids) for g in gens] == baseline["outputs"]
    return {
        "name": name,
        "config": config.short(),
        "config_json": json.dumps(config.to_json()),
        "gamma": config.gamma,
        "nodes": config.num_nodes,
        "expanded": config.num_expanded,
        "rounds": s.rounds,
        "new_tokens": s.new_tokens,
        "mean_accepted_length": s.mean_accepted_length,
        "block_efficiency": s.block_efficiency,
        "tokens_per_s": s.tokens_per_s,
        "baseline_tokens_per_s": base_tps,
        "speedup": s.tokens_per_s / base_tps if base_tps > 0 else 0.0,
        "draft_s_per_round": s.draft_s_per_round,
        "verify_s_per_round": s.verify_s_per_round,
        "identical_to_baseline": identical,
    }


def read_rows(out_dir: str | Path, names: Sequence[str]) -> list[dict[str, Any]]:
    rows_dir = Path(out_dir) / "rows"
    return [json.loads((rows_dir / f"{n}.json").read_text(encoding="utf-8")) for n in names if (rows_dir / f"{n}.json").is_file()]


def write_table(out_dir: str | Path, names: Sequence[str]):
    """Assemble ``results.csv`` and ``results.parquet`` from the finished rows; returns the DataFrame."""
    import pandas as pd

    out = Path(out_dir)
    table = pd.DataFrame(read_rows(out, names))
    with atomic_path(out / "results.csv") as tmp:
        table.to_csv(tmp, index=False)
    with atomic_path(out / "results.parquet") as tmp:
        table.to_parquet(tmp, index=False)
    return table
