"""The package's version: one source, the package metadata (pyproject.toml's, once installed)."""

from __future__ import annotations

import re
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def package_version() -> str:
    """The installed package's version; from a source checkout without an install, pyproject.toml's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("specreplay")
    except PackageNotFoundError:
        return pyproject_version(PYPROJECT)


def pyproject_version(path: Path) -> str:
    """``[project] version`` of a pyproject.toml, or "unknown"."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return "unknown"
    try:
        import tomllib  # Python >= 3.11
    except ModuleNotFoundError:  # Python 3.10: the one line we need, read by hand
        match = re.search(r'^\[project\][^\[]*?^version\s*=\s*"([^"]+)"', text, re.M | re.S)
        return match.group(1) if match else "unknown"
    try:
        return str(tomllib.loads(text)["project"]["version"])
    except (KeyError, TypeError, tomllib.TOMLDecodeError):
        return "unknown"
