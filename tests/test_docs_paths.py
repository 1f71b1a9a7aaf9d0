"""Every repository path the documentation names exists: docs/*.md and README.md.

A path is a word that starts with one of the repository's folders (``replay/engine/runs.py``,
``analysis/``, ``tests/test_layers.py``, ``bench/duel.py``, ``scripts/gpu_check.sh``,
``docs/img/*.png``, ``sample_dumps/article_round``); a ``*`` in it must match at least one file. A
module moved or renamed without its mentions fails here, not in a reader's hands. Placeholders
(``bench/NAME.py``, ``analysis/{name}.py``) and what the commands write are not paths of the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FOLDERS = ("replay", "analysis", "tests", "bench", "scripts", "docs", "sample_dumps")
PATH = re.compile(r"(?<![\w.~/$-])((?:" + "|".join(FOLDERS) + r")/[\w.*/-]*)")
PLACEHOLDER = re.compile(r"[A-Z]{2,}|[{<]")  # bench/NAME.py, analysis/{name}.py, calibration_<dtype>/


def mentioned_paths(text: str) -> list[tuple[int, str]]:
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        for m in PATH.finditer(line):
            path = m.group(1).rstrip(".,:;")  # the sentence's punctuation
            end = m.end(1)
            if PLACEHOLDER.search(line[m.start(1) : end + 1]):
                continue
            out.append((i, path))
    return out


def exists(path: str) -> bool:
    if "*" in path:
        return any(ROOT.glob(path.rstrip("/")))
    return (ROOT / path).exists()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_the_page_names_exists(page):
    missing = [f"line {i}: {p}" for i, p in mentioned_paths(page.read_text(encoding="utf-8")) if not exists(p)]
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_the_reader_finds_paths_and_skips_placeholders():
    text = (
        "see `replay/cli/options.py`, docs/img/*.png and tests/test_live_*.py.\n"
        "run python bench/NAME.py; git show REV:analysis/{name}.py; ~/.cache/specreplay/models; $OUT/docs/x\n"
        "(replay/no_such_module.py)\n"
    )
    found = [p for _, p in mentioned_paths(text)]
    assert found == ["replay/cli/options.py", "docs/img/*.png", "tests/test_live_*.py", "replay/no_such_module.py"]
    assert [exists(p) for p in found] == [True, True, True, False]
