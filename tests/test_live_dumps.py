"""A harness dump replays offline to the harness's own acceptance decisions, exactly.

Two routes: the whole offline reader (replay_directory: grouping, manifest, rebuild with
path-probability check, layout detection) and a minimal rebuild from the npz files alone.
"""

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from replay.core.acceptance import accept_greedy, target_top1_per_node
from replay.core.config import TreeConfig, parse_config
from replay.core.tree import Tree
from replay.live.dumps import LIVE_KEY_STRIDE, run_manifest, staged_output_dir, write_run_manifest
from replay.live.errors import OutputDirError
from replay.live.generate import DecodeOptions
from replay.live.run import run_speculative, summarize
from replay.testing.replayer import replay_directory
from replay.testing.selection_ref import select_ref
from tests.live_fixtures import live_qwen_pair  # noqa: F401

PROMPTS = [[1, 2, 3, 4], [50, 7], [9, 8, 7, 6, 5]]
CONFIGS = [
    TreeConfig.from_lists([[6], [2, 2], [1, 1]]),
    TreeConfig.from_lists([[3], [3, 2, 1], [2, 1, 1], [1]], gamma_threshold=0.3),
]


def load(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def rebuild(out, key, config, root_token):
    """Tree from the draft_step files alone: step i row r expands node parents[r] with the first
    topKSpec[i][r] ids; nodes are numbered in file order (= tree order)."""
    a, b = key
    tokens, parents, scores = [root_token], [-1], [0.0]
    steps = []
    for i in range(config.gamma):
        name = f"draft_step_{i}_{a - 1}_{b - 1}.npz" if i == 0 else f"draft_step_{i}_{a}_{b}.npz"
        if not (out / name).is_file():
            break
        step = load(out / name)
        steps.append(step)
        for r, parent in enumerate(step["parents"]):
            for c in range(config.top_k_spec[i][r]):
                tokens.append(int(step["ids"][r, c]))
                parents.append(int(parent))
                scores.append(scores[int(parent)] + float(step["scores"][r, c]))
    return Tree.from_lists(tokens, parents, logprobs=scores), steps


@pytest.fixture(scope="module", params=CONFIGS, ids=lambda c: c.short())
def dump(request, live_qwen_pair, tmp_path_factory):
    draft, target = live_qwen_pair
    config = request.param
    out = tmp_path_factory.mktemp("dump")
    gens = run_speculative(draft, target, PROMPTS, config, DecodeOptions(30), out)
    models = {"draft": {"path": draft.name, "dtype": "float32"}, "target": {"path": target.name, "dtype": "float32"}}
    run = {"tokenizer": None, "dtype": "float32", "device": "cpu", "temperature": 0.0, "seed": 0}
    write_run_manifest(out, run_manifest(config, models, run, gens, asdict(summarize(gens))))
    return out, config, json.loads((out / "manifest.json").read_text())


def test_replay_directory_reproduces_every_decision(dump):
    out, config, manifest = dump
    rep = replay_directory(out)
    assert rep.skipped == ()
    assert rep.tree == config
    by_key = {tuple(r["key"]): r for r in manifest["rounds"]}
    assert {res.key for res in rep.results} == set(by_key)
    for res in rep.results:
        rnd = by_key[res.key]
        assert res.layout == "all"
        assert res.rebuilt.selection_summary in ("parents", "root")  # "root": stopped after step 0
        assert not res.notes, res.notes  # recorded parents agree with the recomputed selection
        assert int(res.tree.tokens[0]) == rnd["root_token"]
        assert list(res.acceptance.accepted_nodes) == rnd["accepted_nodes"]
        assert res.acceptance.bonus_token == rnd["bonus_token"]
        assert list(res.acceptance.committed_tokens) == rnd["committed_tokens"]


def test_offline_replay_reproduces_every_decision(dump):
    out, config, manifest = dump
    assert manifest["rounds"]
    for rnd in manifest["rounds"]:
        tree, _ = rebuild(out, rnd["key"], config, rnd["root_token"])
        validate = load(out / f"validate_{rnd['key'][0]}_{rnd['key'][1]}.npz")
        assert validate["ids"].shape == (tree.tokens.shape[0], config.max_width)
        acc = accept_greedy(tree, target_top1_per_node(tree, validate["ids"], "all"))
        assert list(acc.accepted_nodes) == rnd["accepted_nodes"]
        assert acc.accepted_length == rnd["accepted_length"]
        assert acc.bonus_token == rnd["bonus_token"]
        assert list(acc.committed_tokens) == rnd["committed_tokens"]


def test_selection_recomputes_from_recorded_scores(dump):
    """Path probabilities summed from the npz scores pick exactly the rows the harness expanded."""
    out, config, manifest = dump
    for rnd in manifest["rounds"]:
        tree, steps = rebuild(out, rnd["key"], config, rnd["root_token"])
        for i, step in enumerate(steps[1:], start=1):
            level = np.flatnonzero(tree.depths == i)
            order = level[select_ref(tree.logprobs[level].tolist(), config.top_head[i])]
            assert step["parents"].tolist() == order.tolist()


def test_rounds_chain_into_the_outputs_and_keys_follow_the_rule(dump):
    out, config, manifest = dump
    for s, seq in enumerate(manifest["sequences"]):
        rounds = [r for r in manifest["rounds"] if r["sequence"] == s]
        committed = [t for r in rounds for t in r["committed_tokens"]]
        assert committed[: len(seq["output_ids"])] == seq["output_ids"]
        pos = len(seq["prompt_ids"]) - 1
        for r in rounds:
            assert r["key"] == [pos, pos + s * LIVE_KEY_STRIDE]
            pos += len(r["committed_tokens"])


def test_manifest_describes_the_run(dump):
    out, config, manifest = dump
    assert parse_config(manifest["config"]).tree == config
    for field, value in (("layout", "all"), ("score_kind", "logprob"), ("step0_offset", 1)):
        assert manifest[field] == value
    for field in (
        "models",
        "tokenizer",
        "dtype",
        "device",
        "temperature",
        "seed",
        "sequences",
        "rounds",
        "totals",
        "key_rule",
        "seed_rule",
    ):
        assert field in manifest
    rnd = manifest["rounds"][0]
    for field in (
        "key",
        "sequence",
        "root_token",
        "accepted_nodes",
        "accepted_length",
        "bonus_token",
        "committed_tokens",
        "draft_time_s",
        "verify_time_s",
    ):
        assert field in rnd
    files = {p.name for p in out.iterdir()}
    assert not any(n.startswith(".") for n in files), "temporary files left behind"
    n_validate = sum(n.startswith("validate_") for n in files)
    assert n_validate == len(manifest["rounds"])


# ---- the output directory: one run per directory, published whole


def test_staged_run_lands_in_out_whole_and_leaves_nothing_beside(tmp_path):
    out = tmp_path / "run"
    with staged_output_dir(out) as staged:
        assert staged.parent == tmp_path and staged != out and not out.exists()  # nothing in --out until done
        (staged / "validate_1_1.npz").write_bytes(b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert [p.name for p in out.iterdir()] == ["validate_1_1.npz"]


def test_empty_existing_out_is_used(tmp_path):
    (tmp_path / "run").mkdir()
    with staged_output_dir(tmp_path / "run") as staged:
        (staged / "manifest.json").write_text("{}")
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["manifest.json"]


@pytest.mark.parametrize("existing", ["run", "file"])
def test_non_empty_out_or_a_file_is_refused(tmp_path, existing):
    out = tmp_path / "run"
    if existing == "run":
        out.mkdir()
        (out / "manifest.json").write_text("{}")
    else:
        out.write_text("not a directory")
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(OutputDirError, match=str(out)):
        with staged_output_dir(out):
            pytest.fail("the block must not run")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_replace_swaps_the_old_run_out_and_a_failed_run_keeps_it(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "validate_5_5.npz").write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with staged_output_dir(out, replace=True) as staged:
            (staged / "validate_9_9.npz").write_bytes(b"new, half done")
            raise RuntimeError("killed mid-run")
    assert [p.name for p in tmp_path.iterdir()] == ["run"] and [p.name for p in out.iterdir()] == ["validate_5_5.npz"]
    with staged_output_dir(out, replace=True) as staged:
        (staged / "validate_9_9.npz").write_bytes(b"new")
    assert [p.name for p in tmp_path.iterdir()] == ["run"] and [p.name for p in out.iterdir()] == ["validate_9_9.npz"]


def test_out_filled_during_the_run_keeps_the_run_and_says_where(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(OutputDirError, match="kept in") as err:
        with staged_output_dir(out) as staged:
            (staged / "manifest.json").write_text("{}")
            out.mkdir()
            (out / "other.txt").write_text("someone else")
    kept = Path(str(err.value).rsplit("kept in ", 1)[1].rstrip(")"))
    assert (kept / "manifest.json").is_file() and [p.name for p in out.iterdir()] == ["other.txt"]
