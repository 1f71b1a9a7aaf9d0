"""Fuzz the sampling-mode replay through the commands users run: mutated copies of the samples at T > 0.

tests/test_fuzz_readers.py damages the bundled samples and replays them greedily; here the same
corpora (tests/dump_mutations.py: three synthetic rounds with scores as .npz, .npy, .pt, raw and
text) and one more, the .npz rounds with a ``node_logprobs`` array and a manifest that lists its
temperatures and the vocabulary size (docs/dump-format.md), are damaged and replayed at a drawn
temperature (the node corpus is exact at two of them, bounded at the others). Besides the byte-level
damage of the greedy fuzz, a case may write a hostile or odd value into one score or node log-probability
cell (NaN, ±inf, a positive log-prob, 1e30, -1e30, 0, a tiny one). Whatever the damage:

- no exception leaves ``main``, the exit status is 0, 1 or 2, stderr holds no traceback;
- ``replay --temperature T --json`` and ``batch --temperature T --json`` print the same lines and exit
  the same way (the round path and the batch arrays are one rule, docs/analysis.md);
- a value that no distribution can have (NaN, +inf, a log-prob above 0) either leaves the output as
  it was (a cell the walk never reads) or skips rounds: the file is named on stderr, the exit status
  is not 0, and every round still printed is a round of the undamaged run, unchanged.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import event, given, settings, strategies as st

from replay import cli
from tests.dump_mutations import build_corpora, data_files
from tests.test_fuzz_readers import DETECTABLE, FUZZ_SETTINGS, Mutation, apply, mutations

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning:replay")

CI_EXAMPLES = 120  # ~5 s
LONG_EXAMPLES = int(os.environ.get("SPECREPLAY_FUZZ_EXAMPLES", "3000"))
TEMPERATURES = (0.3, 0.7, 1.0, 1.3)
NODE_T = (0.7, 1.0)  # the node_logprobs corpus records these, as our harness does ([run T, 1.0])
VOCAB = 50_000  # the manifests' vocab_size: the lower bounds above T = 1 need one
# Values no log-probability can take (the round must be skipped, naming the file), and odd but valid ones.
IMPOSSIBLE = (float("nan"), float("inf"), 0.5, 1e30)
ODD = (float("-inf"), -1e30, -1e-300, 0.0, -745.0, -1e-7)


def run_cli(argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def _with_node_logprobs(src: Path, dst: Path) -> None:
    """src's .npz rounds with node_logprobs [rows, 2] at NODE_T: each child of a node gets an equal
    share of half the mass (valid: the children of one node sum to 1/2), the root 0."""
    shutil.copytree(src, dst)
    for p in sorted(dst.glob("validate_*.npz")):
        with np.load(p) as z:
            ids, scores = z["ids"], z["scores"]
        rows = ids.shape[0]
        # the article tree's parents in tree order (1 + 6 + 4 + 2 nodes): the shares below only need a
        # count of siblings per node, and every node but the root has 6, 2 or 1 of them
        siblings = np.array([1] + [6] * 6 + [2] * 4 + [1] * 2)[:rows]
        node = np.log(0.5 / siblings).astype(np.float32)
        node[0] = 0.0
        np.savez(p, ids=ids, scores=scores, node_logprobs=np.stack([node, node], axis=1))
    body = json.loads((dst / "manifest.json").read_text())
    body.update(node_logprob_temperatures=list(NODE_T), vocab_size=VOCAB, layout="all")
    (dst / "manifest.json").write_text(json.dumps(body, indent=1))


@dataclass(frozen=True)
class Baseline:
    path: Path
    outputs: dict[float, tuple[int, str]]  # T -> (exit status, replay --json stdout)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict[str, Baseline]:
    base = tmp_path_factory.mktemp("sampling-corpora")
    paths = {c.name: c.path for c in build_corpora(base) if c.name not in ("article", "article_parents")}
    for name in list(paths):  # every corpus states its vocabulary size, as a harness dump does
        body = json.loads((paths[name] / "manifest.json").read_text())
        body["vocab_size"] = VOCAB
        (paths[name] / "manifest.json").write_text(json.dumps(body, indent=1))
    _with_node_logprobs(paths["npz"], base / "node")
    paths["node"] = base / "node"
    out = {}
    for name, path in paths.items():
        runs = {}
        for t in TEMPERATURES:
            rc, stdout, stderr = run_cli(["replay", path, "--json", "--temperature", t])
            assert rc == 0 and stdout.count("\n") >= 1 and '"sampling"' in stdout, (name, t, stderr)
            runs[t] = (rc, stdout)
        out[name] = Baseline(path, runs)
    return out


@st.composite
def value_mutations(draw, name: str, files: list[str]) -> Mutation:
    """One cell of a score (or node log-prob) array set to ``value``: the array read back as the
    readers would, changed, and written in the file's own encoding."""
    scored = [f for f in files if f.startswith("validate_") and _scores_of(name, f) is not None]
    target = draw(st.sampled_from(scored))
    field = "node_logprobs" if name == "node" and draw(st.booleans()) else "scores"
    value = draw(st.sampled_from(IMPOSSIBLE + ODD))
    cell = (draw(st.integers(0, 12)), draw(st.integers(0, 3)))
    return Mutation("value", target, (field, cell, value), DETECTABLE if value in IMPOSSIBLE else "any")


