"""`replay` (text, --round, --temperature T as text, --json and --summary) and api.sampling run on the
batch engine alone: the per-round reference (replay_directory, replay_round, round_sampling) is made
to raise, and what they print is compared with what the reference gives, computed here as the
oracle (the round-by-round code these commands ran before), byte for byte.

The trees are drawn from replay.engine.batch.view.RoundView; each view is also checked against the
reference's RoundResult field by field.
"""

from __future__ import annotations

import contextlib
import io
import math
import shutil
import sys
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import replay.cli.api
import replay.cli.cmd_replay
import replay.engine.render
import replay.engine.runs
import replay.engine.sampling
import replay.testing.replayer
from replay.cli import main
from replay.cli.options import (
    options_from_args,
    print_missing_node_logprobs,
    print_needs_vocab,
    print_notes,
    print_reading,
    require_rounds,
    sampled_run_note,
    sampling_vocab,
)
from replay.core.config_grammar import parse_config_text
from replay.engine.batch.view import RoundView, round_views
from replay.engine.render import render_round, sampling_lines
from replay.engine.runs import replay_run
from replay.engine.sampling import (
    SAMPLING_KEYS,
    refused_with_scores,
    sampling_skip,
    vocab_size_of,
)
from replay.testing.records_reference import json_line
from replay.testing.replayer import RoundResult, replay_directory
from replay.testing.round_sampling import node_logprob_gaps, round_sampling
from replay.testing.round_summaries import render_summary, sampling_summary
from replay.testing.synth import add_node_logprobs, write_synthetic_run
from tests.analysis_oracle import random_oracle, write_oracle_run

SAMPLES = "sample_dumps"
TEMPS = ("0", "0.7", "1.5")


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> dict[str, str]:
    """The article's round, the synthetic sample, a run with node_logprobs on two rounds of three
    and early stops (several shapes), one with a round skipped (its validate file removed), one
    with a round the batch replay rejects, and one whose validate scores rise along a row."""
    root = tmp_path_factory.mktemp("batch_only")
    nodes = root / "nodes"
    write_synthetic_run(nodes, parse_config_text("[4]|[2,2]|[1,1]"), 30, seed=4, early_stop_rate=0.3)
    add_node_logprobs(nodes, (0.7, 1.0), seed=5, skip_every=3)
    skipped = root / "skipped"
    shutil.copytree(nodes, skipped)
    victim = sorted(skipped.glob("validate_*"))[3]
    victim.unlink()
    rejected = root / "rejected"
    shutil.copytree(nodes, rejected)
    step = sorted(rejected.glob("draft_step_1_*"))[2]
    with np.load(step) as z:
        arrays = dict(z)
    arrays["ids"][0, 0] = -1  # padding inside a kept column: the round is rejected
    np.savez(step, **arrays)
    return {
        "article": f"{SAMPLES}/article_round",
        "synthetic": f"{SAMPLES}/synthetic_article",
        "nodes": str(nodes),
        "skipped": str(skipped),
        "rejected": str(rejected),
        "rising": str(_rising(root / "rising")),
        "tied": str(_tied(root / "tied")),
        "rising_drafts": str(_rising_drafts(root / "rising_drafts")),
    }


def _rising_drafts(directory):
    """Early stops (several shapes) and three draft rows whose scores rise: round 108_124's step 1
    row 1 (the first), 116_132's step 2 row 1, 132_148's step 0 row 0 (in columns beyond the width);
    two neighbours that tie (140_156's step 1 row 0) and a rising row beyond topHead (148_164's step 2,
    padding) do not count."""
    write_synthetic_run(directory, parse_config_text("[4]|[2,2]|[1,1]"), 12, seed=4, early_stop_rate=0.3)

    def edit(name: str, change) -> None:
        with np.load(directory / f"{name}.npz") as z:
            arrays = dict(z)
        change(arrays)
        np.savez(directory / f"{name}.npz", **arrays)

    def swap(row: int, a: int, b: int):
        return lambda arrays: arrays["scores"][row].__setitem__([a, b], arrays["scores"][row, [b, a]])

    def tie(arrays) -> None:
        arrays["scores"][0, 1] = arrays["scores"][0, 0]

    def rising_padding(arrays) -> None:
        arrays["ids"] = np.vstack([arrays["ids"], arrays["ids"][:1]])
        arrays["scores"] = np.vstack([arrays["scores"], arrays["scores"][:1, ::-1]])

    edit("draft_step_1_108_124", swap(1, 0, 1))
    edit("draft_step_2_116_132", swap(1, 0, 1))
    edit("draft_step_0_131_147", swap(0, 4, 5))
    edit("draft_step_1_140_156", tie)
    edit("draft_step_2_148_164", rising_padding)
    return directory


