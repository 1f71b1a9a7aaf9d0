"""Wall-clock timing that is honest on a GPU: synchronise before reading the clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")


def synchronize(device: torch.device | str) -> None:
    """Wait for queued kernels; CUDA launches are asynchronous, so a clock read alone lies."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def timed_call(device: torch.device | str, fn: Callable[[], T]) -> tuple[T, float]:
    """Run ``fn`` and return (its result, seconds), synchronising the device on both sides."""
    synchronize(device)
    start = time.perf_counter()
    result = fn()
    synchronize(device)
    return result, time.perf_counter() - start


def device_clock(*devices: torch.device | str) -> Callable[[], float]:
    """A clock for ``timing.time_methods`` that waits for every device's queued kernels first."""

    def now() -> float:
        for d in devices:
            synchronize(d)
        return time.perf_counter()

    return now
