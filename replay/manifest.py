"""Read the optional ``manifest.json`` of a dump directory (our harness always writes one)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .config import SpecConfig, parse_config
from .dumpwrite import MANIFEST_NAME
from .errors import DumpError
from .grouping import Key
from .matrix_io import SCORE_AUTO, RawSpec

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


def read_manifest(directory: str | Path) -> Manifest:
    """The manifest of ``directory``, or an empty Manifest when there is none."""
    path = Path(directory) / MANIFEST_NAME
    if not path.is_file():
        return Manifest()
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DumpError(path, f"not valid JSON at line {exc.lineno}: {exc.msg}") from None
    if not isinstance(body, dict):
        raise _field(path, "<top level>", "expected a JSON object")
    config = parse_config(body["config"], f"{path}#config") if "config" in body else None
    layout = body.get("layout")
    if layout is not None and layout not in LAYOUTS:
        raise _field(path, "layout", f"expected one of {LAYOUTS}, got {layout!r}")
    score_kind = body.get("score_kind", SCORE_AUTO)
    if score_kind not in (SCORE_AUTO, "prob", "logprob"):
        raise _field(path, "score_kind", f"expected 'prob' or 'logprob', got {score_kind!r}")
    offset = body.get("step0_offset")
    if offset is not None:
        if isinstance(offset, int):
            offset = (offset, offset)
        elif isinstance(offset, list) and len(offset) == 2 and all(isinstance(v, int) for v in offset):
            offset = (offset[0], offset[1])
        else:
            raise _field(path, "step0_offset", f"expected an integer or [a, b], got {offset!r}")
    raw = None
    enc = body.get("encoding")
    if isinstance(enc, dict) and enc.get("format") == "raw":
        cols = enc.get("columns")
        if isinstance(cols, int):
            cols = {"draft": cols, "validate": cols}
        if not isinstance(cols, dict):
            raise _field(path, "encoding.columns", f"expected an integer or {{draft, validate}}, got {cols!r}")
        raw = RawSpec(enc.get("dtype", "int32"), cols, enc.get("score_dtype", "float32"), bool(enc.get("force", True)))
    roots: dict[Key, int] = {}
    for k, rec in enumerate(body.get("rounds", []) or []):
        try:
            key = (int(rec["key"][0]), int(rec["key"][1]))
        except (KeyError, TypeError, IndexError, ValueError):
            raise _field(path, f"rounds[{k}].key", f"expected [a, b], got {rec.get('key') if isinstance(rec, dict) else rec!r}") from None
        if rec.get("root_token") is not None:
            roots[key] = int(rec["root_token"])
    return Manifest(str(path), config, layout, score_kind, offset, raw, roots, body)
