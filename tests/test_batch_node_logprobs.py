"""batch --temperature T at a T the manifest lists in node_logprob_temperatures: exact
from the validate files' node_logprobs, as replay --temperature is, round by round, and the same on
a packed copy of the dump (packed runs carry the array as v_node_logp).

Each check goes through the CLI and compares with the round path (``replay --temperature``) byte for
byte: the JSON lines, the skipped list and the notes on stderr; the numbers are also checked by hand
on a round written by hand (E[L] = 1.2).
"""

import json
import math
import shutil
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from replay.cli import main
from replay.core.config_grammar import parse_config_text
from replay.testing.synth import add_node_logprobs, write_synthetic_run

TREE = "[4]|[2,2]|[1,1]"
TEMPS = (0.7, 1.0)


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """Two dumps of 60 rounds (npz, all layout, scores, early stops: several tree shapes): every
    round with node_logprobs at 0.7 and 1, and one where every third round has none."""
    root = tmp_path_factory.mktemp("node_logprobs")
    out = {}
    for name, skip in (("every", 0), ("mixed", 3)):
        d = root / name
        write_synthetic_run(d, parse_config_text(TREE), 60, seed=4, early_stop_rate=0.3)
        given = add_node_logprobs(d, TEMPS, seed=5, skip_every=skip)
        out[name] = (d, given)
    return out


def assert_same(got: tuple[int, str, str], want: tuple[int, str, str]) -> None:
    """batch's (code, out, err) is replay's: the exit code, stderr (its notes' "specreplay batch:"
    read as replay's), every record, and every sampling value to 1e-12 (today they are equal byte
    for byte; the tolerance leaves the rule's inner sums free to change order)."""
    assert got[0] == want[0]
    assert got[2].replace("specreplay batch: ", "specreplay replay: ") == want[2]
    rows, ref = [json.loads(x) for x in got[1].splitlines()], [json.loads(x) for x in want[1].splitlines()]
    assert len(rows) == len(ref)
    for a, b in zip(rows, ref):
        sa, sb = a.pop("sampling"), b.pop("sampling")
        assert a == b and list(sa) == list(sb)
        for k, v in sb.items():
            assert sa[k] == (v if isinstance(v, (bool, type(None))) else pytest.approx(v, abs=1e-12)), (b["round"], k)


