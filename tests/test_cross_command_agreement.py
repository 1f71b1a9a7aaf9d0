"""One number, one value: the recorded config's row of ``compare`` equals ``stats`` (and ``replay``)
on every corpus the suite has, greedy and at a temperature, over the same rounds.

``compare`` replays other configs by walking sub-trees of the recording; its first row is the
recorded config itself, which must come out decided on every round and give exactly the numbers
the plain replay gives. The corpora: every bundled sample, the readers' fuzz corpora (each encoding),
a dump with recorded node log-probs, and dumps whose scores hold exact zeros (log-prob -inf), as
fp16/bf16 engines write them for low-ranked candidates.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from replay import cli
from tests.dump_mutations import build_corpora
from tests.test_fuzz_sampling import _with_node_logprobs

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_dumps"
T = 0.7
TOL = 1e-9  # the JSON tables read their figures to 10 decimals; a real disagreement is far larger


def run_cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def json_of(*argv) -> dict:
    rc, out, err = run_cli(*argv, "--json")
    assert rc in (0, 1), (argv, err)
    return json.loads(out)


def write_wide_zero_dump(path: Path, rounds: int = 8, seed: int = 0) -> Path:
    """A ``[[64],[64]]`` dump (all layout) whose draft rows give probability 0 beyond column 8:
    56 children of the root and of the expanded node have log-prob -inf. The target's top-1 hits a
    random child among the first 10 ranks, zero-probability ones included."""
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True)
    for k in range(rounds):
        a, b = 100 + 4 * k, 200 + 4 * k
        draft_lp = np.full((1, 64), -np.inf)
        ids0 = rng.permutation(1000)[:64].reshape(1, 64) + 1000
        ids1 = rng.permutation(1000)[:64].reshape(1, 64) + 3000
        finite = np.sort(rng.random(8))[::-1] + 0.01
        draft_lp[0, :8] = np.log(finite / finite.sum() * 0.99)
        np.savez(path / f"draft_step_0_{a - 1}_{b - 1}.npz", ids=ids0, scores=draft_lp.astype(np.float32))
        np.savez(path / f"draft_step_1_{a}_{b}.npz", ids=ids1, scores=draft_lp.astype(np.float32))
        val = rng.integers(5000, 6000, size=(129, 4))
        val[0, 0] = ids0[0, rng.integers(0, 10)]
        val[1, 0] = ids1[0, rng.integers(0, 10)]
        val_lp = np.log(np.tile([0.5, 0.2, 0.1, 0.05], (129, 1)))
        np.savez(path / f"validate_{a}_{b}.npz", ids=val, scores=val_lp.astype(np.float32))
    config = {"gamma": 2, "topKSpec": [[64], [64]], "topHead": [1, 1], "treeType": 0}
    manifest = {"format": "specreplay-dump", "version": 1, "config": config, "layout": "all", "score_kind": "logprob"}
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


def zero_draft_columns(src: Path, dst: Path, step: int, first_zero: int) -> Path:
    """``src`` (an .npz dump) with draft step ``step``'s log-probs set to -inf from column
    ``first_zero`` on: ties at -inf that selection breaks by tree order."""
    shutil.copytree(src, dst)
    for p in sorted(dst.glob(f"draft_step_{step}_*.npz")):
        with np.load(p) as z:
            arrays = {k: z[k] for k in z.files}
        arrays["scores"] = arrays["scores"].copy()
        arrays["scores"][:, first_zero:] = -np.inf
        np.savez(p, **arrays)
    return dst


def lose_array(src: Path, dst: Path, step: int, array: str) -> Path:
    """``src`` (an .npz dump) with the ``array`` of one round's draft step ``step`` lost, as when a
    companion goes missing: every command skips that round, and the rest agree."""
    shutil.copytree(src, dst)
    p = sorted(dst.glob(f"draft_step_{step}_*.npz"))[-1]
    with np.load(p) as z:
        arrays = {k: z[k] for k in z.files if k != array}
    np.savez(p, **arrays)
    return dst


def write_parents_dump(path: Path, rounds: int = 12, seed: int = 0) -> Path:
    """A static ``[3]|[2,2]|[1]`` dump (layout all, scored) with explicit parents chosen at random: in
    most rounds they differ from the path-probability selection (an engine that selects otherwise),
    and the target's top-1 often follows a child the recorded parents expanded."""
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True)
    for k in range(rounds):
        a, b = 100 + 4 * k, 200 + 4 * k
        ids0 = rng.permutation(100)[:3].reshape(1, 3) + 1000
        p1 = np.sort(rng.choice([1, 2, 3], size=2, replace=False))  # level-1 nodes 1..3
        ids1 = rng.permutation(100)[:4].reshape(2, 2) + 2000
        p2 = rng.integers(4, 8, size=1)  # level-2 nodes 4..7
        ids2 = rng.permutation(100)[:1].reshape(1, 1) + 3000
        for step, ids, parents, key in ((0, ids0, [0], (a - 1, b - 1)), (1, ids1, p1, (a, b)), (2, ids2, p2, (a, b))):
            lp = np.log(np.sort(rng.dirichlet(np.ones(ids.shape[1] + 1), size=ids.shape[0]), axis=1)[:, ::-1][:, :-1])
            np.savez(path / f"draft_step_{step}_{key[0]}_{key[1]}.npz", ids=ids, scores=lp, parents=np.asarray(parents))
        # tree order: root 0, level 1 = 1..3, level 2 = 4..7 (children of p1), level 3 = 8 (child of p2)
        tokens = np.concatenate([[7], ids0[0], ids1.reshape(-1), ids2[0]])
        parent_of = np.concatenate([[-1, 0, 0, 0], np.repeat(p1, 2), p2])
        val = rng.integers(5000, 6000, size=(9, 3))
        for n in range(1, 9):  # the target's top-1 at the parent is the child's token half the time
            if rng.random() < 0.6:
                val[parent_of[n], 0] = tokens[n]
        val_lp = np.log(np.tile([0.6, 0.25, 0.1], (9, 1)))
        np.savez(path / f"validate_{a}_{b}.npz", ids=val, scores=val_lp)
    config = {"gamma": 3, "topKSpec": [[3], [2, 2], [1]], "topHead": [1, 2, 1], "treeType": 0}
    manifest = {"format": "specreplay-dump", "version": 1, "config": config, "layout": "all", "score_kind": "logprob"}
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