def _tied(directory):
    """Draft probabilities on a 1/8 grid (as fp16 dumps round them): nodes of a level tie in path
    probability, so the tie rule (rank_ties) decides which the engine expands, as the reference's
    does (replay.testing.selection_ref)."""
    cfg = parse_config_text("[3]|[2,2,1]|[1,1,1]")
    draft, target = random_oracle(43, cols=4, hit=0.6, flat=2.0, grid=8)
    write_oracle_run(directory, cfg, list(range(500, 530)), [3] * 30, draft, target)
    return directory


def _rising(directory):
    """Two draft steps, layout all, scores as log-probs; validate row 0's scores rise along the row."""
    directory.mkdir()
    (directory / "config.json").write_text('{"gamma": 2, "topKSpec": [[2], [1, 1]], "topHead": [1, 2]}')
    rows = {
        "draft_step_0_9_19": [[10, 20]],
        "draft_step_1_10_20": [[30], [40]],
        "validate_10_20": [[10, 20, 99], [30, 31, 5], [41, 40, 5], [1, 2, 5], [1, 2, 5]],
    }
    for name, matrix in rows.items():
        (directory / name).write_text("".join(" ".join(map(str, r)) + "\n" for r in matrix))
    probs = [[0.1, 0.3, 0.5]] + [[0.5, 0.3, 0.1]] * 4
    (directory / "validate_10_20.scores").write_text(
        "".join(" ".join(repr(math.log(p)) for p in row) + "\n" for row in probs)
    )
    return directory


def view_of(res: RoundResult) -> RoundView:
    """The reference's round as the view render_round draws."""
    return RoundView(
        res.name,
        res.tree,
        res.acceptance,
        res.layout,
        res.layout_source,
        res.target_top1,
        res.rebuilt.selection_summary,
        res.notes,
    )


# --- the oracles: what replay printed when it ran on the reference ---------------------------


def reference_trees(args) -> int:
    """replay's text mode as it ran on the reference (replay.cli.cmd_replay's handler before)."""
    rep = replay_directory(args.dir, options_from_args(args))
    require_rounds(rep, len(rep.results))
    for res in rep.results:
        sys.stdout.write("\n".join(render_round(view_of(res))) + "\n\n")
    sys.stdout.write("\n".join(render_summary(rep)) + "\n")
    print_reading(rep)
    note = sampled_run_note(rep.manifest, args.dir)
    if note:
        print_notes([note])
    return 1 if rep.skipped else 0


def reference_sampling(args) -> int:
    """replay --temperature T as it ran on the reference, round by round (the handler before)."""
    rep = replay_directory(args.dir, options_from_args(args))
    t = args.temperature
    vocab, recorded = sampling_vocab(args, rep.manifest), rep.manifest.node_logprob_temperatures
    used, skipped, refused = [], list(rep.skipped), []
    for res in rep.results:
        try:
            used.append((res, round_sampling(res, t, vocab, recorded)))
        except ValueError as exc:
            skipped.append(sampling_skip(res.name, t, str(exc)))
            refused.append(str(exc))
    greedy, rep = rep, replace(rep, skipped=tuple(skipped))
    require_rounds(rep, len(used))
    out = sys.stdout
    if args.json:
        for res, smp in used:
            out.write(json_line({**res.to_json(), "sampling": smp.to_json()}))
    else:
        if not args.summary:
            for res, smp in used:
                out.write("\n".join(render_round(view_of(res)) + sampling_lines(smp)) + "\n\n")
        with_scores = refused_with_scores(refused)
        lines = render_summary(greedy) + sampling_summary([s for _, s in used], with_scores, len(refused) - with_scores)
        out.write("\n".join(lines) + "\n")
    if any(s.needs_vocab for _, s in used):
        print_needs_vocab("replay", t)
    fell_back = [res for res, s in used if not s.from_node_logprobs]
    print_missing_node_logprobs("replay", t, rep.manifest, len(fell_back), node_logprob_gaps(fell_back))
    print_reading(rep)
    note = sampled_run_note(rep.manifest, args.dir) if t == 0 else None
    if note:
        print_notes([note])
    return 1 if rep.skipped else 0


def reference_api_sampling(directory: str, temps: list[float]) -> pd.DataFrame:
    """api.sampling as it ran on the reference."""
    rep = replay_directory(directory)
    vocab = vocab_size_of(None, rep.manifest.vocab_size, rep.manifest.path)
    rows, skipped = [], [(s.what, None, s.reason) for s in rep.skipped]
    for t in temps:
        for res in rep.results:
            try:
                one = round_sampling(res, t, vocab, rep.manifest.node_logprob_temperatures)
            except ValueError as exc:
                skipped.append((res.name, t, str(exc)))
                continue
            rows.append({"round": res.name, **one.to_json()})
    frame = pd.DataFrame(rows, columns=["round", *SAMPLING_KEYS])
    for c in ("expected_accepted_length", "accepted_length_variance"):
        frame[c] = frame[c].astype(float)
    frame.attrs["skipped"] = skipped
    return frame