def sampling_lines(out: str) -> list[dict]:
    return [json.loads(line)["sampling"] for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("t", ["0.7", "1", "0.5", "0"])
@pytest.mark.parametrize("which", ["every", "mixed"])
def test_batch_equals_replay_at_recorded_and_other_temperatures(dumps, capsys, t, which):
    d, given = dumps[which]
    want = cli(capsys, "replay", d, "--temperature", t, "--json", "--no-progress")
    got = cli(capsys, "batch", d, "--temperature", t, "--json", "--no-progress")
    assert_same(got, want)  # exit code, every line, and stderr (notes included)
    assert want[0] == 0
    rows = [json.loads(line) for line in want[1].splitlines()]
    own = {r["round"] for r in rows if r["sampling"]["from_node_logprobs"]}
    recorded = float(t) in TEMPS
    assert own == (set(given) if recorded else set())
    assert len(rows) == 60
    if recorded:
        assert all(r["sampling"]["exact"] for r in rows if r["round"] in own)
    if recorded and which == "mixed":  # the rounds without the array fall back, and both say so once
        assert want[2].count("note: manifest.json records node_logprobs") == 1
        assert f"{60 - len(given)} without node_logprobs in their validate file" in want[2]
    elif recorded:
        assert "records node_logprobs" not in want[2]
    elif float(t) > 0:  # another T than the recorded ones: one note names them (T = 0 is the greedy replay)
        assert want[2].count(f"records node_logprobs at T = 0.7, 1, not at T = {t}") == 1
    else:
        assert "records node_logprobs" not in want[2]


def test_batch_summary_and_table_at_a_recorded_t(dumps, capsys, tmp_path):
    """The summary's sampling lines are replay --summary's (with the count from node_logprobs), and the
    table's columns are the JSON's values."""
    d, given = dumps["mixed"]
    _, replayed, _ = cli(capsys, "replay", d, "--temperature", "0.7", "--summary", "--no-progress")
    table = tmp_path / "rounds.parquet"
    code, batched, err = cli(capsys, "batch", d, "--temperature", "0.7", "-o", table, "--no-progress")
    assert code == 0, err
    tail = replayed[replayed.index("sampling at T = 0.7") :]
    assert tail in batched
    assert f"exact from the dump's node_logprobs at T: {len(given)} round(s)" in tail
    _, out, _ = cli(capsys, "batch", d, "--temperature", "0.7", "--json", "--no-progress")
    lines = sampling_lines(out)
    frame = pd.read_parquet(table)
    assert frame["from_node_logprobs"].tolist() == [s["from_node_logprobs"] for s in lines]
    assert frame["expected_accepted_length_lo"].tolist() == [s["expected_accepted_length_lo"] for s in lines]


@pytest.mark.parametrize("command", ["batch", "replay"])
@pytest.mark.parametrize("t", ["0.7", "1", "0.5"])
def test_a_packed_run_carries_the_node_logprobs(dumps, capsys, tmp_path, command, t):
    d, given = dumps["mixed"]
    run = tmp_path / "run"
    code, _, err = cli(capsys, "pack", d, "-o", run, "--no-progress", "--verify")
    assert code == 0 and "node_logprobs" not in err  # nothing left behind, nothing to say
    groups = json.loads((run / "packed.json").read_text())["groups"]
    assert any("v_node_logp" in g["arrays"] for g in groups) and any("v_node_logp" not in g["arrays"] for g in groups)
    want = cli(capsys, "replay", d, "--temperature", t, "--json", "--no-progress")
    assert_same(cli(capsys, command, run, "--temperature", t, "--json", "--no-progress"), want)


def test_an_old_packed_run_without_node_logprobs_still_reads_and_says_so(dumps, capsys, tmp_path):
    """A run packed before packed runs carried node_logprobs: no v_node_logp anywhere. It replays as
    before (the top-K bounds at the recorded T, batch equal to replay) and the note names the rounds."""
    from replay.io.fastread import ReadOptions
    from replay.io.manifest import group_rounds, read_manifest
    from replay.io.packed.pack import pack_batches
    from replay.testing.in_memory import read_directory

    d, _ = dumps["every"]
    run = tmp_path / "old"
    m = read_manifest(d)
    batches, _ = read_directory(d, group_rounds(d, None, m), m.root_tokens, ReadOptions(), 1)
    assert all(b.validate.node_logp is not None for b in batches)
    old = [replace(b, validate=replace(b.validate, node_logp=None)) for b in batches]
    manifest = json.loads((d / "manifest.json").read_text())
    pack_batches(old, run, manifest=manifest)
    assert not any("v_node_logp" in g["arrays"] for g in json.loads((run / "packed.json").read_text())["groups"])
    want = cli(capsys, "replay", run, "--temperature", "0.7", "--json", "--no-progress")
    got = cli(capsys, "batch", run, "--temperature", "0.7", "--json", "--no-progress")
    assert_same(got, want)
    assert want[0] == 0
    assert not any(s["from_node_logprobs"] for s in sampling_lines(want[1]))
    for err in (want[2], got[2]):
        assert "60 without node_logprobs in their validate file or packed run" in err
        assert "top-K bounds" in err


def test_a_round_whose_node_logprobs_have_other_columns_is_skipped_as_replay_skips_it(dumps, capsys, tmp_path):
    d = tmp_path / "d"
    shutil.copytree(dumps["every"][0], d)
    victim = sorted(d.glob("validate_*.npz"))[5]
    with np.load(victim) as z:
        arrays = dict(z)
    arrays["node_logprobs"] = arrays["node_logprobs"][:, :1]
    np.savez(victim, **arrays)
    want = cli(capsys, "replay", d, "--temperature", "0.7", "--json", "--no-progress")
    got = cli(capsys, "batch", d, "--temperature", "0.7", "--json", "--no-progress")
    assert_same(got, want)
    assert want[0] == 1
    assert f"{victim} (node_logprobs): 1 column(s) but manifest.json node_logprob_temperatures lists 2" in want[2]


def test_the_hand_written_round_is_exact_through_batch(capsys, tmp_path):
    """p(10) = 0.6, p(11) = 0.3, p(12 | 10) = 0.5 at T = 0.5: E[L] = 0.6 + 0.3 + 0.6 * 0.5 = 1.2,
    Var = E[L^2] - 1.2^2 with P(L = 1) = 0.6 * 0.5 + 0.3, P(L = 2) = 0.3 (no scores needed)."""
    from tests.test_user_mistakes import node_logprob_dump

    d = node_logprob_dump(tmp_path / "d", (0.6, 0.3, 0.5))
    code, out, err = cli(capsys, "batch", d, "--temperature", "0.5", "--json", "--no-progress")
    assert code == 0, err
    (s,) = sampling_lines(out)
    assert s["exact"] and s["from_node_logprobs"]
    assert s["expected_accepted_length"] == pytest.approx(1.2, abs=1e-12)
    assert s["accepted_length_variance"] == pytest.approx(0.6 * 1 + 0.3 * 4 - 1.2**2, abs=1e-12)
    assert s["length_at_least_lo"] == pytest.approx([0.9, 0.3], abs=1e-12)
    assert math.isclose(s["expected_block_efficiency_lo"], 2.2)


def test_packed_json_checks_the_node_logprobs_shape(dumps, capsys, tmp_path):
    """v_node_logp's shape is checked on open like every array's (a re-sealed edit included): one
    line naming packed.json and the field, exit 2."""
    from replay.io.packed.format import seal_meta

    run = tmp_path / "run"
    assert cli(capsys, "pack", dumps["every"][0], "-o", run, "--no-progress")[0] == 0
    meta = run / "packed.json"
    body = json.loads(meta.read_text())
    spec = next(g for g in body["groups"] if "v_node_logp" in g["arrays"])["arrays"]["v_node_logp"]
    size = int(np.dtype(spec["dtype"]).itemsize)
    header = spec["bytes"] - math.prod(spec["shape"]) * size
    spec["shape"][2] = 17  # more temperatures than a validate file may hold (bytes to match: its own check)
    spec["bytes"] = header + math.prod(spec["shape"]) * size
    meta.write_text(json.dumps(seal_meta(body)))
    code, out, err = cli(capsys, "batch", run, "--temperature", "0.7", "--no-progress")
    assert code == 2 and out == ""
    assert "packed.json" in err and "v_node_logp.shape" in err and "1..16 temperatures" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
