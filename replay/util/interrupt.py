"""Ctrl-C: one line and exit 130, however many SIGINTs arrive.

``timeout -s INT`` and a terminal's Ctrl-C signal the whole process group: the command and its
worker processes, sometimes twice in a row. The command's process turns the first SIGINT into one
KeyboardInterrupt (so that ``finally`` blocks remove partial output) and ignores every later one, so
that no second KeyboardInterrupt can strike its own error handler or interpreter shutdown. Worker
processes ignore SIGINT altogether: the parent stops them, and a worker that raised would print its
own traceback.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType


def _first_interrupt(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Blocked too: CPython ends a process whose KeyboardInterrupt passed through its run-module path
    # by re-raising SIGINT at exit (status -2, after our one line); a blocked SIGINT leaves it 130.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    raise KeyboardInterrupt


def interrupt_once() -> None:
    """In the command's own process (main thread only): the first SIGINT raises KeyboardInterrupt,
    later ones are ignored until the process ends."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _first_interrupt)


def ignore_interrupts() -> None:
    """A worker process's initializer: SIGINT is the parent's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
