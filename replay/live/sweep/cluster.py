"""Sweeps on a Dask cluster: one worker per device, one task per tree config (``sweep.run_config``,
exactly a local sweep's unit of work, committed by the worker itself with ``commit.py``).

Why one task per config, what a worker needs, and what survives a killed worker or client:
docs/scale.md. dask is imported here only, and only by ``sweep --scheduler/--workers`` (the
``scale`` extra).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from replay.core.config import TreeConfig, parse_config
from replay.live.errors import SweepError
from replay.util.errors import SpecReplayError

from .directory import (
    COST_CURVE_FILE,
    KEPT,
    SweepResult,
    is_finished,
    new_session,
    open_sweep,
    settings,
    sweep_result,
    write_results_table,
)
from .grid import config_name

DEVICE_ENV = "SPECREPLAY_DEVICE"  # a worker's device, overriding the sweep's --device


@dataclass(frozen=True)
class PairSpec:
    """What a worker loads (and the key of its cache)."""

    draft: str  # path, the same on every worker
    target: str
    device: str  # default device; $SPECREPLAY_DEVICE on the worker wins
    dtype: str = "float32"
    draft_dtype: str | None = None
    threads: int | None = None  # torch intra-op threads on the worker

    def refs(self) -> tuple[dict[str, str], dict[str, str]]:
        """(draft, target) as the sweep's settings record them (the local sweep records the same)."""
        return {"path": self.draft, "dtype": self.draft_dtype or self.dtype}, {"path": self.target, "dtype": self.dtype}


@dataclass(frozen=True)
class SweepJob:
    """Everything a task needs besides its config."""

    pair: PairSpec
    prompts: tuple[tuple[int, ...], ...]
    options: dict[str, Any]  # DecodeOptions as a dict (rebuilt on the worker)
    out: str  # absolute path of the sweep directory
    repeats: int
    session: str


@dataclass(frozen=True)
class TaskOutcome:
    name: str
    status: str  # COMMITTED, DUPLICATE or KEPT
    worker: str
    seconds: float  # the task's wall time on the worker, model loading included when it happened


Done = Callable[[TaskOutcome], None]  # called on the client as each task completes

_TASK_LOCK = threading.Lock()
_PAIR: tuple[PairSpec, Any] | None = None  # (resolved spec, (draft, target)) of this worker process


def run_sweep_on_cluster(
    client: Any,
    pair: PairSpec,
    configs: Sequence[TreeConfig],
    prompts: Sequence[Sequence[int]],
    options: Any,
    out_dir: str | Path,
    repeats: int = 3,
    resume: bool = False,
    cost_curve: bool = False,
    on_done: Done | None = None,
) -> SweepResult:
    """Submit every config not yet committed in ``out_dir`` to ``client``'s cluster (a
    ``distributed.Client``), gather as they finish, keep the table current; ``options`` is a
    ``DecodeOptions``."""
    from concurrent.futures import CancelledError

    from distributed import KilledWorker, as_completed

    out = Path(out_dir).resolve()
    opts = asdict(options)
    names = open_sweep(out, settings(*pair.refs(), prompts, opts), resume, configs)
    skipped = [n for n in names if is_finished(out, n)]
    job = SweepJob(pair, tuple(tuple(p) for p in prompts), opts, str(out), repeats, new_session())
    futures = [
        client.submit(config_task, job, c.to_json(), key=f"specreplay-sweep-{job.session}-{n}", pure=False)
        for c, n in zip(configs, names)
        if n not in skipped
    ]
    if cost_curve and not (out / COST_CURVE_FILE).is_file():
        futures.append(client.submit(cost_curve_task, job, key=f"specreplay-cost-curve-{job.session}", pure=False))
    done: dict[str, list[str]] = {KEPT: list(skipped)}  # then each task's status, as it completes
    try:
        for fut in as_completed(futures):
            outcome = fut.result()  # a task's error ends the sweep here, with its message
            if outcome is None:  # the cost curve
                continue
            done.setdefault(outcome.status, []).append(outcome.name)
            write_results_table(out, names)
            if on_done is not None:
                on_done(outcome)
    except (KilledWorker, CancelledError, OSError) as exc:  # scheduler gone, or a task that kills workers
        raise SweepError(
            f"the cluster lost the sweep ({type(exc).__name__}: {exc}); every committed config is kept in {out}: rerun with --resume"
        ) from None
    finally:
        client.cancel([f for f in futures if not f.done()])
    return sweep_result(out, names, done)


