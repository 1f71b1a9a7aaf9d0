"""One quantity, one printed string: commands that sum a run's figures in different orders print the
same digits, and a figure and the figure + 1 round alike on a decimal tie.

The dump: four hand-made rounds whose expected accepted length at T = 1 is 5.2106 / 4 = 1.30265, a
decimal tie at four decimals. ``stats`` summed it to 1.30265000...01 (printed 1.3027) and ``compare``
to 1.30264999...98 (printed 1.3026), and ``stats`` printed 1.3027 beside 2.3026 in one row.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from replay import cli
from replay.core.headline import fixed_text, metric_text

CONFIG = {"gamma": 3, "topKSpec": [[3], [2, 1], [1, 1]], "topHead": [1, 2, 2], "treeType": 0}
# (key, draft steps [(ids, probabilities)], validate (ids, probabilities)); all layout
ROUNDS = [
    (
        (100, 200),
        [
            ([[11, 12, 13]], [[0.5, 0.3, 0.2]]),
            ([[21, 22, 23], [24, 25, 26]], [[0.6, 0.3, 0.1], [0.9, 0.05, 0.05]]),
            ([[31, 32, 33], [34, 35, 36]], [[0.7, 0.2, 0.1], [0.8, 0.1, 0.1]]),
        ],
        (
            [[11, 12, 13, 99], [21, 22, 98, 97], [24, 97, 96, 95], [95, 94, 93, 92], [31, 92, 91, 90]]
            + [[90, 89, 88, 87], [34, 87, 86, 85], [500, 501, 502, 503], [503, 504, 505, 506]],
            [[0.6, 0.3, 0.05, 0.02], [0.5, 0.4, 0.05, 0.02], [0.7, 0.1, 0.1, 0.05], [0.5, 0.3, 0.1, 0.05]]
            + [[0.8, 0.1, 0.05, 0.02], [0.5, 0.3, 0.1, 0.05], [0.6, 0.2, 0.1, 0.05]]
            + [[0.5, 0.3, 0.1, 0.05]] * 2,
        ),
    ),
    (
        (105, 205),
        [
            ([[11, 12, 13]], [[0.4, 0.35, 0.25]]),
            ([[21, 22, 23], [24, 25, 26]], [[0.5, 0.45, 0.05], [0.5, 0.3, 0.2]]),
            ([[31, 32, 33], [37, 38, 39]], [[0.6, 0.3, 0.1], [0.7, 0.2, 0.1]]),
        ],
        (
            [[11, 13, 12, 99], [22, 21, 77, 76], [24, 78, 79, 75], [80, 81, 82, 74], [31, 83, 84, 73]]
            + [[85, 37, 86, 72], [87, 88, 89, 71], [600, 601, 602, 603], [603, 604, 605, 606]],
            [[0.5, 0.3, 0.1, 0.05], [0.6, 0.2, 0.1, 0.05], [0.4, 0.3, 0.2, 0.05], [0.5, 0.2, 0.1, 0.05]]
            + [[0.5, 0.2, 0.1, 0.05], [0.45, 0.35, 0.1, 0.05], [0.5, 0.2, 0.1, 0.05]]
            + [[0.5, 0.3, 0.1, 0.05]] * 2,
        ),
    ),
    (
        (110, 210),
        [
            ([[11, 12, 13]], [[0.5, 0.3, 0.2]]),
            ([[21, 22, 23], [24, 25, 26]], [[0.6, 0.3, 0.1], [0.9, 0.05, 0.05]]),
            ([[31, 32, 33], [34, 35, 36]], [[0.7, 0.2, 0.1], [0.8, 0.1, 0.1]]),
        ],
        (
            [[50, 12, 11, 13], [21, 22, 51, 64], [52, 24, 53, 65], [54, 55, 56, 66], [31, 57, 58, 67]]
            + [[59, 60, 61, 68], [62, 34, 63, 69], [700, 701, 702, 703], [703, 704, 705, 706]],
            [[0.7, 0.12, 0.1, 0.05], [0.4, 0.3, 0.2, 0.05], [0.5, 0.2, 0.1, 0.05], [0.5, 0.2, 0.1, 0.05]]
            + [[0.9, 0.05, 0.01, 0.005], [0.5, 0.2, 0.1, 0.05], [0.5, 0.4, 0.05, 0.01]]
            + [[0.5, 0.3, 0.1, 0.05]] * 2,
        ),
    ),
    (
        (115, 215),
        [
            ([[11, 12, 13]], [[0.5, 0.3, 0.2]]),
            ([[21, 22, 23], [24, 25, 26]], [[0.6, 0.3, 0.1], [0.9, 0.05, 0.05]]),
        ],
        (
            [[12, 11, 13, 40], [21, 22, 41, 42], [24, 43, 44, 45], [46, 47, 48, 49]]
            + [[800, 801, 802, 803], [804, 805, 806, 807], [900, 901, 902, 903]],
            [[0.5, 0.2, 0.1, 0.05], [0.5, 0.2, 0.1, 0.05], [0.6, 0.2, 0.1, 0.05], [0.5, 0.2, 0.1, 0.05]]
            + [[0.5, 0.2, 0.1, 0.05]] * 3,
        ),
    ),
]


def write_tie_dump(path: Path) -> Path:
    path.mkdir()
    (path / "config.json").write_text(json.dumps(CONFIG))
    for (a, b), steps, (val_ids, val_p) in ROUNDS:
        for i, (ids, p) in enumerate(steps):
            name = f"draft_step_0_{a - 1}_{b - 1}" if i == 0 else f"draft_step_{i}_{a}_{b}"
            np.savez(path / f"{name}.npz", ids=np.array(ids, np.int64), scores=np.array(p))
        np.savez(path / f"validate_{a}_{b}.npz", ids=np.array(val_ids, np.int64), scores=np.array(val_p))
    return path


def run_cli(*argv) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main([str(a) for a in argv])
    assert rc == 0, err.getvalue()
    return out.getvalue()


def after(text: str, label: str) -> str:
    """The value printed after ``label`` on its line."""
    (line,) = [ln for ln in text.splitlines() if label in ln]
    return line.split(label, 1)[1].split()[0]


def column(text: str, header: str, name: str) -> str:
    """``name``'s cell in the first row below the header line that starts with ``header``."""
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.split()[:1] == [header])
    return lines[at + 1].split()[lines[at].split().index(name)]


