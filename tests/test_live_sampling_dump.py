"""Sampling-mode dumps from the live harness: what a dump records so that its expected
acceptance is exact at the run's temperature and at T = 1, and the live check of that expectation.

Through the CLI (``generate --temperature T --seed S -o DIR``) on tiny saved models, read back with
the offline readers. The live check: over a run's rounds, z = sum(A_i - E_i) / sqrt(sum Var_i), A_i
the accepted length the live walk took (manifest ``rounds``), E_i and Var_i the expectation and
variance of that round's accepted length computed offline from its recorded rows by
``replay.core.sampling`` (the rows are full softmax rows here, ``--record-k`` = vocabulary, so they
are exact at any T). |z| < 4 for a correct harness; a harness whose sampler ignores T must fail it.
"""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from replay.cli import main
from replay.engine.options import ReplayOptions
from replay.io.formats.matrix_io import read_matrix
from replay.live import generate, sampling
from replay.testing.replayer import replay_directory
from replay.testing.round_sampling import round_bounds
from replay.testing.tiny import build_word_tokenizer, save_hf_dir
from tests.live_fixtures import make_pair, torch

VOCAB = 16
TREE = {"gamma": 3, "topKSpec": [[4], [2, 2], [1, 1]], "topHead": [1, 2, 2]}
PROMPT = [3, 1, 4, 1, 5]
SEQUENCES = 24  # the prompt repeated: independent draws per sequence (sequence_rng)
NEW_TOKENS = 16
SEED = 11
Z_LIMIT = 4.0  # a correct harness exceeds it with probability ~6e-5 (normal approximation)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    draft, target = make_pair("qwen2", vocab_size=VOCAB, seed=5, noise=0.1)
    d = tmp_path_factory.mktemp("tiny_sampling")
    tok = build_word_tokenizer(VOCAB)
    save_hf_dir(target, d / "target", tok)
    save_hf_dir(draft, d / "draft", tok)
    (d / "tree.json").write_text(json.dumps(TREE))
    (d / "prompts.jsonl").write_text(json.dumps(PROMPT) + "\n")
    (d / "many.jsonl").write_text((json.dumps(PROMPT) + "\n") * SEQUENCES)
    return d


def generate_dump(d: Path, out: Path, temperature: float, prompts: str = "many.jsonl", *extra: str) -> Path:
    argv = ["generate", "--draft", str(d / "draft"), "--target", str(d / "target"), "--config", str(d / "tree.json")]
    argv += ["--prompts", str(d / prompts), "--max-new-tokens", str(NEW_TOKENS), "--temperature", str(temperature)]
    argv += ["--seed", str(SEED), "--repeats", "1", "--no-progress", "-o", str(out), *extra]
    assert main(argv) == 0
    return out


def recorded_rounds(run: Path):
    """(manifest, [(tree, validate DumpMatrix, live accepted length)]): trees rebuilt offline by the
    replay, validate files read by the offline reader, A_i from the manifest's rounds."""
    manifest = json.loads((run / "manifest.json").read_text())
    live = {tuple(r["key"]): r["accepted_length"] for r in manifest["rounds"]}
    rep = replay_directory(run, ReplayOptions())
    assert not rep.skipped and len(rep.results) == len(live)
    out = []
    for res in rep.results:
        v = read_matrix(run / f"validate_{res.key[0]}_{res.key[1]}.npz", "validate")
        out.append((res.tree, v, live[res.key]))
    return manifest, out


def moments_from_node_logprobs(tree, own_logp: np.ndarray) -> tuple[float, float]:
    """E and Var of the accepted length from the recorded node log-probabilities alone (the test's
    own tree walk, independent of replay.core.sampling): P(reach n) = prod of p(child | parent)
    along root -> n; E[L] = sum P(reach n); E[L^2] = sum P(reach n) (2 depth(n) - 1)."""
    reach = np.ones(tree.tokens.shape[0])
    for u in range(1, reach.shape[0]):
        reach[u] = reach[tree.parents[u]] * math.exp(own_logp[u])
    mean = reach[1:].sum()
    second = (reach[1:] * (2 * tree.depths[1:] - 1)).sum()
    return float(mean), float(second - mean * mean)


