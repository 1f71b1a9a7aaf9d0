"""Fair timing of several methods on the same prompts: the one way every live command times
(warm-up, interleaved passes, median and range, the machine's load: docs/live-harness.md).

The clock is a plain callable: the live commands pass ``clock.device_clock`` (synchronises the GPU
before reading the time); tests pass a fake one and check the order of calls, never real times.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from replay.util.parallel import usable_cores

Clock = Callable[[], float]  # seconds, monotonic
# Runs one method on one prompt: (prompt index, pass index or WARMUP) -> output tokens produced.
Method = Callable[[int, int], int]
WARMUP = -1  # the pass index of warm-up calls


@dataclass(frozen=True)
class Call:
    method: str
    prompt: int  # index into the session's prompts
    repeat: int  # pass index, WARMUP for the warm-up call


@dataclass(frozen=True)
class Trial:
    call: Call
    seconds: float
    tokens: int


@dataclass(frozen=True)
class Spread:
    """Median over passes, and the lowest and highest pass."""

    median: float
    min: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            raise ValueError("a spread needs at least one value")
        return cls(float(statistics.median(values)), float(min(values)), float(max(values)))


@dataclass(frozen=True)
class MethodTiming:
    name: str
    seconds: tuple[float, ...]  # per pass, summed over the pass's prompts
    tokens: tuple[int, ...]  # per pass, summed over the pass's prompts

    @property
    def tokens_per_s(self) -> tuple[float, ...]:
        return tuple(t / s if s > 0 else 0.0 for t, s in zip(self.tokens, self.seconds))

    @property
    def rate(self) -> Spread:
        return Spread.of(self.tokens_per_s)

    @property
    def time(self) -> Spread:
        return Spread.of(self.seconds)


@dataclass(frozen=True)
class MachineLoad:
    load_1m: float  # os.getloadavg(): runnable processes, averaged
    load_5m: float
    load_15m: float
    cpus: int  # os.cpu_count()
    usable_cpus: int  # CPUs this process may run on (affinity)
    memory_available_gib: float | None  # psutil; None when it is not installed


@dataclass(frozen=True)
class Timing:
    methods: tuple[MethodTiming, ...]  # in the order given
    trials: tuple[Trial, ...]  # every call in run order, warm-up first
    repeats: int
    load_before: MachineLoad
    load_after: MachineLoad
    cpu_busy_percent: float | None  # whole machine over the session (psutil), None without it

    def method(self, name: str) -> MethodTiming:
        for m in self.methods:
            if m.name == name:
                return m
        raise KeyError(f"no timed method {name!r}: have {[m.name for m in self.methods]}")

    def ratio(self, name: str, reference: str) -> Spread:
        """tokens/s of ``name`` over tokens/s of ``reference``, pass by pass."""
        a, b = self.method(name).tokens_per_s, self.method(reference).tokens_per_s
        return Spread.of([x / y if y > 0 else 0.0 for x, y in zip(a, b)])

    def to_json(self) -> dict[str, Any]:
        return {
            "repeats": self.repeats,
            "methods": {
                m.name: {"seconds": list(m.seconds), "tokens": list(m.tokens), "tokens_per_s": asdict(m.rate)}
                for m in self.methods
            },
            "order": [[t.call.method, t.call.prompt, t.call.repeat] for t in self.trials],
            "load_before": asdict(self.load_before),
            "load_after": asdict(self.load_after),
            "cpu_busy_percent": self.cpu_busy_percent,
        }


def rotated(items: Sequence[Any], k: int) -> list[Any]:
    """``items`` rotated left by ``k`` (modulo its length)."""
    k %= len(items)
    return list(items[k:]) + list(items[:k])


def schedule(methods: Sequence[str], prompts: int, repeats: int, warmup: bool = True) -> list[Call]:
    """Every call of a session in run order: the warm-up (each method on prompt 0), then per pass
    and prompt every method, the order rotated by one per (pass, prompt) step."""
    if not methods or prompts < 1 or repeats < 1:
        raise ValueError(
            f"a timing session needs methods, prompts and repeats >= 1 (got {len(methods)}, {prompts}, {repeats})"
        )
    calls = [Call(m, 0, WARMUP) for m in methods] if warmup else []
    for r in range(repeats):
        for p in range(prompts):
            calls += [Call(m, p, r) for m in rotated(methods, r * prompts + p)]
    return calls


def time_methods(
    methods: Mapping[str, Method],
    prompts: int,
    repeats: int,
    clock: Clock = time.perf_counter,
    warmup: bool = True,
) -> Timing:
    """Run ``schedule(...)``, timing each call with ``clock`` (docs/live-harness.md, "Timing: one way, everywhere")."""
    names = list(methods)
    before, busy = machine_load(), _cpu_busy_start()
    trials = []
    for call in schedule(names, prompts, repeats, warmup):
        start = clock()
        tokens = methods[call.method](call.prompt, call.repeat)
        trials.append(Trial(call, clock() - start, int(tokens)))
    per_method = []
    for name in names:
        mine = [t for t in trials if t.call.method == name and t.call.repeat != WARMUP]
        seconds = tuple(sum(t.seconds for t in mine if t.call.repeat == r) for r in range(repeats))
        tokens = tuple(sum(t.tokens for t in mine if t.call.repeat == r) for r in range(repeats))
        per_method.append(MethodTiming(name, seconds, tokens))
    return Timing(tuple(per_method), tuple(trials), repeats, before, machine_load(), _cpu_busy_end(busy))


def machine_load() -> MachineLoad:
    one, five, fifteen = os.getloadavg()
    usable = usable_cores()
    mem = None
    try:
        import psutil

        mem = round(psutil.virtual_memory().available / 2**30, 2)
    except ImportError:  # optional: load average and CPU count still say most of it
        pass
    return MachineLoad(one, five, fifteen, os.cpu_count() or 1, usable, mem)


def _cpu_busy_start() -> Any:
    try:
        import psutil
    except ImportError:
        return None
    return psutil.cpu_times()


def _cpu_busy_end(start: Any) -> float | None:
    """Share of all CPUs' time spent busy since ``start`` (psutil.cpu_times), in percent."""
    if start is None:
        return None
    import psutil

    end = psutil.cpu_times()
    total = sum(end) - sum(start)
    idle = (end.idle + getattr(end, "iowait", 0.0)) - (start.idle + getattr(start, "iowait", 0.0))
    return round(100.0 * (1.0 - idle / total), 1) if total > 0 else None
