"""How a command confirms what it wrote lives in one place, replay.cli.options.note_written: one
"specreplay: wrote ..." note on stderr (stdout is the command's answer, and may be the very file
written: parser.dispatch), a directory's files counted and named in that one line."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from replay.cli import main
from tests.library_scan import ROOT, assert_one_place, docstring_ids

HOME = "replay/cli/options.py"
ARTICLE = str(ROOT / "sample_dumps" / "article_round")
# a message that starts by saying what was written: "wrote PATH", "written: PATH", "packed N of M ..."
CONFIRMATION = re.compile(r"^\W*((wrote|written)\b|packed \{)", re.IGNORECASE)


def _confirmations(path: Path) -> list[str]:
    """Every string literal and f-string (docstrings aside) worded as a confirmation of a write."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = docstring_ids(tree)
    parts = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings | parts:
            text = node.value
        else:
            continue
        found += [text] if CONFIRMATION.search(str(text)) else []
    return found


def test_only_note_written_words_a_confirmation():
    assert_one_place(HOME, _confirmations, "a confirmation of a written file", "replay.cli.options.note_written")


@pytest.mark.parametrize(
    "argv, line",
    [
        (["stats", ARTICLE, "-o", "{d}/st"], "wrote 20 files to {d}/st/: summary.csv, summary.parquet, accepted_"),
        (["plot", ARTICLE, "-o", "{d}/pl", "--format", "png"], "wrote 6 files to {d}/pl/: accepted_length.png, "),
        (["report", ARTICLE, "-o", "{d}/rep"], "wrote {d}/rep/index.html: {n} table files in {d}/rep/tables/"),
        (["compare", ARTICLE, "--csv", "--per-round", "{d}/pr.csv"], "wrote 7 rows to {d}/pr.csv"),
        (["compare", ARTICLE, "--csv", "--plot", "{d}/c.png"], "wrote {d}/c.png"),
        (["batch", ARTICLE, "-o", "{d}/b.csv"], "wrote 1 row to {d}/b.csv"),
        (["pack", ARTICLE, "-o", "{d}/x"], "wrote 1 of 1 round(s) to {d}/x: 1 group(s), "),
    ],
    ids=["stats", "plot", "report", "compare --per-round", "compare --plot", "batch", "pack"],
)
def test_every_command_confirms_in_one_stderr_note(argv, line, tmp_path, capsys):
    code = main([a.format(d=tmp_path) for a in argv] + ["--no-progress"])
    out, err = capsys.readouterr()
    notes = [x for x in err.splitlines() if "wrote" in x]
    tables = tmp_path / "rep" / "tables"  # report's: the note counts what it wrote there
    n = len(list(tables.iterdir())) if tables.is_dir() else 0
    assert code == 0 and len(notes) == 1 and notes[0].startswith("specreplay: " + line.format(d=tmp_path, n=n)), err
    assert str(tmp_path) not in out  # stdout keeps the command's answer alone
