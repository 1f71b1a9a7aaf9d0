"""Packed runs: every command that reads a dump directory reads the packed run with identical results."""

from __future__ import annotations

import json
import shutil
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from replay.cli import main
from replay.core.config import TreeConfig
from replay.engine.options import ReplayOptions
from replay.engine.runs import iter_run_results, open_run, replay_run
from replay.io.dumpwrite import StepRecord, write_round
from replay.io.packed.pack import PackedRun, is_packed_run, pack_batches, pack_directory
from replay.testing.batch_synth import synth_run
from replay.testing.replayer import replay_directory
from replay.testing.synth import default_hit_probs, synth_round, write_synthetic_run, write_text_matrix
from replay.util.errors import DumpError, NoRoundsError

ARTICLE = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])
SAMPLES = Path(__file__).resolve().parent.parent / "sample_dumps"


def _text_round(d: Path, key: tuple[int, int], rnd, pad: bool = False, prefix: str = "{}") -> None:
    """Write a synthetic round as text files (ids + .scores.txt companions), names formatted by ``prefix``."""
    a, b = key
    for i, st in enumerate(rnd.steps):
        ka, kb = (a - 1, b - 1) if i == 0 else (a, b)
        name = f"draft_step_{i}_{prefix.format(ka)}_{prefix.format(kb)}"
        ids = st.ids.copy()
        if pad and i == 1:
            ids[0, 0] = -1  # padding inside a kept column: the reference rejects the round
        write_text_matrix(d / name, ids)
        (d / f"{name}.scores.txt").write_text("\n".join(" ".join(f"{v:.6f}" for v in row) for row in st.scores) + "\n")
    write_text_matrix(d / f"validate_{prefix.format(a)}_{prefix.format(b)}", rnd.validate.ids)


@pytest.fixture(scope="module")
def messy(tmp_path_factory) -> Path:
    """npz rounds with scores and parents, early stops, text rounds, and everything that gets skipped."""
    d = tmp_path_factory.mktemp("messy")
    write_synthetic_run(d, ARTICLE, 40, seed=3, with_parents=True, early_stop_rate=0.2)
    rng = np.random.default_rng(5)
    hit = default_hit_probs(4, 8)
    for k, key in enumerate([(900, 916), (908, 924), (916, 932)]):  # text, one rejected
        _text_round(d, key, synth_round(rng, ARTICLE, key, hit, cols=8), pad=(k == 1))
    _text_round(d, (980, 996), synth_round(rng, ARTICLE, (980, 996), hit, cols=8), pad=True, prefix="{:04d}")
    _text_round(d, (988, 1004), synth_round(rng, ARTICLE, (988, 1004), hit, cols=8), prefix="{:05d}")
    bad = synth_round(rng, ARTICLE, (950, 966), hit, cols=8)
    write_round(d, (950, 966), bad.steps, bad.validate)
    (d / "validate_950_966.npz").write_bytes(b"not a zip")  # unreadable: the round is skipped
    write_round(d, (970, 986), (), StepRecord(np.ones((3, 2), dtype=np.int64)))  # validate without drafts
    (d / "notes.dat").write_text("not a dump file\n")
    return d


def _json(rep) -> list[dict]:
    return [r.to_json() for r in rep.results]