def z_score(rounds, temperature: float, vocab: int) -> tuple[float, int]:
    """(z, rounds) with E_i and Var_i from replay.core.sampling on each round's recorded rows."""
    diff = var = 0.0
    for tree, v, accepted in rounds:
        b = round_bounds(tree, v.ids, v.logp, "all", temperature, vocab)
        assert b.problem[0] == 0
        e = 0.5 * (b.expected_lo[0] + b.expected_hi[0])
        assert b.expected_hi[0] - b.expected_lo[0] < 1e-6, "full softmax rows: the expectation is determined"
        # The variance of the walk, E[L^2] - E[L]^2, from the core's reach probabilities (its own
        # ``variance`` is NaN unless the bounds are bit-exact; here they agree to float32 rounding).
        second = (b.reach_lo[0, 1:] * (2 * tree.depths[1:] - 1)).sum()
        diff += accepted - e
        var += max(second - e * e, 0.0)
    return diff / math.sqrt(var), len(rounds)


# ---- what a live dump records


def test_generate_records_node_logprobs_and_the_manifest_says_what_they_are(tiny_dir, tmp_path):
    t = 0.7
    manifest, rounds = recorded_rounds(generate_dump(tiny_dir, tmp_path / "run", t, "prompts.jsonl"))
    assert manifest["vocab_size"] == VOCAB
    assert manifest["temperature"] == t and manifest["node_logprob_temperatures"] == [t, 1.0]
    cols = manifest["node_logprob_temperatures"]
    checked_in_row = 0
    for tree, v, _ in rounds:
        own = v.node_logp
        assert own is not None and own.shape == (tree.tokens.shape[0], 2)
        assert np.all(own[0] == 0.0) and np.all(own <= 0.0) and np.isfinite(own).all()
        for u in range(1, tree.tokens.shape[0]):
            p, tok = tree.parents[u], tree.tokens[u]
            # T = 1 column: the parent's recorded score of this token, where the top-K row has it.
            hit = np.flatnonzero(v.ids[p] == tok)
            if hit.size:
                assert own[u, 1] == pytest.approx(v.logp[p, hit[0]], abs=1e-5)
                checked_in_row += 1
            # Run-T column against T = 1 among siblings: log p_T(a) - log p_T(b) = (log p_1(a) - log p_1(b)) / T.
            for w in tree.children(p):
                assert own[u, 0] - own[w, 0] == pytest.approx((own[u, 1] - own[w, 1]) / cols[0], abs=1e-6)
    assert checked_in_row > 0


def test_node_logprobs_equal_the_full_softmax_at_the_run_temperature(tiny_dir, tmp_path):
    """With every column recorded (--record-k = vocabulary) the run-T column is log softmax(l / T)
    of the parent's full row, recomputed here from the T = 1 scores."""
    t = 0.3
    _, rounds = recorded_rounds(generate_dump(tiny_dir, tmp_path / "run", t, "prompts.jsonl", "--record-k", "16"))
    for tree, v, _ in rounds:
        logits = torch.tensor(v.logp, dtype=torch.float64)
        at_t = torch.log_softmax(logits / t, dim=-1).numpy()
        for u in range(1, tree.tokens.shape[0]):
            p = tree.parents[u]
            col = int(np.flatnonzero(v.ids[p] == tree.tokens[u])[0])
            assert v.node_logp[u, 0] == pytest.approx(at_t[p, col], abs=1e-4)


