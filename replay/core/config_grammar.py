"""The one tree-config grammar: every option that takes a config parses it here, and every command
prints configs with ``format_config`` (what it prints parses back). docs/config-grammar.md.

One config, in any of these spellings (all the same tree)::

    tree.json                      a JSON file: a tree object, a {"specTree": [...]} object, or a list
    {"topKSpec": [[6],[2,2],[1,1]]}  inline JSON: the same three kinds
    [[6],[2,2],[1,1]]              a bare topKSpec list
    [6]|[2,2]|[1,1]                the rank form (canonical: what commands print)
    6,2x2,1x1                      the grid form (sweep --grid)
    6_2x2_1x1                      the run-name form (a sweep's dumps/<name>)

topHead is always the number of widths of each step (the tree check demands it), so no form spells
it. Suffixes: ``@0.2`` (``_t0.2`` in a run name) sets gammaThreshold, ``+dyn`` (``_dyn``) sets
treeType 1 (dynamic). A list of configs (``--grid``) separates them by ';'; in a grid-form item
'|' lists alternatives for a step (``4|6,2x2|1,1``) or for the threshold (``1,1,1@0|0.3``) and
every combination is a config (those the tree cannot hold are skipped and reported).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from replay.util.bounded import MAX_JSON_BYTES, parse_json_bytes, read_file_bytes
from replay.util.errors import ConfigError, SpecReplayError, shown

from .config import (  # noqa: F401  (run_name: replay.live.sweep.grid imports it from here)
    TREE_DYNAMIC,
    TREE_STATIC,
    SpecConfig,
    TreeConfig,
    config_key_warnings,
    distinct_configs,
    parse_config,
    run_name,
)

EXPECTED = (
    "a JSON file, inline JSON (a tree object, a specTree object or a topKSpec list like [[6],[2,2],[1,1]]), "
    "or a compact form: [6]|[2,2]|[1,1], 6,2x2,1x1 or 6_2x2_1x1 (suffix @0.2 = gammaThreshold, +dyn = dynamic)"
)

_NUM = r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?"
_STEP = r"[0-9]+(?:x[0-9]+)*"
_RANK_ROW = r"\[\s*[0-9]+(?:\s*,\s*[0-9]+)*\s*\]"
_RANK = re.compile(rf"^(?P<body>{_RANK_ROW}(?:\s*\|\s*{_RANK_ROW})*)(?:@(?P<thr>{_NUM}))?(?P<dyn>\+dyn)?$")
_GRID = re.compile(rf"^(?P<body>{_STEP}(?:,{_STEP})*)(?:@(?P<thr>{_NUM}))?(?P<dyn>\+dyn)?$")
_NAME = re.compile(rf"^(?P<body>{_STEP}(?:_{_STEP})*)(?:_t(?P<thr>{_NUM}))?(?P<dyn>_dyn)?$")
# A grid item with alternatives: steps and thresholds may list several values separated by '|'.
_GRID_ALTS = re.compile(
    rf"^(?P<body>{_STEP}(?:\|{_STEP})*(?:,{_STEP}(?:\|{_STEP})*)*)(?:@(?P<thr>{_NUM}(?:\|{_NUM})*))?(?P<dyn>\+dyn)?$"
)


class ConfigTextError(SpecReplayError):
    """A config option's text that is none of the grammar's forms (names the option and the text)."""

    def __init__(self, option: str, text: str, message: str):
        self.option, self.text, self.reason = option, text, message
        super().__init__(f"{option} {shown(text)!r}: {message}")


# ---------------------------------------------------------------------------------------------
# Printing


# format_config, grid_item and run_name live in replay.core.config beside TreeConfig (its ``short()``
# prints with them); they are re-exported here so the grammar reads and writes in one module.


# ---------------------------------------------------------------------------------------------
# Parsing


def parse_spec(text: str, option: str = "--config") -> SpecConfig:
    """One config option's value, in any form (module docstring), as a SpecConfig.

    A JSON list of tree objects gives one tree per item; run-level keys are kept only from an object.
    """
    s = text.strip()
    if not s:
        raise ConfigTextError(option, text, f"empty; expected {EXPECTED}")
    compact = _compact(s, option, text)
    if compact is not None:
        return SpecConfig((compact,))
    if s[0] in "[{":
        try:
            obj = parse_json_bytes(s.encode("utf-8", "surrogateescape"), lambda m: ConfigTextError(option, text, m))
        except ConfigTextError as exc:
            why = _diagnose_rank(s) if _looks_rank_form(s) else exc.reason
            raise ConfigTextError(option, text, f"{why}; expected {EXPECTED}") from None
        return _from_json(obj, option, text, None)
    path = Path(s)
    if not path.exists():
        raise ConfigTextError(option, text, f"{_diagnose(s)}; expected {EXPECTED}")
    try:  # a pipe (--config <(...)) is read too
        obj = parse_json_bytes(
            read_file_bytes(path, MAX_JSON_BYTES, lambda m: ConfigError(path, None, m), True),
            lambda m: ConfigError(path, None, m),
        )
    except ConfigError as exc:
        raise ConfigTextError(option, text, str(exc)) from None
    return _from_json(obj, option, text, str(path))


def parse_configs(text: str, option: str = "--configs", notes: list[str] | None = None) -> list[TreeConfig]:
    """The trees of one config value (a specTree file or a JSON list gives several).

    notes: gets the warning of the value's misspelt keys (config_key_warnings), for the command to print:
    a list of trees no longer holds a tree object's run-level keys, where they are found."""
    spec = parse_spec(text, option)
    if notes is not None:
        notes.extend(config_key_warnings(spec, option))
    return list(spec.trees)


