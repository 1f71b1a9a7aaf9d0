"""How the model fetch reports long byte copies (download, assembly, hashing) and what it does.

The fetch takes a bar factory and a log callback instead of drawing anything itself: the CLI passes
tqdm and a writer that keeps the bar whole, tests pass recorders, library callers pass nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol


class ProgressBar(Protocol):
    def update(self, n: int) -> object: ...

    def close(self) -> object: ...


# (description, total bytes) -> bar; tqdm(desc=..., total=..., unit="B") fits.
ProgressFactory = Callable[[str, int], ProgressBar]
Log = Callable[[str], None]


class _NullBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


@contextmanager
def open_progress(factory: ProgressFactory | None, desc: str, total: int) -> Iterator[ProgressBar]:
    """Always close the bar, even on error: tqdm leaves a broken terminal line otherwise."""
    bar: ProgressBar = factory(desc, total) if factory else _NullBar()
    try:
        yield bar
    finally:
        bar.close()


def set_postfix(bar: ProgressBar, text: str) -> None:
    """Show ``text`` after the bar when the bar can (tqdm can; the protocol does not require it)."""
    setter = getattr(bar, "set_postfix_str", None)
    if setter:
        setter(text)


def no_log(message: str) -> None:
    pass


def format_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if abs(value) < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.2f} GiB"
