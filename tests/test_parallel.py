"""replay.util.parallel.ordered_map: order, bounded look-ahead, errors, worker death, serial fallback."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import pytest

from replay.util.parallel import (
    WINDOW_PER_WORKER,
    WorkerDiedError,
    default_workers,
    ordered_map,
    resolve_workers,
    usable_cores,
)


def _slow_square(x: int) -> int:
    time.sleep(0.002 * (5 - x % 5))  # later items finish first: order must come from the map, not the clock
    return x * x


def _die_on_three(x: int) -> int:
    if x == 3:
        os._exit(3)  # what the OOM killer leaves behind: no exception, no result
    return x


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("processes", [False, True])
def test_results_come_in_item_order(workers, processes):
    assert list(ordered_map(_slow_square, range(12), workers, processes=processes)) == [x * x for x in range(12)]


def test_empty_input_gives_nothing():
    assert list(ordered_map(_slow_square, [], 2)) == []


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_items_are_read_at_most_a_window_ahead_of_the_consumer(workers):
    pulled = 0

    def items():
        nonlocal pulled
        for i in range(40):
            pulled += 1
            yield i

    bound = 1 if workers == 1 else WINDOW_PER_WORKER * workers
    for consumed, _ in enumerate(ordered_map(lambda x: x, items(), workers), start=1):
        assert pulled <= consumed + bound - 1
    assert pulled == 40


def test_serial_runs_in_the_calling_thread():
    me = threading.get_ident()
    assert set(ordered_map(lambda _: threading.get_ident(), range(5), 1)) == {me}


@pytest.mark.parametrize("workers", [1, 2])
def test_an_error_in_fn_reaches_the_caller_unchanged(workers):
    def fn(x):
        if x == 4:
            raise ValueError("item 4 is bad")
        return x

    got = []
    with pytest.raises(ValueError, match="item 4 is bad"):
        for r in ordered_map(fn, range(10), workers):
            got.append(r)
    assert got == [0, 1, 2, 3]  # everything before the failing item, in order


def test_a_dead_worker_process_is_a_clear_error():
    with pytest.raises(WorkerDiedError, match="worker process died.*--workers 1"):
        list(ordered_map(_die_on_three, range(8), 2, processes=True))


def test_stopping_early_leaves_the_rest_unrun():
    started = []

    def fn(x):
        started.append(x)
        time.sleep(0.01)
        return x

    it = ordered_map(fn, range(100), 2)
    assert [next(it), next(it)] == [0, 1]
    it.close()  # joins the pool: the queued items are cancelled, not run
    assert len(started) <= 2 + WINDOW_PER_WORKER * 2


def _pid(_):
    return os.getpid()


def test_a_pool_holds_no_more_workers_than_the_items():
    """A forking pool starts every worker at once: --workers 50 on three items forks three."""
    before = {c.pid for c in multiprocessing.active_children()}  # an earlier test's pool may still be ending
    alive = []
    for _ in ordered_map(_pid, range(3), 50, processes=True):
        alive.append(len([c for c in multiprocessing.active_children() if c.pid not in before]))
    assert 1 <= max(alive) <= 3


def test_worker_counts():
    assert 1 <= default_workers() <= 2
    assert resolve_workers(None) == default_workers()
    assert resolve_workers(0) == resolve_workers(-3) == 1
    assert resolve_workers(5) == min(5, usable_cores())
    assert resolve_workers(10**6) == usable_cores()  # more processes than cores only cost memory