def parse_config_text(text: str, option: str = "--config") -> TreeConfig:
    """Exactly one tree (a value that holds several is refused)."""
    trees = parse_configs(text, option)
    if len(trees) != 1:
        raise ConfigTextError(option, text, f"holds {len(trees)} trees; expected one config")
    return trees[0]


def parse_config_list(
    text: str, option: str = "--grid", notes: list[str] | None = None
) -> tuple[list[TreeConfig], list[str]]:
    """``A;B;C``: configs in order (duplicates dropped) and the skipped alternative combinations.

    Each item is any one-config form; a grid-form item may list alternatives with '|'. notes: as
    parse_configs'.
    """
    configs: list[TreeConfig] = []
    skipped: list[str] = []
    for item in (s.strip() for s in text.split(";")):
        if not item:
            continue
        m = _GRID_ALTS.match(item)
        if m is None or "|" not in item:
            configs.extend(parse_configs(item, f"{option} item", notes))
            continue
        steps = [step.split("|") for step in m.group("body").split(",")]
        thresholds = m.group("thr").split("|") if m.group("thr") else ["0"]
        dyn = "+dyn" if m.group("dyn") else ""
        combos = list(itertools.product(*steps, thresholds))
        for *combo, thr in combos:
            one = ",".join(combo) + (f"@{thr}" if float(thr) > 0 else "") + dyn
            try:
                configs.append(parse_config_text(one, f"{option} item"))
            except ConfigTextError as exc:
                if len(combos) == 1:
                    raise
                skipped.append(f"{one}: {exc.reason}")
    if not configs and not skipped:
        raise ConfigTextError(option, text, f"no configs; expected configs separated by ';', each {EXPECTED}")
    return distinct_configs(configs), skipped


def _compact(s: str, option: str, text: str) -> TreeConfig | None:
    """The rank, grid or run-name form, or None when ``s`` is none of them."""
    for pattern, row_sep, width_sep in ((_RANK, "|", ","), (_GRID, ",", "x"), (_NAME, "_", "x")):
        m = pattern.match(s)
        if m is None:
            continue
        rows = [r.strip().strip("[]").split(width_sep) for r in m.group("body").split(row_sep)]
        spec = [[int(w) for w in row] for row in rows]
        thr = float(m.group("thr")) if m.group("thr") else 0.0
        tree_type = TREE_DYNAMIC if m.group("dyn") else TREE_STATIC
        try:
            return TreeConfig.from_lists(spec, tree_type=tree_type, gamma_threshold=thr)
        except ConfigError as exc:
            raise ConfigTextError(option, text, str(exc)) from None
    return None


