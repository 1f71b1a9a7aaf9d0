"""Packed runs of dumps whose matrix sizes vary round by round.

`pack` puts rounds that differ only in matrix sizes into one group, padded to the widest, with
each round's own sizes in <matrix>_rows/_cols/_prows arrays (replay.io.packed.write): a varied
dump packs into a few groups and replays as a few kernel batches. Every command must print on the
packed run what it prints on the dump directory, and runs packed one group per exact shape (what
`pack` wrote before) must still read the same.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import replay.engine.batch.driver as driver
from replay.cli import main
from replay.core.config import TreeConfig
from replay.engine.batch import ERR_OK, replay_batch
from replay.io.packed.pack import PackedRun, pack_batches
from replay.testing.batch_synth import exact_parts, varied_run, write_text_rounds
from replay.testing.in_memory import batch_from_rounds, round_at
from tests.test_batch_property import reference, runs
from tests.test_packed_integrity import _rewrite_block, cli, json_lines
from tests.test_textbatch import CONFIGS, break_files

SIZE_SUFFIXES = ("_rows", "_cols", "_prows")


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, "--no-progress"])
    return code, out.getvalue(), err.getvalue()


def varied_dir(d: Path, seed: int, rounds: int = 60) -> TreeConfig:
    cfg = CONFIGS[seed % len(CONFIGS)]
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg.to_json()))
    layout = ("all", "parents")[seed % 2]
    write_text_rounds(d, varied_run(cfg, rounds, seed=seed, early_stop_rate=0.3, with_scores=False, layout=layout))
    return cfg


def size_arrays(run: Path) -> list[str]:
    body = json.loads((run / "packed.json").read_text())
    return [stem for g in body["groups"] for stem in g["arrays"] if stem.endswith(SIZE_SUFFIXES)]


def count_batches(monkeypatch) -> list[int]:
    """Rounds of each kernel batch (driver._replay_fixed call) from now on."""
    sizes: list[int] = []
    orig = driver._replay_fixed

    def counted(batch, *args, **kwargs):
        sizes.append(len(batch))
        return orig(batch, *args, **kwargs)

    monkeypatch.setattr(driver, "_replay_fixed", counted)
    return sizes


COMMANDS = (
    ("replay", "--json"),
    ("replay",),
    ("batch", "--json"),
    ("batch",),
    ("stats", "--json"),
    ("compare", "--configs", "[2]", "[1]|[1]"),
)


@pytest.mark.parametrize("seed", range(4))
def test_packed_varied_dump_prints_what_the_directory_prints(tmp_path, seed, monkeypatch):
    """Through the CLI, the user's way: pack a varied text dump (some files damaged), then every
    command prints on the run what it prints on the directory, byte for byte but for the path."""
    d = tmp_path / "dump"
    varied_dir(d, seed)
    if seed % 2:
        break_files(d, np.random.default_rng(seed), 3)
    run = tmp_path / "packed" / "dump"  # the same name: stats and compare label runs by it
    run.parent.mkdir()  # an output is made only in an existing directory
    code, _, err = run_cli("pack", str(d), "-o", str(run))
    assert code in (0, 1), err
    body = json.loads((run / "packed.json").read_text())
    kinds = {(g["steps"], tuple(g["exts"])) for g in body["groups"]}
    assert len(body["groups"]) == len(kinds)  # one group per step count and extensions, not per shape
    assert size_arrays(run)  # the rounds' own sizes are kept
    for argv in COMMANDS:
        want = run_cli(argv[0], str(d), *argv[1:])
        got = run_cli(argv[0], str(run), *argv[1:])
        assert got[0] == want[0], argv
        for g, w in zip(got[1:], want[1:]):
            g = g.replace(f" of {run} (packed from {d}): ", ": ")  # a skip names the run, then the dump's files
            g = g.replace(f" (packed from {d}): ", ": ")  # under a run label, the label names the run
            g = g.replace(str(run), "RUN").replace(str(d), "RUN").replace("(packed, ", "(")
            w = w.replace(str(d), "RUN").replace("(directory, ", "(")
            assert _untimed(g) == _untimed(w), argv
    sizes = count_batches(monkeypatch)
    run_cli("batch", str(run))
    assert len(sizes) <= len(kinds) and sum(sizes) == body["packed_rounds"]


def _untimed(text: str) -> str:
    import re

    return re.sub(r"in \d+\.\d+ s \([\d,]+ rounds/s\)", "in T s", text)


def test_runs_packed_one_group_per_shape_read_the_same(tmp_path):
    """What pack wrote before (one group per exact matrix shape, no size arrays): still read, with
    the results of the padded packing."""
    cfg = CONFIGS[0]
    batches = varied_run(cfg, 300, seed=9, early_stop_rate=0.2)
    manifest = {"config": cfg.to_json(), "layout": "all"}
    old, new = tmp_path / "old" / "run", tmp_path / "new" / "run"  # one name: stats labels runs by it
    # Blocks of one round: each exact-shape part fixes its group's shape at once, so parts of
    # other shapes open groups of their own, as the writer did before.
    pack_batches([p for b in batches for p in exact_parts(b)], old, block_rounds=1, manifest=manifest)
    pack_batches(batches, new, manifest=manifest)
    assert not size_arrays(old) and size_arrays(new)
    assert len(PackedRun.open(old).groups) > 50 and len(PackedRun.open(new).groups) == len(batches)
    for argv in (("replay", "--json"), ("batch", "--json"), ("batch",), ("stats", "--json")):
        code, out, err = run_cli(argv[0], str(old), *argv[1:])
        want = run_cli(argv[0], str(new), *argv[1:])
        assert code == want[0] == 0, argv
        assert _untimed(out.replace(str(old), "RUN")) == _untimed(want[1].replace(str(new), "RUN")), argv
        assert err.replace(str(old), "RUN") == want[2].replace(str(new), "RUN"), argv
    code, out, _ = run_cli("replay", str(new), "--json")
    assert code == 0 and len(json_lines(out)) == 300


def test_uniform_runs_pack_without_size_arrays(tmp_path):
    """One matrix shape per step count: no size arrays, one group per step count (as before)."""
    from replay.testing.batch_synth import synth_run

    cfg = CONFIGS[0]
    run = tmp_path / "u.run"
    pack_batches(synth_run(cfg, 400, seed=1, early_stop_rate=0.2), run, block_rounds=64)
    assert not size_arrays(run)
    assert len(PackedRun.open(run).groups) == 3


def test_a_round_larger_than_its_stored_matrix_is_skipped(tmp_path, capsys):
    """A re-hashed edit of a size array (every checksum agrees) cannot make a round read beyond
    its group's arrays: its block is skipped, named, and the rest of the run replays."""
    cfg = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])
    run = tmp_path / "v.run"
    pack_batches(
        varied_run(cfg, 40, seed=2, early_stop_rate=0.0), run, block_rounds=8, manifest={"config": cfg.to_json()}
    )
    stem = next(s for s in size_arrays(run) if s.endswith("_cols"))
    _rewrite_block(run, "g000", stem, 1, lambda blk: blk.__setitem__(0, 10**6))
    for cmd in ("replay", "batch"):
        code, out, err = cli([cmd, str(run), "--json"], capsys)
        assert code == 1 and len(json_lines(out)) == 32, cmd
        assert f"g000/{stem}.npy (block 1): own sizes in [" in err and "skipped block 1 of group g000" in err


