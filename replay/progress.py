"""The progress bar every offline command draws for long work (tqdm on stderr)."""

from __future__ import annotations

import sys
from typing import Callable


def tqdm_progress(desc: str, enabled: bool | None = None) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    """A ``progress(done, total)`` callback drawing a tqdm bar on stderr, and its closer.

    ``enabled=None`` lets tqdm decide (off when stderr is not a terminal, so logs stay clean).
    """
    from tqdm import tqdm

    bar = None

    def update(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, desc=desc, file=sys.stderr, disable=None if enabled is None else not enabled, leave=False)
        bar.update(done - bar.n)

    def close() -> None:
        if bar is not None:
            bar.close()

    return update, close
