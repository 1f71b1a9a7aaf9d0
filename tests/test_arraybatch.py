"""The bulk .npz/.npy reader (replay.io.formats.arraybatch) against the reference reader.

The oracle is the scalar ``replay_directory``: ``replay DIR --json`` must print its records, its
skip list and its exit status, byte for byte, on directories of .npz and .npy files written the
ways engines write them (scores inside, .scores.npy companions, Fortran order, big-endian, other
integer and float dtypes, varied shapes) and then damaged: values flipped (NaN, out of range,
wrong sign), bytes changed anywhere (CRCs, zip records, .npy headers), files cut short, resized.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

import replay.io.formats.arraybatch as arraybatch
from replay.cli import main
from replay.cli.options import no_rounds_error, skipped_lines
from replay.core.config import TreeConfig
from replay.engine.options import ReplayOptions
from replay.io.fastread import plan_items, round_paths
from replay.io.formats.matrix_io import SCORE_AUTO
from replay.io.grouping import group_directory
from replay.testing.batch_synth import SynthSpec, synth_batch
from replay.testing.in_memory import round_at
from replay.testing.replayer import record_of, replay_directory

CONFIGS = (
    TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2]),
    TreeConfig.from_lists([[3], [2, 1, 1], [1]], [1, 3, 1]),
    TreeConfig.from_lists([[4]], [1]),
)


def reference_output(d: Path, score_kind: str | None = None) -> tuple[int, str, str]:
    """(exit, stdout, stderr) that `replay DIR --json` owes: the scalar replay, record by record."""
    opts = (
        ReplayOptions(step0_offset=None)
        if score_kind is None
        else ReplayOptions(step0_offset=None, score_kind=score_kind)
    )
    rep = replay_directory(d, opts)
    out = "".join(json.dumps(record_of(r).to_json()) + "\n" for r in rep.results)
    err = "".join(f"specreplay: {w}\n" for w in rep.warnings) + "".join(
        f"specreplay: {line}\n" for line in skipped_lines(rep.skipped)
    )
    if not rep.results:
        return 2, out, err + f"specreplay: error: {no_rounds_error(rep.directory, rep.skipped)}\n"
    return (1 if rep.skipped else 0), out, err


def cli_output(d: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["replay", str(d), "--json", "--no-progress", "--workers", "1", *argv])
    return code, out.getvalue(), err.getvalue()


def bulk_rounds(d: Path) -> int:
    """Rounds of ``d`` that the bulk reader takes (the rest go to the reference reader)."""
    items = round_paths(plan_items(group_directory(d), {}))
    batches, _ = arraybatch.read_array_batches(str(d), items, (1, 1), None, SCORE_AUTO)
    return sum(len(b) for b in batches)


def write_matrix(path: Path, ids: np.ndarray, logp: np.ndarray | None, rng: np.random.Generator, kind: str) -> None:
    """One matrix as an engine might write it: ``kind`` npz (scores inside) or npy (scores companion)."""
    id_dtype = str(rng.choice(["<i8", "<i4", ">i8", "<u4", "<i2"])) if rng.random() < 0.3 else "<i8"
    ids_out = ids.astype(np.int64)
    if id_dtype[1] in "u" or id_dtype == "<i2":
        ids_out = np.where(ids_out < 0, 0, ids_out % 30000)  # fits the dtype (PAD_TOKEN becomes token 0)
    ids_out = ids_out.astype(id_dtype)
    if rng.random() < 0.2:
        ids_out = np.asfortranarray(ids_out)
    scores = None
    if logp is not None:
        as_prob = rng.random() < 0.4
        scores = np.exp(logp) if as_prob else logp
        scores = scores.astype(str(rng.choice(["<f4", "<f8", ">f4", "<f2"])))
    if kind == "npz":
        arrays = {"ids": ids_out} if scores is None else {"ids": ids_out, "scores": scores}
        np.savez(path.with_name(path.name + ".npz"), **arrays)
    else:
        np.save(path.with_name(path.name + ".npy"), ids_out)
        if scores is not None:
            np.save(path.with_name(path.name + ".scores.npy"), scores)


def write_random_dir(d: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    cfg = CONFIGS[seed % len(CONFIGS)]
    (d / "config.json").write_text(json.dumps(cfg.to_json()))
    kind = "npz" if seed % 2 == 0 else "npy"
    for j in range(3):
        spec = SynthSpec(
            cfg,
            int(rng.integers(3, 8)),
            steps=int(rng.integers(1, cfg.gamma + 1)),
            seed=seed * 10 + j,
            with_scores=bool(j != 1 or seed % 3),
            layout="all",
            extra_cols=int(rng.integers(0, 3)),
            target_cols=int(rng.integers(1, 3)),
            vocab=1000,
            first_key=100 + 1000 * j,
        )
        batch = synth_batch(spec)
        for i in range(len(batch)):
            rnd = round_at(batch, i)
            a, b = rnd.key
            for s, m in enumerate(rnd.steps):
                name = f"draft_step_{s}_{a - 1}_{b - 1}" if s == 0 else f"draft_step_{s}_{a}_{b}"
                write_matrix(d / name, m.ids, m.logp, rng, kind)
            write_matrix(d / f"validate_{a}_{b}", rnd.validate.ids, rnd.validate.logp, rng, kind)


def files_of(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.name.startswith(("draft_step_", "validate_")))


def break_files(d: Path, rng: np.random.Generator, count: int) -> None:
    """Damage ``count`` files: a byte anywhere, a value made NaN, too big or of the other sign, cut short, grown."""
    for path in rng.choice(files_of(d), size=count, replace=False):
        data = bytearray(path.read_bytes())
        kind = int(rng.integers(0, 6))
        if kind == 0:
            at = int(rng.integers(0, len(data)))
            data[at] = int(rng.integers(0, 256))
        elif kind == 1:
            data = data[: int(rng.integers(0, len(data)))]
        elif kind == 2:
            data += b"\x00" * int(rng.integers(1, 9))
        else:
            arrays = _load(path)
            name = "scores" if "scores" in arrays else "ids"
            arr = arrays[name].copy()
            at = np.unravel_index(int(rng.integers(0, arr.size)), arr.shape)
            arr[at] = [np.nan, 1.5, -0.5][kind - 3] if arr.dtype.kind == "f" else np.iinfo(arr.dtype).min
            arrays[name] = arr
            _save(path, arrays)
            continue
        path.write_bytes(bytes(data))


def _load(path: Path) -> dict[str, np.ndarray]:
    if path.suffix == ".npz":
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    return {"ids": np.load(path)}


def _save(path: Path, arrays: dict[str, np.ndarray]) -> None:
    if path.suffix == ".npz":
        np.savez(path, **arrays)
    else:
        np.save(path, arrays["ids"])


@pytest.mark.parametrize("seed", range(10))
def test_random_array_dirs_print_what_the_scalar_replay_prints(tmp_path, seed):
    write_random_dir(tmp_path, seed)
    rng = np.random.default_rng(seed)
    if seed % 3:
        break_files(tmp_path, rng, int(rng.integers(1, 8)))
    assert bulk_rounds(tmp_path) > 0
    assert cli_output(tmp_path) == reference_output(tmp_path)


@pytest.mark.parametrize("score_kind", ["prob", "logprob"])
def test_stated_score_kind(tmp_path, score_kind):
    write_random_dir(tmp_path, 4)
    assert cli_output(tmp_path, "--scores", score_kind) == reference_output(tmp_path, score_kind)


def test_every_byte_of_a_file_changed(tmp_path):
    """Each byte of one .npz file set to another value in turn: the directory prints what the scalar
    replay prints (the layout's fixed bytes, CRCs, zip records, .npy header, values)."""
    write_random_dir(tmp_path, 0)
    target = files_of(tmp_path)[-1]
    good = target.read_bytes()
    for at in range(0, len(good), 7):
        data = bytearray(good)
        data[at] ^= 0x5A
        target.write_bytes(bytes(data))
        assert cli_output(tmp_path) == reference_output(tmp_path), at


def test_sample_dump_is_read_in_bulk():
    synth = Path(__file__).resolve().parent.parent / "sample_dumps" / "synthetic_article"
    assert bulk_rounds(synth) == 300


@pytest.mark.parametrize("kind", ["npz", "npy"])
def test_scores_of_another_shape_than_the_ids(tmp_path, kind):
    """Scores inside the file, or in a companion, with one row fewer or more than the ids: the reference's refusal."""
    write_random_dir(tmp_path, 0 if kind == "npz" else 1)
    for k, path in enumerate(p for p in files_of(tmp_path) if ".scores" not in p.name and p.name.startswith("draft")):
        if k % 3:
            continue
        if kind == "npz":
            arrays = _load(path)
            if "scores" not in arrays:
                continue
            arrays["scores"] = (
                np.concatenate([arrays["scores"], arrays["scores"][:1]]) if k % 2 else arrays["scores"][:0]
            )
            _save(path, arrays)
        else:
            comp = path.with_name(path.name[: -len(".npy")] + ".scores.npy")
            if comp.exists():
                sc = np.load(comp)
                np.save(comp, np.concatenate([sc, sc[:1]]) if k % 2 else sc[:, :1])
    assert cli_output(tmp_path) == reference_output(tmp_path)


def test_a_validate_parents_companion_does_not_send_its_round_to_the_reference(tmp_path):
    """The reference reader never reads a validate's .parents companion (roundbatch.read_files), so
    the bulk reader takes such rounds too, and prints what the reference prints."""
    synth = Path(__file__).resolve().parent.parent / "sample_dumps" / "synthetic_article"
    for path in synth.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
        if path.name.startswith("validate_"):
            np.save(tmp_path / path.name.replace(".npz", ".parents.npy"), np.arange(3))
    assert bulk_rounds(tmp_path) == 300
    assert cli_output(tmp_path) == reference_output(tmp_path)
