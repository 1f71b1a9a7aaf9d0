"""One rule for a number in JSON (replay.core.json_figures): every command's JSON, and the JSON text
inside compare's and report's cost model lines, writes a float read as the text reads a figure it
prints (READ_DECIMALS decimals, replay.core.headline.fixed_text), so that one quantity summed in two
orders is written as one number and fixed_text of a JSON figure is the text's string; and no library
module writes a table's JSON by another rule (pandas' to_json rounds by its own code; json.dumps
writes a computation's last bits: 0.09999999999999999). The commands' figures are checked against
round(x, READ_DECIMALS) here, not against the rule's function, so those checks read the outputs alone.
"""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from replay.core.headline import READ_DECIMALS, fixed_text, metric_text
from tests.test_printed_digits_agree import column, write_tie_dump
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
    """Every float of ``obj`` is read to READ_DECIMALS decimals (what json_figure writes); returns how many."""
    found = floats_in(obj)
    off = [x for x in found if round(x, READ_DECIMALS) != x]
    assert not off, f"{what}: floats with more than {READ_DECIMALS} decimals: {off[:5]}"
    return len(found)


def test_the_rule():
    from replay.core.json_figures import figures_text, json_figure, json_figures

    assert figures_text({"a": 0.09999999999999999, "b": [0.1 + 0.2, 3.2e-06], "c": float("nan")}) == (
        '{"a": 0.1, "b": [0.3, 3.2e-06], "c": null}'
    )
    assert json_figure(2 / 3) == 0.6666666667 and json_figure(float("-inf")) is None
    assert json_figure(1.23456789012e-06) == 1.2346e-06  # a figure is read to decimals, as the text reads it
    assert json_figures((1, True, "x", None)) == [1, True, "x", None]


def test_one_quantity_summed_in_other_orders_is_written_alike_and_reads_as_the_text():
    """Means of R values summed pairwise (numpy), one by one and exactly (fsum), as the commands sum
    them: their last bits differ, their JSON figures do not, and fixed_text of the figure is the
    string the text prints. At 15 significant digits about 1 mean in 8 of these was written two
    ways. Reading to 10 decimals leaves only a mean within its last bits of a 10-decimal half-point
    to straddle it (1 in about 20,000 of these: the 1,255th of this seed); none of these 1,000 is."""
    from replay.core.json_figures import figures_text, json_figure

    rng = np.random.default_rng(54)
    apart = at_15_digits = 0
    for _ in range(1000):
        values = rng.random(1000) * 4.0  # per-round accepted lengths at T: [R] float64
        sums = (float(values.sum()), sum(values.tolist()), math.fsum(values))
        means = [s / values.shape[0] for s in sums]
        apart += len(set(means)) > 1
        at_15_digits += len({f"{m:.15g}" for m in means}) > 1
        assert len({figures_text(m) for m in means}) == 1, means
        assert {fixed_text(json_figure(m), 4) for m in means} == {metric_text(means[2])}, means
    assert apart > 500 and at_15_digits > 50  # the orders differ in their last bits: the check reads something


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


def test_stats_and_compare_write_the_tie_alike_and_as_the_text_reads(capsys, tmp_path):
    """The dump whose expected accepted length at T = 1 is the tie 5.2106 / 4 = 1.30265, which stats
    and compare sum in different orders (tests/test_printed_digits_agree.py): their JSON figures are
    one number, and fixed_text of it is what their texts print."""
    dump = write_tie_dump(tmp_path / "tie")
    code, out, err = run(capsys, "stats", dump, "--temperature", "1", "--json", "--no-progress")
    assert code == 0, err
    (summary,) = json.loads(out)["summary"]
    code, out, err = run(capsys, "compare", dump, "--temperature", "1", "--json", "--no-progress")
    assert code == 0, err
    recorded = json.loads(out)["configs"][0]
    assert recorded["config"] == "[3]|[2,1]|[1,1]"  # the dump's own tree (tests/test_printed_digits_agree.py)
    pairs = {
        "accepted": (summary["mean_accepted_length_lo"], recorded["expected_accepted_length_lo"]),
        "efficiency": (summary["mean_acceptance_length_lo"], recorded["expected_block_efficiency_lo"]),
    }
    for what, (by_stats, by_compare) in pairs.items():
        assert json.dumps(by_stats) == json.dumps(by_compare), (what, by_stats, by_compare)
    code, stats_text, err = run(capsys, "stats", dump, "--temperature", "1", "--no-progress")
    assert code == 0, err
    code, compare_text, err = run(capsys, "compare", dump, "--temperature", "1", "--no-progress")
    assert code == 0, err
    texts = {
        "accepted": {
            column(stats_text, "run", "mean_accepted_length"),
            column(compare_text, "config", "expected_accepted_length"),
        },
        "efficiency": {
            column(stats_text, "run", "mean_acceptance_length"),
            column(compare_text, "config", "expected_block_efficiency"),
        },
    }
    for what, (by_stats, _) in pairs.items():
        assert texts[what] == {fixed_text(by_stats, 4)}, (what, texts[what], by_stats)


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
    """No pandas to_json (its own rounding code): a table's rows go through frame_records."""
    copies = []
    for top in ("replay", "analysis"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("#", 1)[0]
                if re.search(r"\.to_json\([^)]", code):
                    copies.append(f"{rel}:{no}: {code.strip()}")
    assert not copies, "a table's JSON outside replay.core.json_figures.frame_records:\n" + "\n".join(copies)