def write_dynamic_dump(path: Path, rounds: int = 12, seed: int = 1) -> Path:
    """A dynamic (treeType 1) ``[4]|[2,2]|[1,1]`` dump (layout all, scored, explicit parents) whose
    rounds expand 1 to 3 nodes at step 1 (more than topHead) and 0 to 2 at step 2 (0: an early stop)."""
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True)
    for k in range(rounds):
        a, b = 100 + 4 * k, 200 + 4 * k
        h1, h2 = int(rng.integers(1, 4)), int(rng.integers(0, 3))
        p1 = np.sort(rng.choice([1, 2, 3, 4], size=h1, replace=False))
        level2 = np.arange(5, 5 + 2 * h1)
        p2 = np.sort(rng.choice(level2, size=min(h2, level2.shape[0]), replace=False))
        steps = [(np.arange(4).reshape(1, 4) + 1000 + 10 * k, [0], (a - 1, b - 1))]
        steps.append((rng.permutation(100)[: 2 * h1].reshape(h1, 2) + 2000, p1, (a, b)))
        if p2.shape[0]:
            steps.append((rng.permutation(100)[: p2.shape[0]].reshape(-1, 1) + 3000, p2, (a, b)))
        tokens, parent_of = [7], [-1]
        for step, (ids, parents, key) in enumerate(steps):
            lp = np.log(np.sort(rng.dirichlet(np.ones(ids.shape[1] + 1), size=ids.shape[0]), axis=1)[:, ::-1][:, :-1])
            name = f"draft_step_{step}_{key[0]}_{key[1]}.npz"
            np.savez(path / name, ids=ids, scores=lp, parents=np.asarray(parents))
            for row, parent in zip(ids, parents):
                tokens += row.tolist()
                parent_of += [int(parent)] * row.shape[0]
        n = len(tokens)
        val = rng.integers(5000, 6000, size=(n, 3))
        for u in range(1, n):
            if rng.random() < 0.6:
                val[parent_of[u], 0] = tokens[u]
        np.savez(path / f"validate_{a}_{b}.npz", ids=val, scores=np.log(np.tile([0.6, 0.25, 0.1], (n, 1))))
    config = {"gamma": 3, "topKSpec": [[4], [2, 2], [1, 1]], "topHead": [1, 2, 2], "treeType": 1}
    manifest = {"format": "specreplay-dump", "version": 1, "config": config, "layout": "all", "score_kind": "logprob"}
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


def _samples() -> dict[str, Path]:
    found = {}
    for manifest in sorted(SAMPLES.rglob("*")):
        if manifest.is_dir() and any(manifest.glob("validate_*")):
            found[str(manifest.relative_to(SAMPLES))] = manifest
    return found


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("agreement")
    paths = dict(_samples())
    paths.update({f"fuzz/{c.name}": c.path for c in build_corpora(base / "fuzz")})
    _with_node_logprobs(paths["fuzz/npz"], base / "node")
    paths["node_logprobs"] = base / "node"
    paths["zero/wide64"] = write_wide_zero_dump(base / "wide64")
    paths["zero/step0"] = zero_draft_columns(paths["fuzz/npz"], base / "zero0", step=0, first_zero=1)
    paths["zero/step1"] = zero_draft_columns(paths["fuzz/npz"], base / "zero1", step=1, first_zero=1)
    paths["parents_differ"] = write_parents_dump(base / "parents_differ")
    paths["dynamic"] = write_dynamic_dump(base / "dynamic")
    paths["lost/scores"] = lose_array(paths["fuzz/npz"], base / "lost_scores", step=0, array="scores")
    paths["lost/parents"] = lose_array(paths["dynamic"], base / "lost_parents", step=1, array="parents")
    # the last step's scores key no selection: the round is replayed, by every command alike
    paths["lost/last_scores"] = lose_array(paths["fuzz/npz"], base / "lost_last", step=2, array="scores")
    return paths


