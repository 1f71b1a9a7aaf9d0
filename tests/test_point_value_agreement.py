"""One value and "exact" say the same thing in every command at T (replay.core.point_value).

A dump whose only validate row sums to 1 has bounds that meet at T = 0.7 (one float, the hand value
0.6409) while no round is exact (the row is a top-2 of an unknown vocabulary): replay --summary must
not print "0 exact" next to a bare number without saying the bounds met, and batch --json must not
print null beside two equal bounds. Each command's exact count and one value are checked against
batch --temperature --json's rounds, on that dump (at 0.7 and at 1, where it is exact) and on every
bundled sample with scores.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

from replay.core.headline import metric_text
from replay.core.point_value import BOUNDS_MET
from tests.test_cross_command_agreement import _samples, run_cli

TOL = 1e-9  # the JSON tables read their figures to 10 decimals (replay.core.json_figures)


def write_met_dump(path: Path) -> Path:
    """gamma 1, one round: the draft's one token 5 is the target's first candidate, 0.6 of a row
    [0.6, 0.4] that sums to 1; at T = 0.7, E[L] = 0.6^a / (0.6^a + 0.4^a), a = 1 / 0.7."""
    path.mkdir(parents=True)
    (path / "config.json").write_text('{"gamma":1,"topKSpec":[[1]],"topHead":[1]}\n')
    (path / "draft_step_0_0_0").write_text("5\n")
    (path / "draft_step_0_0_0.scores").write_text("1.0\n")
    (path / "validate_1_1").write_text("5 7\n9 3\n")
    (path / "validate_1_1.scores").write_text("0.6 0.4\n0.5 0.5\n")
    return path


def _cases() -> list[tuple[str, float]]:
    return [("met", 0.7), ("met", 1.0), *((name, 0.7) for name in _samples())]


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> dict[str, Path]:
    return {"met": write_met_dump(tmp_path_factory.mktemp("point") / "met"), **_samples()}


def _batch_rounds(dump: Path, t: str) -> list[dict]:
    rc, out, err = run_cli("batch", dump, "--temperature", t, "--json", "--no-progress")
    assert rc == 0, err
    return [json.loads(line)["sampling"] for line in out.splitlines()]


def _expected_text(lo: float, hi: float, all_exact: bool) -> str:
    """What a summary line says of bounds [lo, hi]: one value (flagged where not proved) or the bounds."""
    if lo != hi:
        return f"[{metric_text(lo)}, {metric_text(hi)}] (width {metric_text(hi - lo)})"
    return metric_text(lo) + ("" if all_exact else f" ({BOUNDS_MET})")


@pytest.mark.parametrize(("name", "t"), _cases())
def test_every_command_states_one_value_and_exact_alike(dumps, name, t):
    dump, text_t = dumps[name], f"{t:g}"
    rc, _, err = run_cli("stats", dump, "--temperature", text_t, "--json")
    if rc == 2 and "no scores" in err:  # a sample without validate scores has no numbers at T
        return
    rounds = _batch_rounds(dump, text_t)
    exact = sum(r["exact"] for r in rounds)
    for r in rounds:  # the point value is given exactly where the bounds are one float
        lo, hi = r["expected_accepted_length_lo"], r["expected_accepted_length_hi"]
        assert r["expected_accepted_length"] == (lo if lo == hi else None), r
        assert not r["exact"] or lo == hi, r
    lo, hi = (float(np.mean([r[f"expected_accepted_length_{s}"] for r in rounds])) for s in ("lo", "hi"))
    met_everywhere = all(r["expected_accepted_length_lo"] == r["expected_accepted_length_hi"] for r in rounds)

    rc, out, err = run_cli("replay", dump, "--temperature", text_t, "--summary", "--no-progress")
    assert rc == 0, err
    head = re.search(r"\((\d+) rounds? with scores.*?, (\d+) exact", out)
    assert head and int(head[1]) == len(rounds) and int(head[2]) == exact, out
    line = re.search(r"expected accepted length per round: (.*)", out)
    assert line and line[1] == _expected_text(lo, hi, exact == len(rounds)), out

    rc, out, err = run_cli("stats", dump, "--temperature", text_t, "--json")
    summary = json.loads(out)["summary"][0]
    rc, out, err = run_cli("stats", dump, "--temperature", text_t, "--csv")
    table = next(csv.DictReader(io.StringIO(out)))
    for row in (summary, table):
        assert int(row["exact_rounds"]) == exact and int(row["rounds"]) == len(rounds), row
        s_lo, s_hi = float(row["mean_accepted_length_lo"]), float(row["mean_accepted_length_hi"])
        assert abs(s_lo - lo) <= TOL and abs(s_hi - hi) <= TOL, (row, lo, hi)
        assert s_lo == s_hi or not met_everywhere, row
    rc, out, err = run_cli("stats", dump, "--temperature", text_t, "--no-progress")
    assert (BOUNDS_MET in out.splitlines()[0]) == (lo == hi and exact < len(rounds)), out

    rc, out, err = run_cli("compare", dump, "--temperature", text_t, "--json", "--no-progress")
    row = json.loads(out)["configs"][0]  # the recorded config, first; every round determined
    assert row["exact"] == exact and row["determined"] == len(rounds), row
    c_lo, c_hi = row["expected_accepted_length_lo"], row["expected_accepted_length_hi"]
    assert abs(c_lo - lo) <= TOL and abs(c_hi - hi) <= TOL and (c_lo == c_hi or not met_everywhere), row
    rc, out, err = run_cli("compare", dump, "--temperature", text_t, "--no-progress")
    said = f"one value shown for {row['config']}: {BOUNDS_MET}" in out
    assert said == (c_lo == c_hi and exact < len(rounds)), out
    if name == "met":
        assert exact == (t == 1.0) and met_everywhere
        hand = 0.6 ** (1 / t) / (0.6 ** (1 / t) + 0.4 ** (1 / t))
        assert rounds[0]["expected_accepted_length"] == pytest.approx(hand, abs=1e-12)