@pytest.fixture(scope="module")
def packed(messy, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "messy.run"
    pack_directory(messy, out, workers=2, block_rounds=8)
    return out


def test_reference_replay_identical_on_packed_run(messy, packed):
    direct, via_pack = replay_directory(messy), replay_directory(packed)
    # 2 rejected, 1 unreadable, 2 names, 1 manifest.json (it lists the 40 synthetic rounds, not the 7 added)
    assert len(direct.results) == 43 and len(direct.skipped) == 6
    assert _json(via_pack) == _json(direct)
    assert via_pack.skipped == direct.skipped  # same order, same messages, same original paths
    assert any("0980_0996" in s.reason for s in direct.skipped)  # a name that does not round-trip


def test_batch_replay_identical_on_directory_and_packed_run(messy, packed):
    reference = replay_directory(messy)
    for source in (messy, packed):
        rep = replay_run(source, workers=2)
        assert list(rep.iter_json()) == _json(reference)
        assert rep.skipped == reference.skipped


def test_cli_reads_packed_runs(messy, packed, capsys):
    outputs = {}
    for cmd in ("replay", "batch"):
        for source in (messy, packed):
            code = main([cmd, str(source), "--json"])
            outputs[cmd, source] = (code, capsys.readouterr())
    direct = outputs["replay", messy]
    assert direct[0] == 1 and direct[1].out.count("\n") == 43
    # a skip of the packed run names it and the round, then the files as named where it was packed from
    assert "specreplay: skipped round 950_966: " in direct[1].err
    assert f"specreplay: skipped round 950_966 of {packed} (packed from {messy}): " in outputs["replay", packed][1].err
    for key, (code, cap) in outputs.items():
        err = cap.err.replace(f" of {packed} (packed from {messy}): ", ": ")
        assert (code, cap.out, err) == (direct[0], direct[1].out, direct[1].err), key
    main(["replay", str(packed), "--round", "900_916"])
    text = capsys.readouterr().out
    main(["replay", str(messy), "--round", "900_916"])
    assert text.replace(str(packed), "DIR") == capsys.readouterr().out.replace(str(messy), "DIR").replace(
        str(messy / "config.json"), "DIR/config.json"
    ).replace(str(messy / "manifest.json"), "DIR/manifest.json")


def test_only_round_and_missing_round(messy, packed):
    opts = ReplayOptions(only_round=(908, 924))
    for source in (messy, packed):
        rep = replay_run(source, opts)
        assert len(rep.result) == 1 and not rep.result.ok[0]
        assert [s.what for s in rep.skipped][-1] == "round 908_924"
        assert replay_directory(source, opts).skipped == rep.skipped
    with pytest.raises(DumpError, match="--round 1_2: no such round"):
        replay_run(packed, ReplayOptions(only_round=(1, 2)))
    with pytest.raises(DumpError, match="--round 1_2: no such round"):
        replay_directory(packed, ReplayOptions(only_round=(1, 2)))


def test_checksums_and_corruption(packed, tmp_path):
    run = PackedRun.open(packed)
    assert run.verify() == []
    copy = tmp_path / "copy.run"
    shutil.copytree(packed, copy)
    target = sorted(copy.glob("g*/s1_ids.npy"))[0]
    data = bytearray(target.read_bytes())
    data[-1] ^= 0xFF
    target.write_bytes(bytes(data))
    problems = PackedRun.open(copy).verify()
    assert problems and "s1_ids.npy" in problems[0] and "CRC-32" in problems[0]
    assert main(["verify-pack", str(copy)]) == 2
    assert main(["verify-pack", str(packed)]) == 0


def test_pack_refuses_to_overwrite_and_options_are_baked(messy, packed, tmp_path):
    with pytest.raises(DumpError, match="--force"):
        pack_directory(messy, packed)
    (tmp_path / "taken").mkdir()
    with pytest.raises(DumpError, match="not a packed run"):
        pack_directory(messy, tmp_path / "taken")
    forced = tmp_path / "forced.run"
    pack_directory(SAMPLES / "article_round", forced)
    pack_directory(SAMPLES / "article_round", forced, force=True)
    assert is_packed_run(forced) and not list(tmp_path.glob(".forced.run*"))
    with pytest.raises(DumpError, match="repack"):
        open_run(packed, ReplayOptions(step0_offset=(2, 2)))


def test_a_packed_runs_reading_options_are_told_in_the_options_own_words(tmp_path, capsys):
    """A conflict with the options the run was packed with reads as the options are written (no
    tuple, no RawSpec repr); a --raw that would read none of its files raw is the directory's note."""
    run = tmp_path / "article.run"
    pack_directory(SAMPLES / "article_round", run)
    for argv, said in [
        (["--step0-offset", "0"], "--step0-offset 0, but the run was packed with --step0-offset 1"),
        (["--step0-offset", "1,0"], "--step0-offset 1,0, but the run was packed with --step0-offset 1"),
        (["--scores", "prob"], "--scores prob, but the run was packed with --scores auto"),
        (["--raw", "int32:3:force"], "--raw int32:3:force, but the run was packed with no --raw"),  # its text files
    ]:
        assert main(["replay", str(run), *argv]) == 2
        err = capsys.readouterr().err
        assert err == f"specreplay: error: {run}: {said}: repack the dump directory to change it\n", argv
    assert main(["replay", str(run), "--raw", "int32:3", "--summary"]) == 0
    err = capsys.readouterr().err
    assert main(["replay", str(SAMPLES / "article_round"), "--raw", "int32:3", "--summary"]) == 0
    assert err == capsys.readouterr().err and err.startswith("specreplay: note: --raw int32:3 was given but no file")


def test_raw_binary_dump_packs_with_its_options(tmp_path):
    d = tmp_path / "raw"
    d.mkdir()
    shutil.copy(SAMPLES / "article_round" / "config.json", d)
    for src in (SAMPLES / "article_round").glob("*_1*"):
        rows = [line.split() for line in src.read_text().split("\n") if line.strip()]
        cols = 8
        mat = np.full((len(rows), cols), -1, dtype=np.int32)
        for r, row in enumerate(rows):
            mat[r, : len(row)] = [int(v) for v in row]
        (d / (src.name + ".bin")).write_bytes(mat.tobytes())
    opts = ReplayOptions(raw=__import__("replay.io.formats.matrix_io", fromlist=["RawSpec"]).RawSpec.parse("int32:8"))
    direct = replay_directory(d, opts)
    assert len(direct.results) == 1 and direct.results[0].acceptance.accepted_length == 3
    run = tmp_path / "raw.run"
    pack_directory(d, run, raw=opts.raw)
    assert _json(replay_directory(run)) == _json(direct)
    assert list(replay_run(run).iter_json()) == _json(direct)
    assert PackedRun.open(run).raw == opts.raw


@pytest.mark.slow
def test_reading_streams_in_bounded_memory(tmp_path):
    """Replaying a packed run holds one block, not the run: traced peak far below the run's size."""
    batches = synth_run(ARTICLE, 200_000, seed=1, early_stop_rate=0.05)
    run = tmp_path / "big.run"
    summary = pack_batches(batches, run, block_rounds=2048, manifest={"config": ARTICLE.to_json(), "layout": "all"})
    del batches
    assert summary.packed_rounds == 200_000 and summary.bytes > 60e6
    tracemalloc.start()
    try:
        rounds = committed = 0
        for res, why in iter_run_results(open_run(run), workers=1):
            assert not why
            rounds += len(res)
            committed += int(res.num_committed.sum())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rounds == 200_000 and committed > rounds
    assert peak < summary.bytes / 8, f"peak {peak / 1e6:.1f} MB for a {summary.bytes / 1e6:.1f} MB run"


@pytest.mark.slow
def test_packed_synthetic_run_matches_reference(tmp_path):
    batches = synth_run(ARTICLE, 3000, seed=2, early_stop_rate=0.2, layout="parents", with_parents=True)
    run = tmp_path / "synth.run"
    pack_batches(batches, run, block_rounds=512, manifest={"config": ARTICLE.to_json()})
    meta = json.loads((run / "packed.json").read_text())
    assert meta["packed_rounds"] == 3000 and len(meta["groups"]) == 3
    rep = replay_run(run)
    direct = replay_directory(run)  # the reference, round by round, on the packed arrays
    assert list(rep.iter_json()) == _json(direct)


def test_replay_time_options_apply_to_packed_runs(messy, packed):
    """--config (here a dynamic tree) and --layout are replay-time options: same results both ways."""
    from replay.core.config import SpecConfig

    dynamic = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2], tree_type=1)
    for opts in (ReplayOptions(config=SpecConfig((dynamic,))), ReplayOptions(layout="parents")):
        direct = replay_directory(messy, opts)
        assert _json(replay_directory(packed, opts)) == _json(direct)
        rep = replay_run(packed, opts)
        assert list(rep.iter_json()) == _json(direct) and rep.skipped == direct.skipped


