"""Sweep specifications: the grid text syntax and JSON config lists, turned into tree configs.

Grid syntax (``specreplay sweep --grid``)::

    6,2x2,1x1;1,1,1,1        two configs, separated by ';'
    6,2x2,1x1                steps separated by ',', a step's widths (one per expanded head) by 'x'
                             = topKSpec [[6],[2,2],[1,1]], topHead [1,2,2]
    4|6,2x2|1,1              '|' lists alternatives for a step; every combination is a config
                             (combinations the tree cannot hold are skipped and reported)
    6,2x2,1x1@0.2            '@' sets gammaThreshold (drafting stops early when the best path's
                             draft probability falls below it: dynamic depth)
    1,1,1,1,1,1@0|0.3|0.5    '|' after '@' lists thresholds: one config per threshold

A chain of depth 4 is ``1,1,1,1``.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from ..config import TreeConfig, grid_item, parse_config  # noqa: F401  grid_item: parse_grid's inverse, kept importable here
from ..errors import ConfigError
from .errors import SweepError


def parse_grid(text: str) -> tuple[list[TreeConfig], list[str]]:
    """Configs in order (duplicates dropped) and the skipped alternative combinations, as text."""
    configs: list[TreeConfig] = []
    skipped: list[str] = []
    for item in (s.strip() for s in text.split(";")):
        if not item:
            continue
        body, thresholds = _split_thresholds(item)
        steps = [s.strip().split("|") for s in body.split(",")]
        combos = list(itertools.product(*steps, thresholds))
        for *combo, threshold in combos:
            try:
                spec = [[_width(w, item) for w in step.split("x")] for step in combo]
                configs.append(TreeConfig.from_lists(spec, gamma_threshold=threshold))
            except ConfigError as exc:
                if len(combos) == 1:
                    raise SweepError(f"grid item {item!r}: {exc}") from None
                skipped.append(f"{','.join(combo)}{f'@{threshold:g}' if threshold else ''}: {exc}")
    return dedupe(configs), skipped


def _split_thresholds(item: str) -> tuple[str, list[float]]:
    """The item's tree part and its gammaThreshold alternatives ([0.0] without '@')."""
    if "@" not in item:
        return item, [0.0]
    body, _, text = item.partition("@")
    values = []
    for thr in text.split("|"):
        try:
            values.append(float(thr))
        except ValueError:
            raise SweepError(f"grid item {item!r}: gammaThreshold {thr!r} is not a number") from None
    return body, values


def _width(text: str, item: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise SweepError(f"grid item {item!r}: width {text!r} is not an integer") from None


def load_config_list(path: str | Path) -> list[TreeConfig]:
    """A JSON file holding a list of tree configs (or one config, or a ``specTree`` object)."""
    path = Path(path)
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SweepError(f"{path}: cannot read a JSON config list: {exc}") from None
    items = obj if isinstance(obj, list) else [obj]
    configs = [t for i, o in enumerate(items) for t in parse_config(o, f"{path}[{i}]").trees]
    if not configs:
        raise SweepError(f"{path}: the config list is empty")
    return dedupe(configs)


def dedupe(configs: list[TreeConfig]) -> list[TreeConfig]:
    seen: set[str] = set()
    out = []
    for c in configs:
        if config_name(c) not in seen:
            seen.add(config_name(c))
            out.append(c)
    return out


def config_name(config: TreeConfig) -> str:
    """A file-name-safe identity of a tree shape, e.g. ``6_2x2_1x1`` (``_t0.2`` / ``_dyn`` suffixes)."""
    name = "_".join("x".join(str(w) for w in row) for row in config.top_k_spec)
    if config.gamma_threshold > 0:
        name += f"_t{config.gamma_threshold:g}"
    if config.tree_type != 0:
        name += "_dyn"
    return name