def config_task(job: SweepJob, config_json: dict[str, Any]) -> TaskOutcome:
    """Run on a worker: one config on all prompts, committed into ``job.out``."""
    from replay.live.generate import DecodeOptions

    from .runner import run_config

    start = time.perf_counter()
    config = parse_config(config_json).tree
    name, worker = config_name(config), worker_label()
    with _TASK_LOCK:
        if is_finished(job.out, name):  # committed meanwhile, e.g. by a killed client's last task
            return TaskOutcome(name, KEPT, worker, time.perf_counter() - start)
        try:
            draft, target = worker_pair(job.pair)
            status = run_config(
                draft,
                target,
                config,
                job.prompts,
                DecodeOptions(**job.options),
                job.out,
                job.repeats,
                job.session,
                worker,
            )
        except SpecReplayError as exc:  # re-raised as one-argument errors: they travel pickled
            raise SweepError(f"config {name} on worker {worker}: {exc}") from None
    return TaskOutcome(name, status, worker, time.perf_counter() - start)


def cost_curve_task(job: SweepJob) -> None:
    """Run on a worker: ``cost_curve.json`` measured on this worker's device."""
    from .runner import measure_cost_curve_once

    with _TASK_LOCK:
        draft, target = worker_pair(job.pair)
        measure_cost_curve_once(target, draft, job.out, worker_label(), job.repeats)


def worker_pair(spec: PairSpec) -> tuple[Any, Any]:
    """(draft, target) of this process, loaded on first use and kept while the spec is the same."""
    global _PAIR
    resolved = replace(spec, device=os.environ.get(DEVICE_ENV) or spec.device)
    if _PAIR is None or _PAIR[0] != resolved:
        from replay.live.models.load import load_pair, prepare_device

        _PAIR = None  # free the old pair before loading another
        prepare_device(resolved.device, resolved.threads, f"device {resolved.device}", f"worker {worker_label()}")
        pair = load_pair(resolved.draft, resolved.target, resolved.device, resolved.dtype, resolved.draft_dtype)
        _PAIR = (resolved, pair)
    return _PAIR[1]


def worker_label() -> str:
    """The Dask worker's name (its address when it has none), or ``local`` outside a worker."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return "local"
    return str(worker.name) if worker.name is not None and str(worker.name) != worker.address else worker.address


def start_local_cluster(workers: int | None = None, devices: Sequence[str] | None = None, quiet: bool = True) -> Any:
    """A cluster of worker processes on this machine (one thread each), worker i on ``devices[i]``
    when given; use as a context manager, and connect with ``distributed.Client(cluster)``."""
    from distributed import Nanny, Scheduler, SpecCluster

    devices = list(devices or [])
    n = workers if workers is not None else len(devices)
    if n < 1:
        raise SweepError("--workers must be at least 1 (or give --devices)")
    if devices and len(devices) != n:
        raise SweepError(f"--workers {n} but {len(devices)} --devices: give one device per worker")
    level = logging.ERROR if quiet else logging.INFO
    common = {
        "nthreads": 1,
        "host": "127.0.0.1",
        "memory_limit": 0,
        "dashboard": False,
        "dashboard_address": None,
        "silence_logs": level,
    }
    spec = {
        f"w{i}": {"cls": Nanny, "options": {**common, "env": {DEVICE_ENV: devices[i]} if devices else {}}}
        for i in range(n)
    }
    scheduler = {
        "cls": Scheduler,
        "options": {"host": "127.0.0.1", "port": 0, "dashboard": False, "dashboard_address": None},
    }
    return SpecCluster(scheduler=scheduler, workers=spec, silence_logs=level)