def _scores_of(name: str, f: str) -> str | None:
    """The file of f that holds its scores in corpus ``name`` (None: f holds none)."""
    if name in ("npz", "pt", "node"):
        return f if f.endswith((".npz", ".pt")) else None
    if name == "npy":
        return f if f.endswith(".scores.npy") else None
    if name == "raw":
        return f if f.endswith(".scores.bin") else None
    return f if f.endswith(".scores.txt") else None


def apply_value(d: Path, m: Mutation) -> None:
    field, (row, col), value = m.params
    p = d / m.target
    if p.suffix == ".npz":
        with np.load(p) as z:
            arrays = {k: z[k].copy() for k in z.files}
        arr = arrays[field]
        arr[row % arr.shape[0], col % arr.shape[1]] = value
        np.savez(p, **arrays)
    elif p.suffix == ".pt":
        from tests.dump_mutations import pt_dict_bytes

        # the .pt corpus was written from the .npz corpus's arrays: read them there, change, write the .pt again
        with np.load(d.parent.parent / "npz" / (p.name[: -len(".pt")] + ".npz")) as z:
            ids, scores = z["ids"], z["scores"].copy()
        scores[row % scores.shape[0], col % scores.shape[1]] = value
        p.write_bytes(pt_dict_bytes({"ids": ids, "scores": scores}))
    elif p.name.endswith(".scores.npy"):
        arr = np.load(p, allow_pickle=False)
        arr[row % arr.shape[0], col % arr.shape[1]] = value
        np.save(p, arr)
    elif p.name.endswith(".scores.bin"):
        arr = np.frombuffer(p.read_bytes(), dtype="<f4").copy()
        arr[(row * 4 + col) % arr.shape[0]] = value
        p.write_bytes(arr.tobytes())
    else:  # text: one row of numbers per line
        lines = p.read_text().splitlines()
        cells = lines[row % len(lines)].split()
        cells[col % len(cells)] = repr(float(value))
        lines[row % len(lines)] = " ".join(cells)
        p.write_text("\n".join(lines) + "\n")


def run_case(corpora: dict[str, Baseline], data) -> None:
    name = data.draw(st.sampled_from(sorted(corpora)), label="corpus")
    base = corpora[name]
    t = data.draw(st.sampled_from(TEMPERATURES), label="temperature")
    files = data_files(base.path)
    side = [n for n in ("manifest.json", "config.json") if (base.path / n).exists()]
    if data.draw(st.integers(0, 2), label="value?") == 0:
        m = data.draw(mutations(name, files, side), label="mutation")
    else:
        m = data.draw(value_mutations(name, files), label="mutation")
    event(f"mutation: {m.kind}")
    work = Path(tempfile.mkdtemp(prefix="fuzz-t-", dir=base.path.parent))
    d = work / name
    try:
        shutil.copytree(base.path, d, symlinks=True)
        (apply_value if m.kind == "value" else apply)(d, m)
        rc, out, err = run_cli(["replay", d, "--json", "--temperature", t])
        brc, bout, berr = run_cli(["batch", d, "--json", "--temperature", t, "--workers", "1", "--no-progress"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    event(f"exit status: {rc}")
    assert rc in (0, 1, 2) and brc in (0, 1, 2), (m, rc, brc, err, berr)
    assert "Traceback" not in err + berr, (m, err, berr)
    assert (rc, out) == (brc, bout), (m, t, rc, brc, err, berr)
    if m.kind == "value" and m.contract == DETECTABLE and out != base.outputs[t][1]:
        event("an impossible value skipped rounds")
        assert rc != 0 and m.target in err, (m, t, rc, err)
        assert set(out.splitlines()) <= set(base.outputs[t][1].splitlines()), (m, "a bad cell changed a round")


@settings(max_examples=CI_EXAMPLES, derandomize=True, **FUZZ_SETTINGS)
@given(data=st.data())
def test_mutated_samples_at_a_temperature(corpora, data):
    run_case(corpora, data)


@pytest.mark.fuzz_long
@pytest.mark.skipif("'fuzz_long' not in (config.getoption('markexpr') or '')", reason="selected with -m fuzz_long")
@settings(max_examples=LONG_EXAMPLES, **FUZZ_SETTINGS)
@given(data=st.data())
def test_mutated_samples_at_a_temperature_long_run(corpora, data):
    """Thousands of random cases: ``pytest -m fuzz_long tests/test_fuzz_sampling.py``."""
    run_case(corpora, data)
