"""Run many tree configs on the same prompts and models; one row per config, resumable.

One config is one task (``run_config``): the config and target-only decoding timed together on
every prompt (``run.run_timed``), so its speedup is measured against a baseline timed in the same
minutes on the same device. The task writes its dump, manifest and row into a staging directory
and commits it in one atomic rename (``commit.py``). ``run_local_sweep`` runs the tasks one after
the other in this process; ``cluster.py`` runs the same tasks on Dask workers. Directory layout:
``directory.py``.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from replay.core.config import TreeConfig
from replay.live.costs import measure_cost_curve, write_cost_curve
from replay.live.generate import DecodeOptions
from replay.live.models.load import LiveModel
from replay.live.report import generation_headline
from replay.live.run import BaselineComparison, Progress, TimedRun, run_timed, save_run_manifest
from replay.live.timing import Clock
from replay.util.atomic import write_json_atomic

from .commit import clear_stale, commit, staged
from .directory import (
    COMMITTED,
    COST_CURVE_FILE,
    DUPLICATE,
    KEPT,
    ROW_FILE,
    SweepResult,
    dumps_dir,
    is_finished,
    new_session,
    open_sweep,
    settings,
    sweep_result,
    write_results_table,
)
from .grid import config_name

ConfigHook = Callable[[str], None]  # called with a config's name once its result is committed
LOCAL_WORKER = "local"


def run_local_sweep(
    draft: LiveModel,
    target: LiveModel,
    configs: Sequence[TreeConfig],
    prompts: Sequence[Sequence[int]],
    options: DecodeOptions,
    out_dir: str | Path,
    repeats: int = 3,
    resume: bool = False,
    progress: Progress | None = None,
    after_config: ConfigHook | None = None,
    cost_curve: bool = False,
    clock: Clock | None = None,
) -> SweepResult:
    """Run every config not yet finished in ``out_dir``, in this process; ``after_config`` runs
    after each commit (tests use it to simulate a kill)."""
    out = Path(out_dir)
    names = open_sweep(out, sweep_settings(model_ref(draft), model_ref(target), prompts, options), resume, configs)
    session = new_session()
    done: dict[str, list[str]] = {COMMITTED: [], DUPLICATE: [], KEPT: []}
    for config, name in zip(configs, names):
        if is_finished(out, name):
            done[KEPT].append(name)
            continue
        done[
            run_config(draft, target, config, prompts, options, out, repeats, session, LOCAL_WORKER, progress, clock)
        ].append(name)
        write_results_table(out, names)
        if after_config is not None:
            after_config(name)
    if cost_curve:
        measure_cost_curve_once(target, draft, out, LOCAL_WORKER, repeats)
    return sweep_result(out, names, done)


def model_ref(model: LiveModel) -> dict[str, str]:
    return {"path": model.name, "dtype": model.dtype_name}


def sweep_settings(
    draft: dict[str, str], target: dict[str, str], prompts: Sequence[Sequence[int]], options: DecodeOptions
) -> dict[str, Any]:
    return settings(draft, target, prompts, asdict(options))


def run_config(
    draft: LiveModel,
    target: LiveModel,
    config: TreeConfig,
    prompts: Sequence[Sequence[int]],
    options: DecodeOptions,
    out: str | Path,
    repeats: int,
    session: str,
    worker: str,
    progress: Progress | None = None,
    clock: Clock | None = None,
) -> str:
    """One task: time ``config`` against target-only, stage its dump and row, commit them.
    Returns COMMITTED, or DUPLICATE when another run of the same config committed first."""
    clear_stale(dumps_dir(out))  # e.g. this config's earlier run on a worker that was killed
    with staged(dumps_dir(out), config_name(config)) as stage:
        timed = run_timed(draft, target, prompts, config, options, repeats, True, stage.path, progress, clock)
        comparison = timed.comparison(options.temperature)
        where = {
            "worker": worker,
            "device": device_label(target.device),
            "host": socket.gethostname(),
            "session": session,
        }
        save_run_manifest(
            stage.path, config, draft, target, options, timed.generations, comparison, timed.timing, {"sweep": where}
        )
        write_json_atomic(stage.path / ROW_FILE, sweep_row(config, timed, comparison, where))
        return COMMITTED if commit(stage) else DUPLICATE


def sweep_row(
    config: TreeConfig, timed: TimedRun, comparison: BaselineComparison, where: dict[str, str]
) -> dict[str, Any]:
    """The config's row of the results table (OUTCOME_COLUMNS first, then timing, then where it ran)."""
    s, base, timing = timed.summary, comparison.baseline, timed.timing
    head = generation_headline(timed.generations)
    nan = float("nan")
    per_position = {f"per_position_acceptance_rate_{d}": v for d, v in enumerate(head.per_position if head else (), 1)}
    return {
        "name": config_name(config),
        "config": config.short(),
        "config_json": json.dumps(config.to_json()),
        "gamma": config.gamma,
        "gamma_threshold": config.gamma_threshold,
        "nodes": config.num_nodes,
        "expanded": config.num_expanded,
        "rounds": s.rounds,
        "new_tokens": s.new_tokens,
        # vLLM's words first (replay.core.headline); the acceptance length is the engine's block_efficiency
        "mean_acceptance_length": head.mean_acceptance_length if head else nan,
        "draft_acceptance_rate": head.draft_acceptance_rate if head else nan,
        "mean_accepted_length": s.mean_accepted_length,
        "identical_to_baseline": comparison.identical,
        "tokens_per_s": s.tokens_per_s,
        "tokens_per_s_min": s.tokens_per_s_min,
        "tokens_per_s_max": s.tokens_per_s_max,
        "baseline_tokens_per_s": base.tokens_per_s,
        "baseline_tokens_per_s_min": base.tokens_per_s_min,
        "baseline_tokens_per_s_max": base.tokens_per_s_max,
        "speedup": comparison.speedup,
        "speedup_min": comparison.speedup_min,
        "speedup_max": comparison.speedup_max,
        "draft_s_per_round": s.draft_s_per_round,
        "verify_s_per_round": s.verify_s_per_round,
        "repeats": timing.repeats,
        "load_1m": timing.load_before.load_1m,
        "usable_cpus": timing.load_before.usable_cpus,
        "cpu_busy_percent": timing.cpu_busy_percent,
        **per_position,  # depth 1 .. the config's deepest round: P(L >= d)
        **where,
    }


def device_label(device: torch.device) -> str:
    """``cpu``, or ``cuda:0 (NVIDIA H200)``: which device, and what it is."""
    if device.type != "cuda":
        return str(device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    return f"cuda:{index} ({torch.cuda.get_device_name(index)})"


def measure_cost_curve_once(target: LiveModel, draft: LiveModel, out: str | Path, worker: str, repeats: int) -> bool:
    """Write ``cost_curve.json`` unless it exists; True when measured now."""
    path = Path(out) / COST_CURVE_FILE
    if path.is_file():
        return False
    curve = measure_cost_curve(target, draft, repeats=repeats)
    write_cost_curve(path, curve, {"worker": worker, "device": device_label(target.device)})
    return True