def test_every_command_prints_the_tie_the_same_way(tmp_path):
    dump = write_tie_dump(tmp_path / "tie")
    rounds = [json.loads(ln) for ln in run_cli("replay", dump, "--temperature", "1", "--json").splitlines()]
    mean = math.fsum(r["sampling"]["expected_accepted_length"] for r in rounds) / len(rounds)
    assert metric_text(mean) in {"1.3026", "1.3027"}  # the hand value 5.2106 / 4 = 1.30265: a tie

    summary = run_cli("replay", dump, "--temperature", "1", "--summary")
    stats = run_cli("stats", dump, "--temperature", "1")
    compare = run_cli("compare", dump, "--temperature", "1")
    accepted = {
        "replay": after(summary, "expected accepted length per round:"),
        "stats": column(stats, "run", "mean_accepted_length"),
        "compare": column(compare, "config", "expected_accepted_length"),
    }
    efficiency = {
        "replay": after(summary, "expected block efficiency:"),
        "stats": column(stats, "run", "mean_acceptance_length"),
        "compare": column(compare, "config", "expected_block_efficiency"),
    }
    assert set(accepted.values()) == {metric_text(mean)}, accepted
    assert set(efficiency.values()) == {metric_text(mean + 1)}, efficiency
    assert Decimal(efficiency["stats"]) == Decimal(accepted["stats"]) + 1


@pytest.mark.parametrize("tie", [1.30265, 2.30265, 1.17765, 0.00005, 7.99995])
def test_values_a_few_ulps_apart_print_alike_and_a_value_plus_one_rounds_alike(tie):
    near = [tie, np.nextafter(tie, 0.0), np.nextafter(tie, 9.0), np.nextafter(np.nextafter(tie, 9.0), 9.0)]
    assert len({metric_text(v) for v in near}) == 1
    assert Decimal(metric_text(tie + 1)) == Decimal(metric_text(tie)) + 1


def test_fixed_text_keeps_what_python_prints_away_from_ties():
    for v in [0.0, 1.5, -2.25, 1 / 3, 2 / 3, 123456.789, -1e-12]:
        for digits in (3, 4):
            assert fixed_text(v, digits) == f"{v:.{digits}f}"
    assert [fixed_text(v, 4) for v in (math.nan, math.inf, -math.inf)] == ["nan", "inf", "-inf"]