def _captured(argv: list[str]) -> tuple[int, str, str]:
    """replay.cli.main's (exit status, stdout, stderr) for ``specreplay replay ARGV``."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["replay", *argv])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def no_reference(monkeypatch):
    """The reference raises wherever the changed modules could reach it."""

    def refuse(*_a, **_k):
        raise AssertionError("the per-round reference ran")

    modules = (
        replay.cli.cmd_replay,
        replay.cli.api,
        replay.engine.render,
        replay.testing.replayer,
        replay.engine.sampling,
        replay.testing.round_sampling,
    )
    for module in modules:
        for name in ("replay_directory", "replay_packed", "replay_round", "round_sampling"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, refuse)


def _cli(argv: list[str]) -> tuple[int, str, str]:
    return _captured(argv)


# --- the checks -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["article", "synthetic", "nodes", "skipped", "rejected", "rising", "tied", "rising_drafts"]
)
def test_replay_trees_come_from_the_batch_engine(dumps, name, no_reference):
    d = dumps[name]
    for argv in ([d, "--no-progress"], [d, "--round", _middle_key(d)], [d, "--round", "999_999"]):
        assert _cli(argv) == _reference(argv), argv


@pytest.mark.parametrize("name", ["article", "synthetic", "nodes", "skipped", "rising"])
@pytest.mark.parametrize("mode", ["text", "json", "summary"])
def test_replay_at_temperature_comes_from_the_batch_engine(dumps, name, mode, no_reference):
    d = dumps[name]
    flag = [] if mode == "text" else [f"--{mode}"]
    for t in TEMPS:
        argv = [d, "--temperature", t, *flag, "--no-progress"]
        assert _cli(argv) == _reference(argv), argv


@pytest.mark.parametrize("name", ["article", "nodes", "skipped"])
def test_api_sampling_comes_from_the_batch_engine(dumps, name, no_reference):
    d = dumps[name]
    temps = [0.0, 0.7, 1.0]
    with _on_reference():
        want = reference_api_sampling(d, temps)
    got = replay.cli.api.sampling(d, temps)
    pd.testing.assert_frame_equal(got, want)
    assert got.attrs["skipped"] == want.attrs["skipped"]


@pytest.mark.parametrize("name", ["article", "synthetic", "nodes", "rejected", "tied"])
def test_each_round_view_is_the_reference_round(dumps, name):
    d = dumps[name]
    ref = {r.name: r for r in replay_directory(d).results}
    rep = replay_run(d, per_batch=lambda b, res, cfg: round_views(b, res))
    views = {v.name: v for part in rep.per_batch for v in part.values()}
    assert sorted(views) == sorted(ref)
    for key, view in views.items():
        assert_same_view(view, ref[key])


def assert_same_view(view: RoundView, res: RoundResult) -> None:
    """``view`` (the batch engine's) draws as the reference's RoundResult ``res`` would."""
    want = view_of(res)
    assert view.name == want.name
    for field in ("tokens", "parents", "depths", "ranks"):
        np.testing.assert_array_equal(getattr(view.tree, field), getattr(want.tree, field), err_msg=field)
    np.testing.assert_array_equal(view.tree.logprobs, want.tree.logprobs)  # NaN where the reference has NaN
    assert [e.tolist() for e in view.tree.expanded] == [e.tolist() for e in want.tree.expanded]
    np.testing.assert_array_equal(view.target_top1, want.target_top1)
    assert (view.acceptance, view.layout, view.layout_source) == (want.acceptance, want.layout, want.layout_source)
    assert (view.selection_summary, view.notes) == (want.selection_summary, want.notes)


def _reference(argv: list[str]) -> tuple[int, str, str]:
    """The oracle: ``specreplay replay ARGV`` with the handlers it had, on the reference."""
    with _on_reference():
        return _captured(argv)


@contextlib.contextmanager
def _on_reference():
    """The real reference functions restored, and replay's handlers as they were before (on them)."""
    saved = {}
    real = {
        (replay.testing.replayer, "replay_directory"): _REAL_REPLAY_DIRECTORY,
        (replay.testing.replayer, "replay_packed"): _REAL_REPLAY_PACKED,
        (replay.testing.replayer, "replay_round"): _REAL_REPLAY_ROUND,
        (replay.cli.cmd_replay, "_replay_trees"): reference_trees,
        (replay.cli.cmd_replay, "_replay_sampling"): reference_sampling,
    }
    for (module, name), value in real.items():
        saved[(module, name)] = getattr(module, name)
        setattr(module, name, value)
    try:
        yield
    finally:
        for (module, name), value in saved.items():
            setattr(module, name, value)


def _middle_key(directory: str) -> str:
    from pathlib import Path

    names = sorted(p.name for p in Path(directory).iterdir() if p.name.startswith("validate_"))
    a, b = names[len(names) // 2].split(".")[0].split("_")[1:3]
    return f"{a}_{b}"


_REAL_REPLAY_DIRECTORY = replay_directory
_REAL_REPLAY_ROUND = replay.testing.replayer.replay_round
_REAL_REPLAY_PACKED = replay.testing.replayer.replay_packed
