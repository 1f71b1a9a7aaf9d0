"""One rule for a number in JSON (replay.util.json_figures): every command's JSON, and the JSON text
inside compare's and report's cost model lines, writes a float as its 15 significant digits, and
no library module writes a table's JSON by another rule (pandas' to_json rounds to 10 or 15
decimals; json.dumps writes a computation's last bits: 0.09999999999999999)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from replay.util.json_figures import FIGURE_DIGITS, figures_text, json_figure, json_figures
from tests.test_user_mistakes import run

ROOT = Path(__file__).resolve().parents[1]
TIMED = ROOT / "sample_dumps" / "qwen2.5-coder" / "article"  # manifest timings: a measured cost model
SCORED = ROOT / "sample_dumps" / "synthetic_article"  # scores: figures at a temperature


def floats_in(obj) -> list[float]:
    if isinstance(obj, float):
        return [obj]
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in floats_in(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in floats_in(v)]
    return []


def assert_by_the_rule(obj, what: str) -> int:
    """Every float of ``obj`` is written as json_figure writes it; returns how many there are."""
    found = floats_in(obj)
    off = [x for x in found if json_figure(x) != x]
    assert not off, f"{what}: floats with more than {FIGURE_DIGITS} significant digits: {off[:5]}"
    return len(found)


def test_the_rule():
    assert figures_text({"a": 0.09999999999999999, "b": [0.1 + 0.2, 3.2e-06], "c": float("nan")}) == (
        '{"a": 0.1, "b": [0.3, 3.2e-06], "c": null}'
    )
    assert json_figure(2 / 3) == 0.666666666666667 and json_figure(1e-12) == 1e-12  # tiny figures keep their digits
    assert json_figures((1, True, "x", None)) == [1, True, "x", None]


COMMANDS = [
    ("compare", TIMED, "--json"),
    ("stats", TIMED, "--json"),
    ("recommend", TIMED, "--budget", "8", "--bootstrap", "20", "--json"),
    ("stats", SCORED, "--temperature", "0.7", "--json"),
    ("compare", SCORED, "--temperature", "0.7", "--json"),
    ("stats", TIMED, "--table", "depth_acceptance", "--json"),
]


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(str(a) for a in c if a != "--json")[:60] for c in COMMANDS])
def test_every_json_output_writes_its_figures_by_the_rule(capsys, argv):
    code, out, err = run(capsys, *argv, "--no-progress")
    assert code in (0, 1), err
    assert assert_by_the_rule(json.loads(out), " ".join(map(str, argv))) > 0


def test_compare_writes_the_cost_model_by_the_rule_in_json_and_in_text(capsys):
    """The measured cost model's seconds (whose full reprs carried 16 and 17 digits) read the same
    in compare --json, in compare's text line and in the report page."""
    code, out, err = run(capsys, "compare", TIMED, "--json", "--no-progress")
    assert code in (0, 1), err
    body = json.loads(out)
    (cost,) = body["cost_models"].values()
    assert assert_by_the_rule(body["cost_models"], "cost_models") and assert_by_the_rule(body["measured"], "measured")
    code, out, err = run(capsys, "compare", TIMED, "--no-progress")
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("cost model:"))
    shown = json.loads(line[line.index("{") :])
    assert shown == {k: v for k, v in cost.items() if k != "source"}


def test_the_report_page_writes_the_cost_model_by_the_rule(capsys, tmp_path):
    code, _, err = run(capsys, "report", TIMED, "-o", tmp_path / "rep", "--no-tables", "--no-progress")
    assert code in (0, 1), err
    page = html.unescape((tmp_path / "rep" / "index.html").read_text(encoding="utf-8"))
    texts = re.findall(r'\{"tokens": \[.*?\}', page)
    assert texts, "no cost model JSON on the page"
    for text in texts:
        assert assert_by_the_rule(json.loads(text), "report cost model") > 0


def test_no_library_module_writes_a_tables_json_by_another_rule():
    """No pandas to_json (10 decimals by default, 15 at most): a table's rows go through frame_records."""
    copies = []
    for top in ("replay", "analysis"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("#", 1)[0]
                if re.search(r"\.to_json\([^)]", code):
                    copies.append(f"{rel}:{no}: {code.strip()}")
    assert not copies, "a table's JSON outside replay.util.json_figures.frame_records:\n" + "\n".join(copies)