def packed_batches(rounds, pieces: list[int], block_rounds: int):
    """``rounds`` given to pack in ``pieces`` (sizes), read back block by block."""
    with tempfile.TemporaryDirectory() as tmp:
        whole = Path(tmp) / "whole.run"
        pack_batches(batch_from_rounds(rounds), whole, block_rounds=len(rounds))
        assert len(PackedRun.open(whole).groups) == len(batch_from_rounds(rounds))  # not one per shape
        run = Path(tmp) / "r.run"
        batches, start = [], 0
        for n in pieces:
            part = rounds[start : start + n]
            batches += batch_from_rounds(part, ordinals=list(range(start, start + len(part))))
            start += n
        pack_batches([b for b in batches if len(b)], run, block_rounds=block_rounds)
        return list(PackedRun.open(run).iter_batches(rounds[0].layout))  # a run's layout is applied on reading


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(runs(), st.data())
def test_packed_varied_runs_match_the_reference(case, data):
    """Random configs and dumps (varied shapes, scores, parents, layouts, defects), packed in random
    pieces and blocks: every round reads back as it was and replays as the reference replays it."""
    cfg, rounds = case
    pieces = data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=len(rounds)))
    pieces.append(len(rounds))  # the rest
    verdicts = {}
    for batch in packed_batches(rounds, pieces, data.draw(st.integers(1, 8))):
        res = replay_batch(batch, cfg, workers=1)
        for i in range(len(batch)):
            ordinal = int(batch.ordinals[i])
            back, orig = round_at(batch, i), rounds[ordinal]
            for a, b in zip((*back.steps, back.validate), (*orig.steps, orig.validate)):
                np.testing.assert_array_equal(a.ids, b.ids)
                for x, y in ((a.logp, b.logp), (a.parents, b.parents)):
                    assert (x is None) == (y is None)
                    if x is not None:
                        np.testing.assert_array_equal(x, y)
            ref = reference(orig, cfg)
            if ref is None:
                assert res.error[i] != ERR_OK
            else:
                assert res.error[i] == ERR_OK and res.round_json(i) == ref
            verdicts[ordinal] = ref
    assert sorted(verdicts) == list(range(len(rounds)))
