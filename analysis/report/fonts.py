"""Labels in any script: matplotlib's own font (DejaVu Sans) lacks CJK glyphs, so run labels such as
a directory named 中文 would draw boxes behind one warning per glyph. Drawing inside ``any_script`` falls
back, glyph by glyph, to an installed CJK font; where none is installed the glyphs stay boxes and
one note says so, naming them."""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache

# Families tried in this order after matplotlib's own (which keeps every Latin glyph as before).
FALLBACK_FAMILIES = (
    "Noto Sans CJK SC",
    "Noto Sans CJK JP",
    "Noto Sans SC",
    "Source Han Sans SC",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "Droid Sans Fallback",
    "AR PL UMing CN",
    "Microsoft YaHei",
    "SimHei",
)
_GLYPH = re.compile(r"Glyph (\d+) .*missing from")


@lru_cache(maxsize=1)
def fallback_family() -> str | None:
    """The first of FALLBACK_FAMILIES that matplotlib finds installed, or None."""
    from matplotlib import font_manager

    names = {f.name for f in font_manager.fontManager.ttflist}
    return next((family for family in FALLBACK_FAMILIES if family in names), None)


@contextmanager
def any_script(note: Callable[[str], None]) -> Iterator[None]:
    """Create and draw figures inside: glyphs the default font lacks come from fallback_family();
    those no font has are told once through ``note`` instead of matplotlib's warning per glyph.
    Other warnings pass on unchanged."""
    import matplotlib

    family = fallback_family()
    rc = {"font.family": [*matplotlib.rcParams["font.family"], family]} if family else {}
    # a fallback font of one weight makes font_manager log each substitution it makes
    finder = logging.getLogger("matplotlib.font_manager")
    level = finder.level
    finder.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(record=True) as caught, matplotlib.rc_context(rc):
            warnings.simplefilter("always")
            yield
    finally:
        finder.setLevel(level)
    missing = sorted({chr(int(m[1])) for w in caught if (m := _GLYPH.search(str(w.message)))})
    for w in caught:
        if not _GLYPH.search(str(w.message)):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if missing:
        shown = "".join(missing[:12]) + ("…" if len(missing) > 12 else "")
        note(
            f"note: no installed font has {len(missing)} character(s) of the labels ({shown}): the plots show them "
            "as boxes; install a CJK font (Debian: fonts-noto-cjk) for matplotlib to use"
        )
