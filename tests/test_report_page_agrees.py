"""The report page prints what the other commands print: its summary cells are ``stats``'s strings,
and its warnings about how the files were read are ``replay``'s lines (a chain, where no rule chose
anything, has no rank-major fallback warning on either)."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import numpy as np

from replay import cli
from tests.test_printed_digits_agree import write_tie_dump

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def page_of(dump: Path, out: Path) -> str:
    rc, _, err = run_cli("report", dump, "-o", out, "--no-progress")
    assert rc == 0, err
    return (out / "index.html").read_text(encoding="utf-8")


def summary_cells(page: str) -> dict[str, str]:
    """The first row of the page's Summary table, by column."""
    table = page.split("<h2>Summary</h2>", 1)[1].split("</table>", 1)[0]
    heads = re.findall(r"<th>([^<]*)</th>", table)
    cells = re.findall(r"<td>([^<]*)</td>", table.split("<tbody>", 1)[1])
    return dict(zip(heads, cells))


def test_the_summary_table_prints_stats_strings(tmp_path):
    dump = write_tie_dump(tmp_path / "tie")
    rc, text, err = run_cli("stats", dump)
    assert rc == 0, err
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.split()[:1] == ["run"])
    stats = dict(zip(lines[at].split(), lines[at + 1].split()))
    page = summary_cells(page_of(dump, tmp_path / "report"))
    shared = [c for c in page if c in stats and c != "run"]
    assert {"mean_acceptance_length", "mean_accepted_length", "draft_acceptance_rate"} <= set(shared), shared
    assert {c: page[c] for c in shared} == {c: stats[c] for c in shared}


def write_chain_without_scores(path: Path, rounds: int = 3) -> Path:
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"gamma": 2, "topKSpec": [[1], [1]], "topHead": [1, 1]}))
    for k in range(rounds):
        a, b = 10 + 2 * k, 20 + 2 * k
        np.save(path / f"draft_step_0_{a - 1}_{b - 1}.npy", np.array([[5]]))
        np.save(path / f"draft_step_1_{a}_{b}.npy", np.array([[6]]))
        np.save(path / f"validate_{a}_{b}.npy", np.array([[5, 1], [6 if k else 7, 1], [8, 1]]))
    return path


def test_a_chain_without_scores_is_no_guess_on_the_page_either(tmp_path):
    dump = write_chain_without_scores(tmp_path / "chain")
    rc, _, err = run_cli("replay", dump, "--summary")
    assert rc == 0 and "fallback" not in err, err
    assert "fallback" not in page_of(dump, tmp_path / "report")


def test_the_page_shows_replays_fallback_line(tmp_path):
    dump = ROOT / "sample_dumps" / "article_round"
    rc, _, err = run_cli("replay", dump, "--summary")
    (line,) = [ln for ln in err.splitlines() if "rank-major fallback" in ln]
    shown = line.split(": ", 1)[1] if not line.startswith("WARNING") else line  # stderr may name the run first
    shown = shown[shown.index("WARNING") :]
    page = page_of(dump, tmp_path / "report")
    assert page.count("rank-major fallback") == 1
    assert shown in page
