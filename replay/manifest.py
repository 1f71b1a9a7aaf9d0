"""Read the optional ``manifest.json`` of a dump directory (our harness always writes one)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .config import SpecConfig, parse_config
from .dumpwrite import MANIFEST_NAME
from .errors import DumpError
from .grouping import Grouping, Key, Skipped
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
    stated_rounds: int | None = None  # how many rounds the manifest says the directory holds
    round_keys: tuple[Key, ...] | None = None  # which ones, when it lists them (our harness does)


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
        if not isinstance(cols, dict) or not all(isinstance(v, int) and v > 0 for v in cols.values()):
            raise _field(path, "encoding.columns", f"expected an integer or {{draft, validate}}, got {cols!r}")
        dtypes = {name: enc.get(name, default) for name, default in (("dtype", "int32"), ("score_dtype", "float32"))}
        for name, value in dtypes.items():
            try:
                np.dtype(value)
            except TypeError:
                raise _field(path, f"encoding.{name}", f"expected a numpy dtype such as 'int32', got {value!r}") from None
        raw = RawSpec(dtypes["dtype"], cols, dtypes["score_dtype"], bool(enc.get("force", True)))
    rounds = body.get("rounds")
    if isinstance(rounds, int) and not isinstance(rounds, bool) and rounds >= 0:
        return Manifest(str(path), config, layout, score_kind, offset, raw, {}, body, rounds, None)
    if rounds is not None and not isinstance(rounds, list):
        raise _field(path, "rounds", f"expected a list of round records or a round count, got {rounds!r}")
    roots: dict[Key, int] = {}
    keys: list[Key] = []
    for k, rec in enumerate(rounds or []):
        try:
            key = (int(rec["key"][0]), int(rec["key"][1]))
        except (KeyError, TypeError, IndexError, ValueError):
            raise _field(path, f"rounds[{k}].key", f"expected [a, b], got {rec.get('key') if isinstance(rec, dict) else rec!r}") from None
        keys.append(key)
        root = rec.get("root_token")
        if root is not None:
            if not isinstance(root, int) or isinstance(root, bool):
                raise _field(path, f"rounds[{k}].root_token", f"expected a token id (integer), got {root!r}")
            roots[key] = root
    if rounds is None:
        return Manifest(str(path), config, layout, score_kind, offset, raw, roots, body)
    return Manifest(str(path), config, layout, score_kind, offset, raw, roots, body, len(keys), tuple(keys))


MAX_KEYS_NAMED = 5  # round keys quoted in one message; the rest are counted


def check_manifest_rounds(grouping: Grouping, manifest: Manifest) -> Grouping:
    """``grouping`` with every disagreement between the files and the manifest's rounds skipped.

    A round the manifest lists without any file is skipped by name; rounds whose files are there
    but which the manifest does not list (two runs in one directory?) are replayed and reported in
    one entry, as is a stated round count that the file names do not reach. Either way the
    directory is not the run its manifest describes, so the commands exit 1 and say why.
    """
    if manifest.stated_rounds is None:
        return grouping
    found = set(grouping.keys)
    extra: list[Skipped] = []
    # Messages name the file, not its directory: a packed run keeps them and must print the same.
    where = (manifest.path or MANIFEST_NAME,)
    if manifest.round_keys is None:
        if manifest.stated_rounds != len(found):
            extra.append(Skipped(MANIFEST_NAME, f"states {manifest.stated_rounds} round(s); the file names form {len(found)}", where))
    else:
        listed = set(manifest.round_keys)
        for key in sorted(listed - found):
            extra.append(Skipped(f"round {key[0]}_{key[1]}", f"listed in {MANIFEST_NAME} but no file of this round is in the directory", where))
        unlisted = sorted(found - listed)
        if unlisted:
            named = ", ".join(f"{a}_{b}" for a, b in unlisted[:MAX_KEYS_NAMED])
            more = f" and {len(unlisted) - MAX_KEYS_NAMED} more" if len(unlisted) > MAX_KEYS_NAMED else ""
            extra.append(Skipped(MANIFEST_NAME, f"lists {len(listed)} round(s) and not {len(unlisted)} found here: "
                                 f"{named}{more} (replayed anyway; are two runs in one directory?)", where))
    if not extra:
        return grouping
    return Grouping(grouping.rounds, grouping.skipped + tuple(extra), grouping.keys)
