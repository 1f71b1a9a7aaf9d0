"""Files → rounds by name, with the step-0 rule; nothing is dropped or merged silently."""

from pathlib import Path

import numpy as np
import pytest

from replay.grouping import group_paths, parse_offset, parse_round_key


def names(*ns):
    return [Path("/d") / n for n in ns]


def test_step0_is_named_one_position_before_its_round():
    g = group_paths(names("draft_step_0_123_139", "draft_step_1_124_140", "draft_step_2_124_140", "validate_124_140"))
    assert g.skipped == ()
    (r,) = g.rounds
    assert r.key == (124, 140)
    assert [Path(fs.data).name for fs in r.steps] == ["draft_step_0_123_139", "draft_step_1_124_140", "draft_step_2_124_140"]


def test_round_committing_one_token_does_not_collide_with_the_next():
    # round (124,140) commits one token; the next round is (125,141) and its step 0 is named 124_140,
    # the same (a, b) as the first round's later steps: grouping must keep them apart.
    g = group_paths(
        names(
            "draft_step_0_123_139", "draft_step_1_124_140", "validate_124_140",
            "draft_step_0_124_140", "draft_step_1_125_141", "validate_125_141",
        )
    )
    assert g.skipped == ()
    assert [(r.key, [Path(fs.data).name for fs in r.steps]) for r in g.rounds] == [
        ((124, 140), ["draft_step_0_123_139", "draft_step_1_124_140"]),
        ((125, 141), ["draft_step_0_124_140", "draft_step_1_125_141"]),
    ]


def test_configurable_offset_zero_and_pair():
    g = group_paths(names("draft_step_0_5_9", "draft_step_1_5_9", "validate_5_9"), step0_offset=(0, 0))
    assert [r.key for r in g.rounds] == [(5, 9)]
    g = group_paths(names("draft_step_0_4_9", "draft_step_1_5_9", "validate_5_9"), step0_offset=parse_offset("1,0"))
    assert [r.key for r in g.rounds] == [(5, 9)] and g.skipped == ()


def test_everything_that_fits_no_round_is_listed():
    g = group_paths(
        names(
            "draft_step_0_1_1", "validate_2_2",  # complete round (2,2)
            "draft_step_0_9_9", "draft_step_2_10_10", "validate_10_10",  # step 1 missing
            "draft_step_1_20_20", "draft_step_0_19_19",  # no validate
            "validate_30_30",  # no draft
            "notes.bin", "validate_2_2.npy",  # stray + a second copy of validate_2_2
            "draft_step_1_40_40.scores",  # companion without data
            "manifest.json", "config.json",  # expected side files: not listed
        )
    )
    assert [r.key for r in g.rounds] == []  # round (2,2) has two validate files: refused, listed
    reasons = {s.what: s.reason for s in g.skipped}
    assert reasons["round 10_10"] == "missing draft_step_1_10_10"
    assert reasons["round 20_20"] == "draft files without validate_20_20"
    assert reasons["round 30_30"] == "validate file without any draft_step file"
    assert "notes.bin" in reasons
    assert any("2 files hold the same matrix" in r for r in reasons.values())
    assert reasons["draft_step_1_40_40.scores"] == "companion file without its data file"
    assert "manifest.json" not in reasons and "config.json" not in reasons


def test_companions_attach_to_their_data_file():
    g = group_paths(names("draft_step_0_1_1.txt", "draft_step_0_1_1.scores.txt", "draft_step_0_1_1.parents", "validate_2_2.txt"))
    (r,) = g.rounds
    assert Path(r.steps[0].scores).name == "draft_step_0_1_1.scores.txt"
    assert Path(r.steps[0].parents).name == "draft_step_0_1_1.parents"


def test_parse_round_key_reads_the_validate_files_numbers():
    assert parse_round_key("124_140") == (124, 140)
    assert parse_round_key("124,140") == (124, 140)
    for bad in ("124", "124_140_1", "a_b", ""):
        with pytest.raises(ValueError, match="expected A_B"):
            parse_round_key(bad)


def random_names(rng, clean: bool) -> list[str]:
    """Names of a few rounds; unless ``clean``, with one odd case of each kind the general path handles."""
    out = ["config.json", "notes.bin"]
    for r in range(int(rng.integers(1, 8))):
        a, b = int(rng.integers(-3, 50)) * 10, int(rng.integers(0, 50)) * 10
        ext = str(rng.choice(["", ".txt", ".npy"]))
        steps = int(rng.integers(1, 4))
        out += [f"draft_step_0_{a - 1}_{b - 1}{ext}"] + [f"draft_step_{s}_{a}_{b}{ext}" for s in range(1, steps)]
        out.append(f"validate_{a}_{b}{ext}")
    if not clean:
        odd = [
            "draft_step_1_7_7.scores", "validate_7_7", "draft_step_2_5_5", "validate_0010_20", "validate_10_20",
            "draft_step_0_9_9", "validate_1_1\nx", "draft_step_0_1_1.bak", "validate_" + "9" * 20 + "_1",
        ]
        out += list(rng.choice(odd, size=int(rng.integers(1, 4)), replace=False))
    return out


@pytest.mark.parametrize("seed", range(30))
def test_bulk_grouping_equals_the_general_one(seed, monkeypatch):
    """The one-pass grouping of complete rounds (_group_complete) against the per-file general path."""
    from replay import grouping

    rng = np.random.default_rng(seed)
    clean = seed % 2 == 0
    paths = [Path("/d") / n for n in dict.fromkeys(random_names(rng, clean))]
    offset = [(1, 1), (0, 0), (2, 1)][seed % 3]
    entries = [(p.name, str(p)) for p in sorted(paths)]
    bulk = grouping._group_complete(entries, offset)
    if clean and offset == (1, 1):
        assert bulk is not None
    fast = group_paths(paths, offset)
    monkeypatch.setattr(grouping, "_group_complete", lambda *a: None)
    general = group_paths(paths, offset)
    assert fast == general
    assert bulk is None or bulk == general
