"""Read one dump matrix (token ids, optional scores, optional parent indices) from any encoding.

Encodings (docs/dump-format.md): plain text (no extension, ``.txt``, ``.csv``; whitespace- or
comma-separated), ``.npy``, ``.npz`` (arrays ``ids``, ``scores``, ``parents``), ``.pt`` (a tensor or
a dict of those tensors; read without torch, never unpickled) and raw headerless binary with a
stated dtype and column count (``.bin``/``.raw``, or every data file when raw is forced).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from .errors import DumpError
from .ptfile import load_pt
from .vocab import PAD_TOKEN

TEXT_EXTS = ("", ".txt", ".csv")
RAW_EXTS = (".bin", ".raw")
ARRAY_EXTS = (".npy", ".npz", ".pt")
DATA_EXTS = TEXT_EXTS + RAW_EXTS + ARRAY_EXTS

SCORE_AUTO, SCORE_PROB, SCORE_LOGPROB = "auto", "prob", "logprob"
_SEP = re.compile(r"[\s,]+")
_PROB_SLACK = 1e-5  # float32 softmax outputs can exceed 1 by a few ulps


@dataclass(frozen=True)
class RawSpec:
    """How to read headerless binary: dtype and columns (rows follow from the file size)."""

    dtype: str = "int32"  # numpy dtype string, little-endian unless stated ('>i4')
    columns: Mapping[str, int] = field(default_factory=dict)  # per kind: "draft", "validate"
    score_dtype: str = "float32"
    force: bool = False  # read extension-less files as raw instead of text

    @classmethod
    def parse(cls, text: str) -> "RawSpec":
        """``int32:16`` or ``int32:draft=16,validate=1`` (append ``:force`` for extension-less files)."""
        parts = text.split(":")
        if len(parts) < 2:
            raise DumpError("--raw", f"expected DTYPE:COLUMNS (e.g. int32:16), got {text!r}")
        try:
            np.dtype(parts[0])
        except TypeError:
            raise DumpError("--raw", f"unknown dtype {parts[0]!r}") from None
        cols: dict[str, int] = {}
        try:
            if "=" in parts[1]:
                for item in parts[1].split(","):
                    kind, value = item.split("=")
                    if kind not in ("draft", "validate"):
                        raise ValueError(kind)
                    cols[kind] = int(value)
            else:
                cols = {"draft": int(parts[1]), "validate": int(parts[1])}
        except ValueError:
            raise DumpError("--raw", f"columns must be N or draft=N,validate=M, got {parts[1]!r}") from None
        return cls(parts[0], cols, force=len(parts) > 2 and parts[2] == "force")


@dataclass(frozen=True, eq=False)
class DumpMatrix:
    """One file's content. ``scores`` are always converted to natural-log probabilities."""

    path: str
    ids: np.ndarray  # [rows, cols] int64
    logp: np.ndarray | None = None  # [rows, cols] float64 log-probabilities, None when absent
    parents: np.ndarray | None = None  # [rows] int64 tree-order node expanded by each row

    @classmethod
    def from_lists(cls, ids, logp=None, parents=None, path: str = "<memory>") -> "DumpMatrix":
        return cls(
            path,
            np.asarray(ids, dtype=np.int64).reshape(len(ids), -1),
            None if logp is None else np.asarray(logp, dtype=np.float64).reshape(len(ids), -1),
            None if parents is None else np.asarray(parents, dtype=np.int64),
        )

    @property
    def rows(self) -> int:
        return int(self.ids.shape[0])

    @property
    def cols(self) -> int:
        return int(self.ids.shape[1])


def parse_text_matrix(text: str, path: str, as_float: bool = False) -> np.ndarray:
    """[rows, cols] from whitespace/comma-separated text; '#' lines and blank lines are skipped."""
    rows: list[list[str]] = []
    line_nos: list[int] = []
    for no, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        rows.append([c for c in _SEP.split(stripped) if c])
        line_nos.append(no)
    if not rows:
        raise DumpError(path, "empty file: no matrix rows")
    width = len(rows[0])
    for cells, no in zip(rows, line_nos):
        if len(cells) != width:
            raise DumpError(
                path, f"ragged rows: line {no} has {len(cells)} values, line {line_nos[0]} has {width}", "ids"
            )
    try:
        return np.array(rows, dtype=np.float64 if as_float else np.int64)
    except ValueError:
        for cells, no in zip(rows, line_nos):
            for c in cells:
                try:
                    float(c) if as_float else int(c)
                except ValueError:
                    kind = "a number" if as_float else "an integer token id"
                    raise DumpError(path, f"line {no}: {c!r} is not {kind}", "scores" if as_float else "ids") from None
        raise


def _read_text(path: Path, as_float: bool) -> np.ndarray:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DumpError(path, "not UTF-8 text; if this is a raw binary dump, pass --raw DTYPE:COLUMNS") from None
    return parse_text_matrix(text, str(path), as_float)


def _read_raw(path: Path, dtype: str, columns: int) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.byteorder == "=":
        dt = dt.newbyteorder("<")
    data = path.read_bytes()
    row_bytes = dt.itemsize * columns
    if columns < 1 or len(data) % row_bytes:
        raise DumpError(
            path,
            f"size {len(data)} bytes is not a whole number of rows of {columns} x {dt.name} ({row_bytes} bytes); "
            "truncated file or wrong --raw",
        )
    if not data:
        raise DumpError(path, "empty file: no matrix rows")
    return np.frombuffer(data, dtype=dt).reshape(-1, columns)


def _starts_with(path: Path, magic: bytes) -> bool:
    with open(path, "rb") as fh:
        return fh.read(len(magic)) == magic