def test_empty_and_junk_directories_pack(tmp_path):
    d = tmp_path / "junk"
    d.mkdir()
    (d / "config.json").write_text('{"gamma": 1, "topKSpec": [[2]], "topHead": [1]}')
    (d / "readme.dat").write_text("nothing here\n")
    with pytest.raises(
        NoRoundsError, match="no round could be packed"
    ) as caught:  # a packed run of nothing helps no one
        pack_directory(d, tmp_path / "junk.run")
    assert caught.value.skipped == replay_directory(d).skipped and not (tmp_path / "junk.run").exists()


def test_batch_table_output(packed, tmp_path, capsys):
    import pandas as pd

    assert main(["batch", str(packed), "--table", str(tmp_path / "rounds.parquet")]) == 1  # some skipped
    frame = pd.read_parquet(tmp_path / "rounds.parquet")
    assert len(frame) == 43  # replayed rounds only, as --json; the 2 rejected ones are listed as skipped
    assert (frame["num_committed"] == frame["accepted_length"] + 1).all()
    assert "rounds replayed: 43" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:  # a usage error, in argparse's words
        main(["batch", str(packed), "--table", str(tmp_path / "rounds.txt")])
    assert refused.value.code == 2 and "use a .parquet or .csv file name" in capsys.readouterr().err


