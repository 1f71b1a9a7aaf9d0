"""The report page after the split into computing (analysis.report.html.report_page) and rendering
(its Jinja2 template), the analysis function compare and report share, and the long-function list."""

from __future__ import annotations

import json
import sys
from fnmatch import fnmatch
from pathlib import Path

import pandas as pd
import pytest

from replay.cli import main

ROOT = Path(__file__).resolve().parents[1]
QWEN = "sample_dumps/qwen2.5-coder/article"  # real timings: a measured cost model, a baseline timed apart


def test_template_ships_as_package_data():
    """A non-editable install copies only package-data globs: the template must match one."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.10 has none; CI runs 3.11
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    template = ROOT / "analysis/report/templates/report.html.j2"
    assert template.is_file()
    rel = template.relative_to(ROOT / "analysis/report").as_posix()
    assert any(fnmatch(rel, g) for g in data["analysis.report"])
    assert "jinja2>=3.1" in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]


@pytest.mark.slow
def test_report_escapes_and_matches_compare(tmp_path, capsys):
    """The page escapes text (autoescape), and its comparison table holds the numbers compare prints."""
    title = "<b>mine</b> & 'yours'"
    assert main(["report", QWEN, "-o", str(tmp_path / "r"), "--title", title, "--no-progress"]) == 0
    capsys.readouterr()
    page = (tmp_path / "r/index.html").read_text(encoding="utf-8")
    assert "<b>mine</b>" not in page and "&lt;b&gt;mine&lt;/b&gt; &amp; &#39;yours&#39;" in page
    assert page.count("<figure>") >= 6 and 'src="http' not in page  # images embedded, nothing loaded
    assert main(["compare", QWEN, "--json", "--no-progress"]) == 0
    body = json.loads(capsys.readouterr().out)
    from_report = pd.read_csv(tmp_path / "r/tables/compare.csv")
    from_compare = pd.DataFrame(body["configs"])
    # the report compares the default set, compare without --configs too: the same rows
    assert list(from_report["config"]) == list(from_compare["config"])
    for col in ("modelled_speedup_lo", "modelled_speedup_hi", "measured_speedup", "measured_speedup_wall"):
        assert from_report[col].to_numpy() == pytest.approx(from_compare[col].astype(float).to_numpy(), nan_ok=True)
    for col in ("cost_source", "measured_status"):
        assert list(from_report[col].fillna("")) == list(from_compare[col])  # CSV reads "" back as NaN
    # the sample's recorded config was timed interleaved with its baseline (totals.timing): measured
    assert from_compare["measured_status"].iloc[0] == "measured" and from_compare["measured_speedup"].iloc[0] > 0


@pytest.mark.slow
def test_long_functions_are_documented():
    """Every function over 80 lines outside tests is named in docs/architecture.md's list of those that remain."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from long_functions import DEFAULT_ROOTS, long_functions

    files = sorted(f for root in DEFAULT_ROOTS for f in (ROOT / root).rglob("*.py"))
    doc = (ROOT / "docs/architecture.md").read_text(encoding="utf-8")
    listed = doc[doc.index("## Long functions") :]
    missing = []
    for _, path, _, name in long_functions(files, 80):
        rel = Path(path).relative_to(ROOT).as_posix()
        short = name.rsplit(".", 1)[-1]
        if not (short in listed and (rel in listed or rel.startswith("bench/"))):
            missing.append(f"{rel} {name}")
    assert not missing, f"over 80 lines and not in docs/architecture.md's list: {missing}"