def _load_arrays(path: Path) -> dict[str, np.ndarray]:
    ext = path.suffix.lower()
    try:
        if ext == ".npy":
            return {"ids": np.load(path, allow_pickle=False)}
        if ext == ".npz":
            with np.load(path, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
    except ValueError as exc:
        # numpy reports any file without its magic as "pickled data": tell a real pickle (opcode
        # PROTO first) from a corrupt .npy/.npz, and an object array inside a valid file.
        if "Object arrays" in str(exc) or (_starts_with(path, b"\x80") and "pickle" in str(exc)):
            raise DumpError(path, "holds pickled objects; refusing to unpickle (save plain numeric arrays)") from None
        raise DumpError(path, "corrupt or truncated numpy file (no valid .npy/.npz header)") from None
    except (OSError, EOFError) as exc:
        raise DumpError(path, f"corrupt or truncated numpy file: {exc}") from None
    obj = load_pt(path)
    if isinstance(obj, np.ndarray):
        return {"ids": obj}
    if isinstance(obj, dict) and all(isinstance(v, np.ndarray) for v in obj.values()):
        return {str(k): v for k, v in obj.items()}
    raise DumpError(path, f"expected a tensor or a dict of tensors, got {type(obj).__name__}")


def _as_ids(arr: np.ndarray, path: Path, field_name: str = "ids") -> np.ndarray:
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.integer)):
        raise DumpError(path, f"expected integer token ids, got dtype {arr.dtype}", field_name)
    if arr.ndim == 1:
        raise DumpError(path, f"expected a 2-D [rows, cols] matrix, got 1-D shape {arr.shape}", field_name)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise DumpError(path, f"expected a non-empty 2-D [rows, cols] matrix, got shape {arr.shape}", field_name)
    return arr.astype(np.int64, copy=False)


def _as_logp(scores: np.ndarray, ids: np.ndarray, path: Path, kind: str) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape != ids.shape:
        raise DumpError(path, f"shape {scores.shape} differs from the ids' shape {ids.shape}", "scores")
    valid = scores[ids != PAD_TOKEN]
    if np.isnan(valid).any():
        raise DumpError(path, "NaN among the scores of real tokens", "scores")
    if kind == SCORE_AUTO:
        kind = SCORE_LOGPROB if (valid < 0).any() else SCORE_PROB
    if kind == SCORE_LOGPROB:
        if (valid > _PROB_SLACK).any():
            raise DumpError(path, f"log-probabilities must be <= 0, found {valid.max():.6g}", "scores")
        return np.minimum(scores, 0.0)
    if ((valid < 0) | (valid > 1 + _PROB_SLACK)).any():
        raise DumpError(path, f"probabilities must lie in [0, 1], found {valid.min():.6g}..{valid.max():.6g}", "scores")
    with np.errstate(divide="ignore"):
        return np.log(np.clip(scores, 0.0, 1.0))


def _as_parents(parents: np.ndarray, rows: int, path: Path) -> np.ndarray:
    parents = np.asarray(parents)
    if parents.ndim == 2 and parents.shape[1] == 1:
        parents = parents[:, 0]
    if parents.ndim != 1 or not np.issubdtype(parents.dtype, np.integer):
        raise DumpError(path, f"expected one integer node index per row, got {parents.dtype} {parents.shape}", "parents")
    if parents.shape[0] < rows:
        raise DumpError(path, f"has {parents.shape[0]} entries but the ids have {rows} rows", "parents")
    return parents.astype(np.int64)


def read_array_file(
    path: Path, kind: str, raw: RawSpec | None, as_float: bool = False, columns: int | None = None
) -> dict[str, np.ndarray]:
    """The named arrays of one file: ``ids`` (or a companion's single matrix) and friends.

    columns: raw column count overriding the kind's (1 for a parents companion).
    """
    ext = path.suffix.lower() if path.suffix.lower() in DATA_EXTS else ""
    if ext in ARRAY_EXTS:
        return _load_arrays(path)
    if ext in RAW_EXTS or (ext == "" and raw is not None and raw.force):
        if raw is None or (columns is None and kind not in raw.columns):
            raise DumpError(path, "raw binary needs a stated dtype and column count: pass --raw DTYPE:COLUMNS")
        cols = columns if columns is not None else raw.columns[kind]
        return {"ids": _read_raw(path, raw.score_dtype if as_float else raw.dtype, cols)}
    return {"ids": _read_text(path, as_float)}


def read_matrix(
    path: str | Path,
    kind: str,
    raw: RawSpec | None = None,
    scores_path: str | Path | None = None,
    parents_path: str | Path | None = None,
    score_kind: str = SCORE_AUTO,
) -> DumpMatrix:
    """Read ids plus optional scores and parents (inside the file, or from companion files).

    kind: "draft" or "validate" (chooses the raw column count).
    """
    path = Path(path)
    if not path.is_file():
        raise DumpError(path, "file not found")
    arrays = read_array_file(path, kind, raw)
    if "ids" not in arrays:
        raise DumpError(path, f"no 'ids' array (found {sorted(arrays)})", "ids")
    ids = _as_ids(arrays["ids"], path)
    scores = arrays.get("scores")
    if scores_path is not None:
        scores = read_array_file(Path(scores_path), kind, raw, as_float=True)["ids"]
        path_for_scores = Path(scores_path)
    else:
        path_for_scores = path
    logp = None if scores is None else _as_logp(scores, ids, path_for_scores, score_kind)
    parents = arrays.get("parents")
    parents_src = path
    if parents_path is not None:
        parents = read_array_file(Path(parents_path), kind, raw, columns=1)["ids"]
        parents_src = Path(parents_path)
    par = None if parents is None else _as_parents(parents, ids.shape[0], parents_src)
    return DumpMatrix(str(path), ids, logp, par)