def test_a_greedy_dump_records_the_t0_limit(tiny_dir, tmp_path):
    """T = 0: column 0 is log 1 where the node is its parent's top-1 and log 0 elsewhere, so the
    walk's expectation from it is the accepted length the greedy run took."""
    manifest, rounds = recorded_rounds(generate_dump(tiny_dir, tmp_path / "run", 0.0, "prompts.jsonl"))
    assert manifest["node_logprob_temperatures"] == [0.0, 1.0]
    for tree, v, accepted in rounds:
        top1 = v.ids[tree.parents[1:], 0] == tree.tokens[1:]
        assert np.array_equal(v.node_logp[1:, 0] == 0.0, top1) and np.all(v.node_logp[1:, 0][~top1] == -np.inf)
        assert moments_from_node_logprobs(tree, v.node_logp[:, 0]) == (accepted, 0.0)


# ---- the live check


def live_rounds(tiny_dir: Path, out: Path, temperature: float):
    return recorded_rounds(generate_dump(tiny_dir, out, temperature, "many.jsonl", "--record-k", str(VOCAB)))[1]


@pytest.mark.slow
@pytest.mark.parametrize("temperature", [0.3, 0.7, 1.0])
def test_live_acceptance_matches_the_offline_expectation(tiny_dir, tmp_path, temperature):
    rounds = live_rounds(tiny_dir, tmp_path / "run", temperature)
    z, n = z_score(rounds, temperature, VOCAB)
    print(f"T = {temperature}: z = {z:.3f} over {n} rounds")
    assert abs(z) < Z_LIMIT, (z, n)
    # The harness's own record gives the same expectations (column 0 is the run's T).
    for tree, v, _ in rounds:
        b = round_bounds(tree, v.ids, v.logp, "all", temperature, VOCAB)
        assert moments_from_node_logprobs(tree, v.node_logp[:, 0])[0] == pytest.approx(b.expected_lo[0], abs=1e-5)


def ignores_temperature(logits, temperature):
    """WRONG target_probs: T = 1 whatever is asked."""
    return torch.softmax(logits.double(), dim=-1).cpu().numpy()


