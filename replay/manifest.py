"""Read the optional ``manifest.json`` of a dump directory (our harness always writes one)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .config import SpecConfig, parse_config
from .dumpwrite import MANIFEST_NAME
from .bounded import read_json_file
from .errors import DumpError
from .grouping import Key
from .matrix_io import ID_KINDS, SCORE_AUTO, SCORE_KINDS, RawSpec, check_raw_columns, raw_dtype

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

LAYOUTS = ("parents", "all")


@dataclass(frozen=True)
class Manifest:
    path: str | None = None
    config: SpecConfig | None = None
    layout: str | None = None
    score_kind: str = SCORE_AUTO
    step0_offset: tuple[int, int] | None = None
    raw: RawSpec | None = None
    root_tokens: Mapping[Key, int] = field(default_factory=dict)
    body: Mapping[str, Any] = field(default_factory=dict)  # everything, for reports


def _field(path: Path, name: str, message: str) -> DumpError:
    return DumpError(path, message, name)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _offset(path: Path, value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    if _is_int(value):
        return (value, value)
    if isinstance(value, list) and len(value) == 2 and all(_is_int(v) for v in value):
        return (value[0], value[1])
    raise _field(path, "step0_offset", f"expected an integer or [a, b], got {_short(value)}")


def _raw_encoding(path: Path, enc: Any) -> RawSpec | None:
    if not isinstance(enc, dict) or enc.get("format") != "raw":
        return None
    cols = enc.get("columns")
    if _is_int(cols):
        cols = {"draft": cols, "validate": cols}
    check_raw_columns(cols, lambda m: _field(path, "encoding.columns", m))
    dtype = enc.get("dtype", "int32")
    score_dtype = enc.get("score_dtype", "float32")
    raw_dtype(dtype, ID_KINDS, lambda m: _field(path, "encoding.dtype", m))
    raw_dtype(score_dtype, SCORE_KINDS, lambda m: _field(path, "encoding.score_dtype", m))
    return RawSpec(dtype, dict(cols), score_dtype, bool(enc.get("force", True)))


def _root_tokens(path: Path, records: Any) -> dict[Key, int]:
    if records is None:
        return {}
    if not isinstance(records, list):
        raise _field(path, "rounds", f"expected a list of round records, got {type(records).__name__}")
    roots: dict[Key, int] = {}
    for k, rec in enumerate(records):
        key = rec.get("key") if isinstance(rec, dict) else None
        if not (isinstance(key, list) and len(key) == 2 and all(_is_int(v) and _INT64_MIN <= v <= _INT64_MAX for v in key)):
            raise _field(path, f"rounds[{k}].key", f"expected [a, b] (two integers), got {_short(key if isinstance(rec, dict) else rec)}")
        root = rec.get("root_token")
        if root is None:
            continue
        if not (_is_int(root) and _INT64_MIN <= root <= _INT64_MAX):
            raise _field(path, f"rounds[{k}].root_token", f"expected an integer token id, got {_short(root)}")
        roots[(key[0], key[1])] = root
    return roots


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def read_manifest(directory: str | Path) -> Manifest:
    """The manifest of ``directory``, or an empty Manifest when there is none.

    An entry called manifest.json that is not a regular file (a directory, a FIFO) is an error,
    never opened and never ignored. Size and nesting are bounded (replay.bounded).
    """
    path = Path(directory) / MANIFEST_NAME
    if not os.path.lexists(path):
        return Manifest()
    body = read_json_file(path)
    if not isinstance(body, dict):
        raise _field(path, "<top level>", "expected a JSON object")
    config = parse_config(body["config"], f"{path}#config") if "config" in body else None
    layout = body.get("layout")
    if layout is not None and layout not in LAYOUTS:
        raise _field(path, "layout", f"expected one of {LAYOUTS}, got {_short(layout)}")
    score_kind = body.get("score_kind", SCORE_AUTO)
    if score_kind not in (SCORE_AUTO, "prob", "logprob"):
        raise _field(path, "score_kind", f"expected 'prob' or 'logprob', got {_short(score_kind)}")
    offset = _offset(path, body.get("step0_offset"))
    raw = _raw_encoding(path, body.get("encoding"))
    roots = _root_tokens(path, body.get("rounds"))
    return Manifest(str(path), config, layout, score_kind, offset, raw, roots, body)
