"""The one parallel map: work items on a bounded pool of threads or processes, results in order.

Readers (replay.io.fastread, processes: parsing text holds the GIL) and the batch replay
(replay.engine.batch and replay.engine.runs, threads: numpy releases the GIL) all go through ``ordered_map``,
so they share one rule for the worker count, one bound on memory (WINDOW_PER_WORKER items in
flight per worker, so a slow consumer stalls the producers instead of piling up results) and one
error for a worker process that dies.
"""

from __future__ import annotations

import gc
import os
import signal
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from itertools import chain, islice
from typing import Any, TypeVar

from .errors import SpecReplayError
from .interrupt import ignore_interrupts

T = TypeVar("T")
R = TypeVar("R")

MAX_DEFAULT_WORKERS = 2  # the default stays small: shared machines, and two cores already halve the wall time
PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h): the signal a process gets when its parent ends
WINDOW_PER_WORKER = 2  # items in flight per worker: one running, one queued, so no worker waits for the consumer


class WorkerDiedError(SpecReplayError):
    """A worker process ended without a result (killed: out of memory, a signal)."""


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, where the system has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def default_workers() -> int:
    """Workers when the user names none: the usable cores, at most MAX_DEFAULT_WORKERS."""
    return min(MAX_DEFAULT_WORKERS, usable_cores())


def resolve_workers(workers: int | None) -> int:
    """``--workers``: None is default_workers(), anything below 1 is 1 (this process only), and more
    than the usable cores is the usable cores: the work is CPU-bound, so more processes only cost
    memory and start-up."""
    return default_workers() if workers is None else max(1, min(workers, usable_cores()))


def ordered_map(
    fn: Callable[[T], R],
    items: Iterable[T],
    workers: int,
    *,
    processes: bool = False,
) -> Iterator[R]:
    """``fn`` over ``items``, results yielded in item order, at most ``WINDOW_PER_WORKER * workers``
    items submitted ahead of the consumer; ``items`` is read lazily.

    ``workers <= 1`` runs in the calling thread. ``processes`` uses a process pool (``fn`` and the
    items must pickle); a worker process that dies raises WorkerDiedError. An exception raised by
    ``fn`` reaches the caller unchanged. Progress is the consumer's: it sees each result in order.
    """
    results = _serial(fn, items) if workers <= 1 else _pooled(fn, items, workers, processes)
    try:
        yield from results
    except BrokenProcessPool:
        raise WorkerDiedError(
            "a worker process died (killed, e.g. out of memory) before returning its result; --workers 1 runs in this process"
        ) from None


def _serial(fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
    for item in items:
        yield fn(item)


def _init_worker() -> None:
    """A worker process ignores SIGINT (its parent handles it) and ends with its parent: an
    interrupted command leaves without waiting for its pool, and a worker left waiting on the pool's
    queue would hold the command's output pipes open (Linux: prctl PR_SET_PDEATHSIG; elsewhere the
    pool's own shutdown)."""
    ignore_interrupts()
    parent = os.getppid()
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent ended before the request took effect
        os._exit(0)


def _pooled(fn: Callable[[T], R], items: Iterable[T], workers: int, processes: bool) -> Iterator[R]:
    # A forking pool starts all its workers at the first submit: a pool no larger than the work
    # keeps --workers 500 on ten items from forking 500 copies of this process.
    ahead = iter(items)
    head = list(islice(ahead, workers))
    workers = max(1, len(head))
    items = chain(head, ahead)
    # Objects the forked workers inherit are moved out of the collector's reach until they have
    # forked: a worker's collections would otherwise write to every page of the parent's heap.
    frozen = processes
    if frozen:
        gc.freeze()
    pool: Executor = (
        ProcessPoolExecutor(max_workers=workers, initializer=_init_worker)
        if processes
        else ThreadPoolExecutor(max_workers=workers)
    )
    window: deque[Future[Any]] = deque()
    wait = True
    try:
        for item in items:
            window.append(pool.submit(fn, item))  # the first submit forks the workers
            if frozen:
                gc.unfreeze()
                frozen = False
            if len(window) >= WINDOW_PER_WORKER * workers:
                yield window.popleft().result()
        while window:
            yield window.popleft().result()
    except KeyboardInterrupt:
        # Ctrl-C may strike inside the pool's own bookkeeping: waiting for its workers could then wait
        # forever, so the pool is left to end with the process (its workers ignore SIGINT)
        wait = False
        raise
    finally:
        if frozen:
            gc.unfreeze()
        for fut in window:  # the consumer stopped early or an item failed: drop what has not started
            fut.cancel()
        pool.shutdown(wait=wait, cancel_futures=not wait)