@pytest.mark.slow
def test_a_harness_whose_sampler_ignores_t_fails_the_live_check(tiny_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(sampling, "target_probs", ignores_temperature)
    monkeypatch.setattr(generate, "target_probs", ignores_temperature)
    t = 0.3
    z, n = z_score(live_rounds(tiny_dir, tmp_path / "run", t), t, VOCAB)
    print(f"T ignored (asked {t}): z = {z:.3f} over {n} rounds")
    assert abs(z) >= Z_LIMIT, (z, n)


# ---- packed runs


def test_pack_carries_node_logprobs_and_replays_the_same(tiny_dir, tmp_path, capsys):
    """A packed run holds the validate node_logprobs too (v_node_logp): the live dump packs without a
    note and replays identically, greedy and at the run's temperature (exact from them)."""
    run = generate_dump(tiny_dir, tmp_path / "run", 0.7, "prompts.jsonl")
    capsys.readouterr()
    assert main(["pack", str(run), "-o", str(tmp_path / "run.packed"), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "node_logprobs" not in err and "Traceback" not in err
    for argv in ([], ["--temperature", "0.7"]):
        outputs = []
        for source in (run, tmp_path / "run.packed"):
            assert main(["replay", str(source), "--json", "--no-progress", *argv]) == 0
            outputs.append([json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()])
        assert len(outputs[0]) > 1 and outputs[0] == outputs[1]
    assert all(r["sampling"]["from_node_logprobs"] for r in outputs[1])


# ---- offline replay of the recorded node log-probabilities (exact at the recorded temperatures)

RUN_T = 0.7
TOL = 1e-9  # the JSON tables read their figures to 10 decimals (replay.core.json_figures)


@pytest.fixture(scope="module")
def run_07(tiny_dir, tmp_path_factory):
    """One live dump at T = 0.7 (node_logprobs at [0.7, 1.0], vocab_size in the manifest)."""
    return generate_dump(tiny_dir, tmp_path_factory.mktemp("run07") / "run", RUN_T, "prompts.jsonl")


def replay_sampling_json(capsys, run: Path, *argv: str) -> tuple[int, list[dict], str]:
    code = main(["replay", str(run), "--json", "--no-progress", *argv])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.strip()], err


@pytest.mark.parametrize("temperature,column", [(RUN_T, 0), (1.0, 1)])
def test_replay_at_a_recorded_temperature_is_exact_from_the_node_logprobs(run_07, capsys, temperature, column):
    """At the run's T and at T = 1, lo == hi in every round (the top-K rows alone bound it at 0.7),
    and the value is the walk computed by hand from the recorded node log-probabilities."""
    _, rounds = recorded_rounds(run_07)
    code, records, err = replay_sampling_json(capsys, run_07, "--temperature", str(temperature))
    assert code == 0, err
    assert len(records) == len(rounds) > 1
    for (tree, v, _), rec in zip(rounds, records):
        assert v.path.endswith(f"validate_{rec['round']}.npz")  # the same round
        smp = rec["sampling"]
        mean, var = moments_from_node_logprobs(tree, v.node_logp[:, column])
        assert smp["exact"] and smp["from_node_logprobs"]
        assert smp["expected_accepted_length_lo"] == smp["expected_accepted_length_hi"]
        assert smp["expected_accepted_length"] == pytest.approx(mean, abs=1e-12)
        assert smp["accepted_length_variance"] == pytest.approx(var, abs=1e-12)
        # P(L >= d) by hand: the recorded reach probabilities summed over depth d
        reach = np.ones(tree.tokens.shape[0])
        for u in range(1, reach.shape[0]):
            reach[u] = reach[tree.parents[u]] * math.exp(v.node_logp[u, column])
        by_depth = [reach[tree.depths == d].sum() for d in range(1, int(tree.depths.max()) + 1)]
        assert smp["length_at_least_lo"] == pytest.approx(by_depth, abs=1e-12)
        # the top-K rows' own bounds (the path without node_logprobs) hold the exact value, up to
        # the rows' float32 rounding (node_logprobs are float64)
        b = round_bounds(tree, v.ids, v.logp, "all", temperature, VOCAB)
        assert b.expected_lo[0] - 1e-6 <= mean <= b.expected_hi[0] + 1e-6


def test_replay_at_an_unrecorded_temperature_uses_the_rows_and_the_manifest_vocab_size(run_07, capsys):
    """T = 0.3 is not recorded: the top-K bounds, as before. T = 1.5 > 1: the manifest's vocab_size
    gives the lower bounds without --vocab-size (no 'refused' note), the same as stating it."""
    code, records, err = replay_sampling_json(capsys, run_07, "--temperature", "0.3")
    assert code == 0 and not any(r["sampling"]["from_node_logprobs"] for r in records)
    code, records, err = replay_sampling_json(capsys, run_07, "--temperature", "1.5")
    assert code == 0 and "refused" not in err, err
    assert any(r["sampling"]["expected_accepted_length_lo"] > 0 for r in records)
    code, stated, _ = replay_sampling_json(capsys, run_07, "--temperature", "1.5", "--vocab-size", str(VOCAB))
    assert code == 0 and stated == records


def test_a_vocab_size_that_disagrees_with_the_manifest_is_refused(run_07, capsys):
    code = main(["replay", str(run_07), "--temperature", "1.5", "--vocab-size", "99", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "--vocab-size 99" in err and f"vocab_size {VOCAB}" in err and "manifest.json" in err


def test_hostile_node_logprobs_and_manifest_fields_never_give_a_number(run_07, tmp_path, capsys):
    """Children whose recorded probabilities sum to more than 1 skip their round; a column count the
    manifest does not list skips it too; a bad node_logprob_temperatures is exit 2 naming the field."""
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(run_07, bad)
    first = sorted(bad.glob("validate_*.npz"))[0]
    arrays = dict(np.load(first))
    arrays["node_logprobs"] = np.zeros_like(arrays["node_logprobs"])  # every child p = 1: rows sum > 1
    np.savez(first, **arrays)
    code, records, err = replay_sampling_json(capsys, bad, "--temperature", str(RUN_T))
    name = first.name[len("validate_") : -len(".npz")]
    assert code == 1 and "Traceback" not in err
    assert f"round {name}" in err and "sum to more than 1" in err and "node_logprobs" in err
    assert records and name not in {r["round"] for r in records}
    arrays["node_logprobs"] = np.zeros((arrays["ids"].shape[0], 3))
    np.savez(first, **arrays)
    code, _, err = replay_sampling_json(capsys, bad, "--temperature", str(RUN_T))
    assert code == 1 and "3 column(s)" in err and "node_logprob_temperatures lists 2" in err
    manifest = json.loads((bad / "manifest.json").read_text())
    for value in (["x"], [float("nan")], [-0.5], []):
        manifest["node_logprob_temperatures"] = value
        (bad / "manifest.json").write_text(json.dumps(manifest))
        code = main(["replay", str(bad), "--temperature", str(RUN_T), "--no-progress"])
        err = capsys.readouterr().err
        assert code == 2 and "node_logprob_temperatures" in err and "Traceback" not in err, (value, err)


def test_stats_at_the_run_temperature_is_exact_from_the_node_logprobs(run_07, capsys):
    """stats --temperature 0.7 on the live dump: every metric one number (lo == hi), the mean of the
    hand walks over the recorded node log-probabilities."""
    _, rounds = recorded_rounds(run_07)
    assert main(["stats", str(run_07), "--temperature", str(RUN_T), "--json", "--no-progress"]) == 0
    (s,) = json.loads(capsys.readouterr().out)["summary"]
    assert s["exact_rounds"] == s["rounds"] == len(rounds)
    mean = np.mean([moments_from_node_logprobs(tree, v.node_logp[:, 0])[0] for tree, v, _ in rounds])
    assert s["mean_accepted_length_lo"] == s["mean_accepted_length_hi"] == pytest.approx(mean, abs=TOL)


def test_api_sampling_frame_is_exact_at_the_recorded_temperatures(run_07):
    """api.sampling: one row per (round, T); at 0.7 and 1 from node_logprobs (exact), at 0.3 from the rows."""
    from replay.cli import api

    frame = api.sampling(run_07, [0.3, RUN_T, 1.0])
    at = {t: g for t, g in frame.groupby("temperature")}
    assert len(at[RUN_T]) == len(at[1.0]) == len(at[0.3]) > 1
    for t in (RUN_T, 1.0):
        assert at[t]["from_node_logprobs"].all() and at[t]["exact"].all()
        assert (at[t]["expected_accepted_length_lo"] == at[t]["expected_accepted_length_hi"]).all()
    assert not at[0.3]["from_node_logprobs"].any()


def test_batch_on_the_dump_and_on_a_packed_copy_is_exact_at_the_recorded_t(run_07, tmp_path, capsys):
    """batch --temperature reads the node_logprobs too (the batch arrays carry them, and so does a
    packed run): at the run's T its lines are replay --temperature's, exact, and no note is printed."""
    code, records, err = replay_sampling_json(capsys, run_07, "--temperature", str(RUN_T))
    assert code == 0 and len(records) > 1 and all(r["sampling"]["from_node_logprobs"] for r in records)
    assert main(["pack", str(run_07), "-o", str(tmp_path / "p"), "--no-progress"]) == 0
    capsys.readouterr()
    for source in (run_07, tmp_path / "p"):
        assert main(["batch", str(source), "--temperature", str(RUN_T), "--json", "--no-progress"]) == 0
        out, err = capsys.readouterr()
        assert [json.loads(line) for line in out.splitlines()] == records
        assert "node_logprobs" not in err
