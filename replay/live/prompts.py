"""Read a prompts file into token ids: text lines (encoded with the target's tokenizer) or JSON
Lines of ids (``{"prompt_ids": [...]}`` or a plain list), for models without a tokenizer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import PromptError

MIN_PROMPT_TOKENS = 2  # the root plus one earlier token: dump keys name step 0 one position back


def read_prompts(path: str | Path, tokenizer: Any | None) -> list[list[int]]:
    lines, ids = read_prompt_lines(path)
    if ids is not None:
        return ids
    if tokenizer is None:
        raise PromptError(
            f"{path}: text prompts need a tokenizer, and the target has none; give JSON Lines of token ids"
        )
    prompts = [list(tokenizer.encode(ln)) for ln in lines]
    _check_lengths(Path(path), prompts)
    return prompts


def read_prompt_lines(path: str | Path) -> tuple[list[str], list[list[int]] | None]:
    """The file's non-blank lines, and their token ids when it is JSON Lines of ids (None: text
    lines, to encode with the target's tokenizer). Needs no model: the CLI calls it before any
    model loads, so an empty or malformed prompts file costs no model load."""
    path = Path(path)
    try:
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    except OSError as exc:
        raise PromptError(f"{path}: cannot read prompts: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise PromptError(f"{path}: not UTF-8 text; expected one prompt per line, or JSON Lines of token ids") from None
    if not lines:
        raise PromptError(
            f"{path}: no prompts (the file is empty); write one prompt per line, or JSON Lines of token ids"
        )
    if not _looks_like_ids(lines[0]):
        return lines, None
    ids = [_ids_line(path, i + 1, ln) for i, ln in enumerate(lines)]
    _check_lengths(path, ids)
    return lines, ids


def _check_lengths(path: Path, prompts: list[list[int]]) -> None:
    for i, p in enumerate(prompts):
        if len(p) < MIN_PROMPT_TOKENS:
            raise PromptError(f"{path}: prompt {i + 1} has {len(p)} token(s); at least {MIN_PROMPT_TOKENS} are needed")


def _looks_like_ids(line: str) -> bool:
    s = line.lstrip()
    return s.startswith("[") or s.startswith('{"prompt_ids"') or s.startswith("{")


def _ids_line(path: Path, lineno: int, line: str) -> list[int]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise PromptError(f"{path}:{lineno}: not valid JSON: {exc.msg}") from None
    ids = obj.get("prompt_ids") if isinstance(obj, dict) else obj
    if not isinstance(ids, list) or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids):
        raise PromptError(f'{path}:{lineno}: expected {{"prompt_ids": [non-negative ints]}} or a list of ints')
    return ids
