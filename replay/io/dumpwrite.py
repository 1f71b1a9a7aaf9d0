"""Write rounds in the dump format that the readers accept (docs/dump-format.md)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from replay.util.atomic import write_bytes_atomic, write_json_atomic

from .dumpnames import matrix_name
from .step0 import DEFAULT_STEP0_OFFSET, parse_offset

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "specreplay-dump"
MANIFEST_VERSION = 1


@dataclass(frozen=True)
class StepRecord:
    """What one draft step (or the verification) produced, ready to be written."""

    ids: np.ndarray  # [rows, cols] int64 token ids, each row sorted by descending probability
    scores: np.ndarray | None = None  # [rows, cols] float32 log-probabilities (same cells as ids)
    parents: np.ndarray | None = None  # [rows] int64 tree-order node id each row expands (draft only)
    # [rows, 2] float64 (validate, layout "all" only): row n's node's log-probability under its
    # parent's row at the manifest's node_logprob_temperatures (root row 0); docs/dump-format.md
    node_logprobs: np.ndarray | None = None


def step_file_name(
    kind: str,
    key: tuple[int, int],
    step: int | None = None,
    step0_offset: int | tuple[int, int] = DEFAULT_STEP0_OFFSET,
) -> str:
    """``draft_step_{i}_{a}_{b}`` or ``validate_{a}_{b}`` for a round keyed ``(a, b)``; step0_offset as
    --step0-offset takes it (N or (A, B))."""
    a, b = key
    if kind == "validate":
        return matrix_name((-1, a, b))
    if step is None:
        raise ValueError("a draft file needs its step index")
    if step == 0:
        da, db = parse_offset(step0_offset)
        a, b = a - da, b - db
    return matrix_name((step, a, b))


def _npz_bytes(rec: StepRecord) -> bytes:
    arrays: dict[str, np.ndarray] = {"ids": np.asarray(rec.ids, dtype=np.int64)}
    if rec.ids.ndim != 2:
        raise ValueError(f"ids: expected [rows, cols], got shape {rec.ids.shape}")
    if rec.scores is not None:
        if rec.scores.shape != rec.ids.shape:
            raise ValueError(f"scores shape {rec.scores.shape} differs from ids shape {rec.ids.shape}")
        arrays["scores"] = np.asarray(rec.scores, dtype=np.float32)
    if rec.parents is not None:
        if rec.parents.shape != (rec.ids.shape[0],):
            raise ValueError(f"parents: expected [{rec.ids.shape[0]}], got shape {rec.parents.shape}")
        arrays["parents"] = np.asarray(rec.parents, dtype=np.int64)
    if rec.node_logprobs is not None:
        if rec.node_logprobs.ndim != 2 or rec.node_logprobs.shape[0] != rec.ids.shape[0]:
            raise ValueError(f"node_logprobs: expected [{rec.ids.shape[0]}, T], got shape {rec.node_logprobs.shape}")
        arrays["node_logprobs"] = np.asarray(rec.node_logprobs, dtype=np.float64)
    buf = io.BytesIO()
    # numpy's stub types **kwds against its keyword allow_pickle (a bool) too; the names here are
    # ids, scores, parents and node_logprobs, never allow_pickle.
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    return buf.getvalue()


def write_round(
    out_dir: str | Path,
    key: tuple[int, int],
    steps: Sequence[StepRecord],
    validate: StepRecord,
    step0_offset: int | tuple[int, int] = DEFAULT_STEP0_OFFSET,
) -> list[Path]:
    """Write one round as ``.npz`` files (ids, optional scores, parents, node_logprobs), each atomically."""
    out_dir = Path(out_dir)
    written = []
    for i, rec in enumerate(steps):
        path = out_dir / (step_file_name("draft", key, i, step0_offset) + ".npz")
        write_bytes_atomic(path, _npz_bytes(rec))
        written.append(path)
    path = out_dir / (step_file_name("validate", key) + ".npz")
    write_bytes_atomic(path, _npz_bytes(validate))
    written.append(path)
    return written


def write_manifest(out_dir: str | Path, manifest: dict[str, Any]) -> Path:
    """Write ``manifest.json`` atomically, stamping format and version."""
    body = {"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION}
    body.update(manifest)
    path = Path(out_dir) / MANIFEST_NAME
    write_json_atomic(path, body)
    return path
