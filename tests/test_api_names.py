"""Every name docs/api.md documents imports as the page spells it: each ``from X import Y`` of its
code blocks, and each dotted ``replay.…`` / ``analysis.…`` name in backticks (a module, or a name
in the longest module prefix that imports)."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")

FROM_IMPORTS = sorted(
    {
        (module, name.strip())
        for module, names in re.findall(r"^from ((?:replay|analysis)[\w.]*) import (.+)$", PAGE, flags=re.M)
        for name in names.split(",")
    }
)
DOTTED = sorted(set(re.findall(r"`((?:replay|analysis)(?:\.\w+)+)", PAGE)))


def resolve(dotted: str) -> object:
    """The module, or the object in the longest prefix of ``dotted`` that is a module."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ModuleNotFoundError:
            continue
        for attr in parts[k:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_the_page_names_some():
    assert len(FROM_IMPORTS) >= 4 and len(DOTTED) >= 15


@pytest.mark.parametrize(("module", "name"), FROM_IMPORTS)
def test_a_from_import_of_the_page_works(module, name):
    mod = importlib.import_module(module)
    assert hasattr(mod, name) or importlib.util.find_spec(f"{module}.{name}") is not None, f"{module}.{name}"


@pytest.mark.parametrize("dotted", DOTTED)
def test_a_dotted_name_of_the_page_resolves(dotted):
    assert resolve(dotted) is not None
