"""A SIGINT during a staged output's renames waits for them, whichever thread the kernel hands it to.

A process-directed SIGINT (Ctrl-C, ``timeout -s INT``) goes to any thread that does not block it.
Blocking it in the main thread alone let a worker or progress thread take it, and Python then
raised KeyboardInterrupt in the main thread between two renames: ``stats -o`` left some tables new
and some old."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from replay.util.interrupt import held_interrupts


def test_a_sigint_another_thread_receives_waits_for_the_held_block():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    release = threading.Event()
    other = threading.Thread(target=release.wait, args=(10,))  # does not block SIGINT: the kernel may pick it
    other.start()
    steps = []
    try:
        with pytest.raises(KeyboardInterrupt):
            with held_interrupts():
                os.kill(os.getpid(), signal.SIGINT)
                for k in range(200):  # many bytecode boundaries, where Python runs a pending handler
                    time.sleep(0.001)
                    steps.append(k)
                steps.append("renamed all")
        assert steps[-1] == "renamed all"  # the interrupt came after the block, not inside it
    finally:
        release.set()
        other.join()
        signal.signal(signal.SIGINT, previous)


def test_a_held_block_without_a_sigint_changes_nothing():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with held_interrupts():
            pass
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    finally:
        signal.signal(signal.SIGINT, previous)