def test_stacks_with_and_without_parents_do_not_concatenate():
    """MatrixStack.concat (how readers pad rounds into one batch) names its rule whichever stack
    comes first, instead of failing inside the padding."""
    from replay.io.roundbatch import MatrixStack

    ids = np.zeros((1, 2, 1), dtype=np.int64)
    with_parents, without = MatrixStack(ids, None, np.zeros((1, 1), dtype=np.int64)), MatrixStack(ids)
    for stacks in ([with_parents, without], [without, with_parents]):
        with pytest.raises(ValueError, match="every stack must have scores \\(and parents\\) or none"):
            MatrixStack.concat(stacks)


def test_packing_a_batch_of_no_rounds_is_refused_and_leaves_nothing(tmp_path):
    cfg = TreeConfig.from_lists([[2], [1, 1]], [1, 2])
    empty = synth_run(cfg, 4)[0].take(slice(0, 0))
    with pytest.raises(ValueError, match="a packed group needs at least one round"):
        pack_batches([empty], tmp_path / "run")
    assert list(tmp_path.iterdir()) == []


def test_a_round_the_packed_run_lists_as_skipped_is_named_with_its_reason(messy, packed, capsys):
    """``--round`` of a round whose files the grouping could not place (validate without drafts)
    gets the directory's answer from the packed run, not "no such round"; a labelled listing names
    the run once (its label), then the directory it was packed from."""
    for source in (messy, packed):
        code = main(["replay", str(source), "--round", "970_986"])
        err = capsys.readouterr().err
        assert code == 2 and f"--round 970_986: that round in {source} cannot be replayed: " in err, err
        assert "no such round" not in err
    assert main(["stats", str(packed), "--label", "mine", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert f"specreplay: mine: skipped round 970_986 (packed from {messy}): " in err, err
    assert f" of {packed}" not in err


def test_the_report_page_calls_a_packed_run_a_packed_run(packed, tmp_path, capsys):
    main(["report", str(packed), "-o", str(tmp_path / "rep"), "--no-progress"])
    capsys.readouterr()
    page = (tmp_path / "rep" / "index.html").read_text(encoding="utf-8")
    assert f"<p>packed run <code>{packed}</code>" in page and "<p>directory <code>" not in page
