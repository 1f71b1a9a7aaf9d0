"""Sizes that a reader can hold (docs/architecture.md): no module in replay/ or analysis/ over 600
lines, no function there over 80 lines, counted as scripts/long_functions.py counts them (from the
``def``, decorators excluded, to the last line; nested functions in their parent and on their own)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("replay", "analysis")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _long_functions() -> dict[str, int]:
    """{"path:qualified name": lines} of every function in replay/ and analysis/ over the limit."""
    spec = importlib.util.spec_from_file_location("long_functions", ROOT / "scripts" / "long_functions.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    found = script.long_functions(_modules(), MAX_FUNCTION_LINES)
    return {f"{Path(path).relative_to(ROOT).as_posix()}:{name}": lines for lines, path, _, name in found}


def test_no_module_over_600_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for p in _modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by concern): {long}"


def test_no_function_over_80_lines():
    long = _long_functions()
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"