def _looks_rank_form(s: str) -> bool:
    """Whether ``s``, opening with '[' and neither a compact form nor JSON, was meant as the rank form
    ``[6]|[2,2]``: it holds a '|' (no JSON config does) or opens with one bracket row rather than
    JSON's ``[[`` or ``[{``."""
    return s.startswith("[") and ("|" in s or not re.match(r"\[\s*[\[{]", s))


def _threshold_text(s: str) -> str:
    """What follows '@' in ``s``, without the +dyn suffix."""
    return s.split("@", 1)[1].removesuffix("+dyn")


def _bad_threshold(thresholds: list[str]) -> str | None:
    """Why the first of ``thresholds`` that is not a number is wrong; None when each is one."""
    bad = next((t for t in thresholds if not re.fullmatch(_NUM, t)), None)
    return None if bad is None else f"gammaThreshold {bad!r} is not a number"


def _diagnose_rank(s: str) -> str:
    """What breaks the rank form in ``s``: the first row between '|' that is not ``[w,w,...]``."""
    body = re.split(r"@|\+dyn", s)[0]
    bad = _bad_threshold([_threshold_text(s)]) if "@" in s else None  # the rank form takes one threshold
    if bad:
        return bad
    for row in (r.strip() for r in body.split("|")):
        if not row:
            return "an empty row between '|' separators (each row is [w,w,...])"
        if not row.startswith("["):
            return f"row {row!r} does not open with '[' (each row is [w,w,...], rows separated by '|')"
        inner, closed, rest = row[1:].partition("]")
        if not closed:
            return f"unclosed bracket in {row}"
        if rest.strip():
            return f"{rest.strip()!r} after the bracket of {row[: len(row) - len(rest)]} (rows are separated by '|')"
        bad = next((t for t in (w.strip() for w in inner.split(",")) if not t.isdigit()), None)
        if bad is not None:
            return f"width {bad!r} in {row} is not an integer" if bad else f"an empty width in {row}"
    return "not a config form"


def _diagnose(s: str) -> str:
    """Why ``s`` is neither a file nor a compact form: the first width that is not an integer, when
    ``s`` looks like a compact form (separators, no path), else that the file does not exist."""
    if "/" not in s and "|" in s and "[" in s:
        return _diagnose_rank(s)
    bad = _bad_threshold(_threshold_text(s).split("|")) if "/" not in s and "@" in s else None
    if bad:
        return bad
    if "/" not in s and not s.endswith(".json") and re.search(r"[,|_x]", s):
        body = re.split(r"@|\+dyn|_t[0-9.]|_dyn", s)[0]
        bad = next((t for t in re.split(r"[,|_x\[\]\s]+", body) if t and not t.isdigit()), None)
        if bad is not None:
            return f"width {bad!r} is not an integer"
    return "no such file, and not a config form"


def _from_list(obj: list[dict[str, Any]], source: str | None) -> SpecConfig:
    """A JSON list of configs, one tree per tree object (all of a specTree object's): each item's
    unknown keys go with its tree, so that a misspelt one is still named (replay.core.config.misspelt_keys)."""
    trees: list[TreeConfig] = []
    names: list[str] = []
    for i, o in enumerate(obj):
        item = parse_config(o, f"{source or ''}[{i}]")
        if len(item.trees) == 1 and "specTree" not in o:
            trees.append(replace(item.tree, extra={**item.tree.extra, **item.unknown}))
            names.append(f"[{i}]")
        else:
            trees.extend(item.trees)
            names.extend(f"[{i}].specTree[{j}]" for j in range(len(item.trees)))
    return SpecConfig(tuple(trees), source=source, tree_names=tuple(names))


def _from_json(obj: Any, option: str, text: str, source: str | None) -> SpecConfig:
    if isinstance(obj, list) and obj and all(isinstance(r, list) for r in obj):
        obj = {"gamma": len(obj), "topKSpec": obj}  # a bare topKSpec list
    try:
        if isinstance(obj, dict):
            return parse_config(obj, source)
        if isinstance(obj, list) and obj and all(isinstance(t, dict) for t in obj):
            return _from_list(obj, source)
    except ConfigError as exc:
        raise ConfigTextError(option, text, str(exc)) from None
    raise ConfigTextError(option, text, f"JSON {type(obj).__name__} is not a config; expected {EXPECTED}")