def test_the_corpora_cover_every_sample_and_zero_scores(corpora):
    samples = set(_samples())
    assert {"article_round", "synthetic_article"} <= samples and len(samples) >= 6
    assert samples <= set(corpora) and {"zero/wide64", "zero/step0", "zero/step1", "node_logprobs"} <= set(corpora)
    rc, _, err = run_cli("replay", corpora["parents_differ"])
    assert rc == 0 and "differ from path-probability selection" in err, err  # the corpus tests what it says
    for kind in ("scores", "parents"):
        rc, _, err = run_cli("replay", corpora[f"lost/{kind}"])
        assert rc == 1 and err.count("skipped round") == 1 and f"has no {kind} while" in err, err
    rc, _, err = run_cli("replay", corpora["lost/last_scores"])
    assert rc == 0 and "skipped" not in err, err


def _recorded_row(report: dict) -> dict:
    row = report["configs"][0]  # compare lists the recorded config first
    return row


def _close(a, b) -> bool:
    return abs(a - b) <= TOL * max(1.0, abs(a), abs(b))


@pytest.mark.parametrize(
    "name",
    [*_samples(), "fuzz/article", "fuzz/article_parents", "fuzz/npz", "fuzz/npy", "fuzz/pt", "fuzz/raw", "fuzz/text"]
    + ["node_logprobs", "zero/wide64", "zero/step0", "zero/step1", "parents_differ", "dynamic"]
    + ["lost/scores", "lost/parents", "lost/last_scores"],
)
def test_compare_recorded_row_equals_stats_and_replay(corpora, name):
    dump = corpora[name]
    stats = json_of("stats", dump)["summary"][0]
    depth = json_of("stats", dump)["depth_acceptance"]
    row = _recorded_row(json_of("compare", dump))
    assert row["rounds"] == stats["rounds"] and row["decided"] == stats["rounds"] and row["undecidable"] == 0, row
    for key in ("mean_accepted_length", "mean_acceptance_length", "draft_acceptance_rate"):
        assert _close(row[f"{key}_lo"], stats[key]) and _close(row[f"{key}_hi"], stats[key]), (key, row, stats)
    reached = [d["per_position_acceptance_rate"] for d in depth]
    assert np.allclose(row["per_position_acceptance_rate_lo"], reached[: len(row["per_position_acceptance_rate_lo"])])
    rc, out, _ = run_cli("replay", dump, "--json")
    lengths = [json.loads(line)["accepted_length"] for line in out.splitlines()]
    assert len(lengths) == stats["rounds"] and _close(float(np.mean(lengths)), stats["mean_accepted_length"])

    rc, out, err = run_cli("stats", dump, "--json", "--temperature", T)
    if "no scores" in err and rc == 2:  # a dump without validate scores has no T > 0 numbers anywhere
        rc_c, _, err_c = run_cli("compare", dump, "--json", "--temperature", T)
        assert rc_c == 2, err_c
        return
    assert rc in (0, 1), err
    at_t = json.loads(out)
    s = at_t["summary"][0]
    row_t = _recorded_row(json_of("compare", dump, "--temperature", T))
    assert row_t["rounds"] == s["rounds"] and row_t["determined"] == s["rounds"] and row_t["undetermined"] == 0, row_t
    for side in ("lo", "hi"):
        assert _close(row_t[f"expected_accepted_length_{side}"], s[f"mean_accepted_length_{side}"]), (side, row_t, s)
        assert _close(row_t[f"expected_block_efficiency_{side}"], s[f"mean_acceptance_length_{side}"]), (side, row_t, s)
        per_depth = [d[f"per_position_acceptance_rate_{side}"] for d in at_t["depth_acceptance"]]
        got = row_t[f"length_at_least_{side}"]
        assert np.allclose(got, per_depth[: len(got)], rtol=0, atol=TOL), (side, got, per_depth)
    rc, out, _ = run_cli("replay", dump, "--json", "--temperature", T)
    rounds = [json.loads(line)["sampling"] for line in out.splitlines()]
    lo = float(np.mean([r["expected_accepted_length_lo"] for r in rounds]))
    assert len(rounds) == s["rounds"] and _close(lo, s["mean_accepted_length_lo"])
