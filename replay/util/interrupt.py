"""Ctrl-C: one line and exit 130, however many SIGINTs arrive.

``timeout -s INT`` and a terminal's Ctrl-C signal the whole process group: the command and its
worker processes, sometimes twice in a row. The command's process turns the first SIGINT into one
KeyboardInterrupt (so that ``finally`` blocks remove partial output) and ignores every later one, so
that no second KeyboardInterrupt can strike its own error handler or interpreter shutdown. Worker
processes ignore SIGINT altogether: the parent stops them, and a worker that raised would print its
own traceback.

An interrupt after a command's output has been moved into place (``output_committed``) is no error:
the output is complete, and the command ends with exit 0.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

_seen: list[int] = []  # the command's process id, once it has had its SIGINT
_owner: list[int] = []  # the command's process id (a forked worker inherits the handler, not the role)
_committed: list[bool] = []  # True once an output is in place, until forget_committed


def interrupted() -> bool:
    """Whether the command's process has been interrupted (SIGINT since interrupt_once)."""
    return bool(_seen)


def stop_if_interrupted() -> None:
    """Raise KeyboardInterrupt if the command has had its SIGINT: one that Python could not propagate
    (raised in a __del__, a weakref or gc callback, and handed to sys.unraisablehook) still stops the
    command before an output replaces the earlier one."""
    if _seen and os.getpid() == _seen[0]:
        raise KeyboardInterrupt


def commit_output() -> None:
    """Record that the command's output is now in place: complete and final."""
    _committed.append(True)


def output_committed() -> bool:
    """Whether the command's output has been moved into place (commit_output since forget_committed)."""
    return bool(_committed)


def forget_committed() -> None:
    """A new command starts: no output of it is in place yet."""
    _committed.clear()


def _first_interrupt(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if _owner and os.getpid() != _owner[0]:
        return  # a worker forked before its initializer ran: its parent handles the interrupt
    _seen.append(os.getpid())
    # Blocked too: CPython ends a process whose KeyboardInterrupt passed through its run-module path
    # by re-raising SIGINT at exit (status -2, after our one line); a blocked SIGINT leaves it 130.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    raise KeyboardInterrupt


def _quiet_unraisable(hook: Callable[[Any], None]) -> Callable[[Any], None]:
    """sys.unraisablehook that says nothing of our KeyboardInterrupt raised where Python cannot
    propagate it (a weakref callback, a __del__): main sees interrupted() and says it once."""

    def unraisable(info: Any) -> None:
        if not (isinstance(info.exc_value, KeyboardInterrupt) and interrupted()):
            hook(info)

    return unraisable


def interrupt_once() -> None:
    """In the command's own process (main thread only): the first SIGINT raises KeyboardInterrupt,
    later ones are ignored until the process ends."""
    if threading.current_thread() is threading.main_thread():
        _owner[:] = [os.getpid()]
        sys.unraisablehook = _quiet_unraisable(sys.unraisablehook)
        signal.signal(signal.SIGINT, _first_interrupt)


def ignore_interrupts() -> None:
    """SIGINT ignored from now on: a worker process's initializer (the parent handles it), and the
    command's process once its work is done (its exit status stands through interpreter shutdown)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def held_interrupts() -> Iterator[None]:
    """SIGINT waits until the block ends (renames that must all happen or none), then acts as it
    would have; main thread only, where Python handles signals. A SIGINT already held stays held.

    Blocking the signal in this thread is not enough: a process-directed SIGINT goes to any thread
    that does not block it (a worker or progress thread), and Python then runs the handler here.
    So the Python-level handler is swapped for one that only records it, and the recorded SIGINT
    is handed to the previous handler once the block is over."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    held = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    arrived: list[FrameType | None] = []
    if previous not in (signal.SIG_IGN, None):
        signal.signal(signal.SIGINT, lambda _signum, frame: arrived.append(frame))
    try:
        yield
    finally:
        if previous not in (signal.SIG_IGN, None):
            signal.signal(signal.SIGINT, previous)
        if not held:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if arrived:
        if callable(previous):
            previous(signal.SIGINT, arrived[0])
        elif previous == signal.SIG_DFL:
            raise KeyboardInterrupt
