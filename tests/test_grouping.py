"""Files → rounds by name, with the step-0 rule; nothing is dropped or merged silently."""

from pathlib import Path

import numpy as np
import pytest

from replay.io.dumpnames import parse_round_key
from replay.io.near_miss import near_miss
from replay.io.skipped import count_skipped
from replay.io.step0 import OFFSET_OPTION, Step0Check, format_offset, parse_offset
from replay.testing.path_grouping import group_paths


def names(*ns):
    return [Path("/d") / n for n in ns]


def test_step0_is_named_one_position_before_its_round():
    g = group_paths(names("draft_step_0_123_139", "draft_step_1_124_140", "draft_step_2_124_140", "validate_124_140"))
    assert g.skipped == ()
    (r,) = g.rounds
    assert r.key == (124, 140)
    assert [Path(fs.data).name for fs in r.steps] == [
        "draft_step_0_123_139",
        "draft_step_1_124_140",
        "draft_step_2_124_140",
    ]


def test_round_committing_one_token_does_not_collide_with_the_next():
    # round (124,140) commits one token; the next round is (125,141) and its step 0 is named 124_140,
    # the same (a, b) as the first round's later steps: grouping must keep them apart.
    g = group_paths(
        names(
            "draft_step_0_123_139",
            "draft_step_1_124_140",
            "validate_124_140",
            "draft_step_0_124_140",
            "draft_step_1_125_141",
            "validate_125_141",
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
            "draft_step_0_1_1",
            "validate_2_2",  # complete round (2,2)
            "draft_step_0_9_9",
            "draft_step_2_10_10",
            "validate_10_10",  # step 1 missing
            "draft_step_1_20_20",
            "draft_step_0_19_19",  # no validate
            "validate_30_30",  # no draft
            "notes.bin",
            "validate_2_2.npy",  # stray + a second copy of validate_2_2
            "draft_step_1_40_40.scores",  # companion without data
            "manifest.json",
            "config.json",  # expected side files: not listed
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
    g = group_paths(
        names("draft_step_0_1_1.txt", "draft_step_0_1_1.scores.txt", "draft_step_0_1_1.parents", "validate_2_2.txt")
    )
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
            "draft_step_1_7_7.scores",
            "validate_7_7",
            "draft_step_2_5_5",
            "validate_0010_20",
            "validate_10_20",
            "draft_step_0_9_9",
            "validate_1_1\nx",
            "draft_step_0_1_1.bak",
            "validate_" + "9" * 20 + "_1",
        ]
        out += list(rng.choice(odd, size=int(rng.integers(1, 4)), replace=False))
    return out


@pytest.mark.parametrize("seed", range(30))
def test_bulk_grouping_equals_the_general_one(seed, monkeypatch):
    """The one-pass grouping of complete rounds (group_complete) against the per-file general path."""
    from replay.testing import path_grouping

    rng = np.random.default_rng(seed)
    clean = seed % 2 == 0
    paths = [Path("/d") / n for n in dict.fromkeys(random_names(rng, clean))]
    offset = [(1, 1), (0, 0), (2, 1)][seed % 3]
    entries = [(p.name, str(p)) for p in sorted(paths)]
    bulk = path_grouping.group_complete(entries, offset, OFFSET_OPTION)
    if clean and offset == (1, 1):
        assert bulk is not None
    fast = group_paths(paths, offset)
    monkeypatch.setattr(path_grouping, "group_complete", lambda *a: None)
    general = group_paths(paths, offset)
    assert fast == general
    assert bulk is None or bulk == general


# --- the step-0 offset: stated, default, or shown by the names (Step0Check) ----------------------


def round_names(keys, shift, ext=""):
    """Names of complete two-step rounds at ``keys`` whose step 0 is named ``shift`` = (da, db) earlier."""
    out = []
    for a, b in keys:
        out += [
            f"draft_step_0_{a - shift[0]}_{b - shift[1]}{ext}",
            f"draft_step_1_{a}_{b}{ext}",
            f"validate_{a}_{b}{ext}",
        ]
    return out


@pytest.mark.parametrize("shift", [(0, 0), (2, 1), (-1, -1), (1, 0)])
@pytest.mark.parametrize("stride", [1, 8])
def test_names_that_pair_at_another_offset_are_grouped_at_it_and_say_so(shift, stride):
    keys = [(10 + stride * k, 20 + stride * k) for k in range(5)]
    g = group_paths(names(*round_names(keys, shift)))
    assert [r.key for r in g.rounds] == keys and g.skipped == ()
    assert [Path(r.steps[0].data).name for r in g.rounds] == [
        f"draft_step_0_{a - shift[0]}_{b - shift[1]}" for a, b in keys
    ]
    assert g.step0_offset == shift and g.step0.source == "detected"
    (note,) = g.step0.notes()
    assert f"step-0 offset {format_offset(shift)} detected" in note and f"--step0-offset {format_offset(shift)}" in note
    assert f"draft_step_0_{10 - shift[0]}_{20 - shift[1]} with validate_10_20" in note


def test_the_default_is_kept_when_it_fits_and_nothing_is_said():
    keys = [(10 + k, 20 + k) for k in range(4)]
    g = group_paths(names(*round_names(keys, (1, 1))))
    assert (
        g.step0 == Step0Check((1, 1), "default", 4, 4, 4)
        and g.step0.notes() == ()
        and g.step0.after_replay(4, False) == ()
    )


def test_a_stated_offset_is_used_as_stated_and_the_better_one_named():
    keys = [(10 + k, 20 + k) for k in range(4)]
    g = group_paths(names(*round_names(keys, (0, 0))), (1, 1), source="manifest.json step0_offset")
    assert g.step0_offset == (1, 1) and [r.key for r in g.rounds] == keys[1:]  # each with its neighbour's step 0
    assert {s.what for s in g.skipped} == {"round 10_20", "draft_step_0_13_23"}  # not a round 14_24 that exists nowhere
    (warning,) = g.step0.notes()
    assert "manifest.json step0_offset 1 pairs 3 of 4" in warning and "pass --step0-offset 0" in warning
    assert g.step0.after_replay(3, True) == g.step0.notes()  # rounds accepted something: no second warning
    zero = g.step0.after_replay(3, False)[-1]
    assert "accepted length 0 in all 3 replayed round(s) is probably wrong" in zero and "check --step0-offset" in zero


def test_no_switch_without_a_one_to_one_pairing():
    """One step-0 file lost: no offset groups every round, so the default stays (and its orphans are listed)."""
    keys = [(10 + k, 20 + k) for k in range(4)]
    listed = [n for n in round_names(keys, (0, 0)) if n != "draft_step_0_12_22"]
    g = group_paths(names(*listed))
    assert g.step0_offset == (1, 1) and g.step0.source == "default" and g.step0.notes() == ()
    assert (
        g.step0.other == (0, 0) and g.step0.other_grouped == 3 and g.step0.grouped == 2
    )  # 10, 11, 13 named: 11 and 12 found
    assert "is probably wrong" in g.step0.after_replay(2, False)[0]


@pytest.mark.parametrize("seed", range(12))
def test_detection_is_the_same_in_the_bulk_and_the_general_grouping(seed, monkeypatch):
    """Random complete rounds named at a random offset, with extensions and a stray: one answer."""
    from replay.testing import path_grouping

    rng = np.random.default_rng(100 + seed)
    shift = [(0, 0), (1, 1), (3, 2), (-2, -2)][seed % 4]
    keys = sorted({(int(a) * 3, int(b) * 3) for a, b in rng.integers(0, 40, size=(int(rng.integers(1, 9)), 2))})
    listed = round_names(keys, shift, str(rng.choice(["", ".txt", ".npy"]))) + ["notes.bin"] * (seed % 2)
    paths = [Path("/d") / n for n in dict.fromkeys(listed)]
    fast = group_paths(paths)
    monkeypatch.setattr(path_grouping, "group_complete", lambda *a: None)
    general = group_paths(paths)
    assert fast == general
    assert [r.key for r in general.rounds] == keys and general.step0_offset == shift
    assert general.step0.source == ("default" if shift == (1, 1) else "detected")


@pytest.mark.parametrize(
    "name, guess",
    [
        ("validation_10_20", "validate_10_20"),
        ("valid_10_20.npy", "validate_10_20.npy"),
        ("verify_10_20", "validate_10_20"),
        ("Draft_Step_0_9_19", "draft_step_0_9_19"),
        ("draftstep_1_10_20", "draft_step_1_10_20"),
        ("draft_steps_2_10_20", "draft_step_2_10_20"),
        ("dump_validate_10_20", "validate_10_20"),
        ("validate_10_20_ids.txt", "validate_10_20.txt"),
        ("VALIDATE_10_20", "validate_10_20"),
        ("draft_step_1_10_20_scores.txt", "draft_step_1_10_20.scores.txt"),
        ("validate_10_20", None),
        ("interval_10_20", None),
        ("notes.bin", None),
        ("revalidate_1_2", None),
        # typos: a swapped, missing or wrong letter
        ("valdiate_12_22.npz", "validate_12_22.npz"),
        ("vaildate_1_2", "validate_1_2"),
        ("dump_valdiate_3_4.npy", "validate_3_4.npy"),
        ("draft_stpe_1_12_22.npz", "draft_step_1_12_22.npz"),
        ("Draft-Setp-1_9_19", "draft_step_1_9_19"),
        ("drat_step_0_1_2", "draft_step_0_1_2"),
        ("valiant_1_2", None),
        ("variance_10_20.npy", None),
        ("values_1_2", None),
        ("results_1_2.csv", None),
        # a companion's word with a typo
        ("draft_step_1_10_20.score", "draft_step_1_10_20.scores"),
        ("draft_step_1_10_20.socres.npy", "draft_step_1_10_20.scores.npy"),
        ("validate_10_20_score.txt", "validate_10_20.scores.txt"),
        ("draft_step_2_10_20.parnets", "draft_step_2_10_20.parents"),
        ("draft_step_2_10_20.parent.txt", "draft_step_2_10_20.parents.txt"),
        ("draft_step_2_10_20.params", "draft_step_2_10_20"),  # no companion's word: the data file's name
    ],
)
def test_near_miss_names(name, guess):
    assert near_miss(name) == guess


def test_a_near_miss_completing_a_round_is_counted_in_that_rounds_entry():
    g = group_paths(names("draft_step_0_9_19", "draft_step_1_10_20", "validation_10_20", "Validate_30_30", "notes.bin"))
    assert count_skipped(g.skipped) == (1, 2, 0)
    entries = {s.what: s for s in g.skipped}
    assert (
        entries["round 10_20"].reason
        == "draft files without validate_10_20; validation_10_20 is here: did you mean validate_10_20?"
    )
    assert "/d/validation_10_20" in entries["round 10_20"].paths and "validation_10_20" not in entries
    assert entries["Validate_30_30"].reason.endswith("; did you mean validate_30_30?")  # no round of its own to join
    assert entries["notes.bin"].reason == "name matches neither draft_step_I_A_B nor validate_A_B"


@pytest.mark.parametrize("seed", range(24))
def test_bulk_grouping_with_companions_equals_the_general_one(seed, monkeypatch):
    """Rounds with .scores/.parents companions, some with an orphan or a second companion of one kind."""
    from replay.testing import path_grouping

    rng = np.random.default_rng(200 + seed)
    listed = random_names(rng, True)
    with_companions = []
    for name in listed:
        with_companions.append(name)
        if name.startswith(("draft_step_", "validate_")):
            stem, dot, ext = name.partition(".")
            for kind in (".scores", ".parents"):
                if rng.random() < 0.6:
                    with_companions.append(stem + kind + dot + ext)
    odd = ["draft_step_1_7_7.scores", "validate_0_0.scores.txt", "draft_step_0_9_9.parents.npy", "validate_0_0.bak"]
    if seed % 2:
        with_companions += list(rng.choice(odd, size=int(rng.integers(1, 3)), replace=False))
    paths = [Path("/d") / n for n in dict.fromkeys(with_companions)]
    entries = [(p.name, str(p)) for p in sorted(paths)]
    bulk = path_grouping.group_complete(entries, (1, 1), OFFSET_OPTION)
    if seed % 2 == 0:
        assert bulk is not None
    fast = group_paths(paths, (1, 1))
    monkeypatch.setattr(path_grouping, "group_complete", lambda *a: None)
    general = group_paths(paths, (1, 1))
    assert fast == general
    assert bulk is None or bulk == general


@pytest.mark.parametrize("seed", range(6))
def test_plain_name_columns_equal_the_groups_reading(seed, monkeypatch):
    """name_columns' quick reading (one regex pass, counters as digit runs) gives what DUMP_NAME's groups
    give, on names in and outside the common spelling; outside it, the groups read them."""
    from replay.io import dumpnames

    rng = np.random.default_rng(300 + seed)
    counters = ["1", "-3", "007", "-0", "12", "9" * 17, "9" * 18, "-" + "9" * 17, "-" + "9" * 18]
    tails = ["", ".scores", ".parents", ".score", ".npz", ".NPZ", ".Pt", ".txt", ".npz2", ".sc", ".scores.csv"]
    others = ["manifest.json", "notes.bin", "validate_1", "draft_step_x_1_2", "é", "validate_1_2 ", ".hidden"]
    plain = []
    real = dumpnames._plain_columns
    monkeypatch.setattr(dumpnames, "_plain_columns", lambda *a: plain.append(1) or real(*a))
    for _ in range(300):
        names = []
        for _ in range(int(rng.integers(1, 10))):
            head = str(rng.choice(["validate", f"draft_step_{rng.integers(0, 12)}"]))
            a, b = rng.choice(counters, 2)
            names.append(f"{head}_{a}_{b}{rng.choice(tails)}{rng.choice(tails) if rng.random() < 0.2 else ''}")
        names += list(rng.choice(others, size=int(rng.integers(0, 3)), replace=False))
        names = list(dict.fromkeys(names))
        text = "\n".join(names)
        quick, groups = dumpnames.name_columns(names, text), dumpnames._group_columns(names, text)
        assert (quick is None) == (groups is None), names
        if quick is not None and groups is not None:
            for field in ("dump", "step", "a", "b", "kind"):
                assert np.array_equal(getattr(quick, field), getattr(groups, field)), (field, names)
    assert len(plain) > 20  # the quick reading ran, not only the groups
