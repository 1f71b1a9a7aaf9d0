"""Sweep specifications (``sweep --grid`` / ``--configs``), read through the one config grammar
(replay.core.config_grammar; the list form: docs/config-grammar.md, "A list of configs: --grid").
"""

from __future__ import annotations

from pathlib import Path

from replay.core.config import TreeConfig, distinct_configs, grid_item  # noqa: F401  grid_item: parse_grid's inverse, kept importable here
from replay.core.config_grammar import ConfigTextError, parse_config_list, parse_configs, run_name
from replay.live.errors import SweepError


def parse_grid(text: str, notes: list[str] | None = None) -> tuple[list[TreeConfig], list[str]]:
    """Configs in order (duplicates dropped) and the skipped alternative combinations, as text;
    notes: the misspelt keys' warning (replay.core.config_grammar.parse_configs)."""
    try:
        return parse_config_list(text, "--grid", notes)
    except ConfigTextError as exc:
        raise SweepError(str(exc)) from None


def load_config_list(path: str | Path, notes: list[str] | None = None) -> list[TreeConfig]:
    """``--configs``: a JSON file holding a list of tree configs (or one config, or a ``specTree``
    object); any other config form is read too. notes: as parse_grid's."""
    try:
        return distinct_configs(parse_configs(str(path), "--configs", notes))
    except ConfigTextError as exc:
        raise SweepError(str(exc)) from None


def config_name(config: TreeConfig) -> str:
    """A file-name-safe identity of a tree shape, e.g. ``6_2x2_1x1`` (``_t0.2`` / ``_dyn`` suffixes)."""
    return run_name(config)


__all__ = ["config_name", "grid_item", "load_config_list", "parse_grid"]
