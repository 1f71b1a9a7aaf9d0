"""Progress bars on stderr (tqdm), and the one rule for when a command draws them.

A bar is drawn only for a person watching a terminal: never with ``--no-progress``, never when
stderr is a file or a pipe (a CI log would otherwise fill with one redraw per update).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO


def progress_enabled(no_progress: bool = False, stream: TextIO | None = None) -> bool:
    """True when a command may draw a bar: not switched off, and ``stream`` (stderr) is a terminal."""
    if no_progress:
        return False
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


# a terminal that reports no width (a pty opened without a size: `script` without a terminal, a
# container's console, an editor's run pane) would get tqdm's bar at width 0, that is nothing at all
FALLBACK_COLUMNS, FALLBACK_LINES = 80, 24  # tqdm also hides a bar below a screen of 0 lines


class _SilentBar:
    """What a disabled tqdm bar does for the commands (nothing: not even ``n`` counts), without
    importing tqdm (~30 ms of a command's start)."""

    def __init__(self, total: int, unit: str = "it") -> None:
        self.total = total
        self.unit = unit
        self.n = 0

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _SilentBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(total: int, desc: str, enabled: bool, **tqdm_options: Any) -> Any:
    """A tqdm bar on stderr; a silent one (the methods the commands call, draws nothing) when not ``enabled``."""
    if not enabled:
        return _SilentBar(total, tqdm_options.get("unit", "it"))
    from tqdm import tqdm

    if not _terminal_columns(sys.stderr):
        tqdm_options.update(ncols=FALLBACK_COLUMNS, nrows=FALLBACK_LINES, dynamic_ncols=False)
    return tqdm(total=total, desc=desc, file=sys.stderr, **tqdm_options)


def _terminal_columns(stream: TextIO) -> int:
    """The width the terminal behind ``stream`` reports; 0 when it reports none or is no terminal."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 0


def tqdm_progress(desc: str, enabled: bool | None = None) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    """A ``progress(done, total)`` callback drawing a bar on stderr, and its closer.

    ``enabled=None`` applies progress_enabled(); False never draws.
    """
    on = progress_enabled() if enabled is None else enabled
    bar = None

    def update(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = progress_bar(total, desc, on, leave=False)
        bar.update(done - bar.n)

    def close() -> None:
        if bar is not None:
            bar.close()

    return update, close


@contextmanager
def progress_while(desc: str, enabled: bool | None = None) -> Iterator[Callable[[int, int], None]]:
    """tqdm_progress's ``progress(done, total)`` for the block, the bar closed after it."""
    update, close = tqdm_progress(desc, enabled)
    try:
        yield update
    finally:
        close()


def phase_progress(
    enabled: bool | None = None,
) -> tuple[Callable[[str], Callable[[int, int], None]], Callable[[], None]]:
    """``start(name)`` closes the running phase's bar and returns the next phase's ``progress(done,
    total)``; and the closer of the last. For a command whose phases each take long on one run
    (report: comparison, recommendation, temperature curve), so that a bar counting runs does not
    stand still for minutes."""
    current: list[Callable[[], None]] = []

    def start(name: str) -> Callable[[int, int], None]:
        close()
        update, closer = tqdm_progress(name, enabled)
        current.append(closer)
        return update

    def close() -> None:
        while current:
            current.pop()()

    return start, close
