"""Tree configurations: the article's single-tree JSON and the engine's ``specTree`` list form.

Unknown keys are kept (``extra``) and shown; inconsistent shapes are rejected with the field and
the values named.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from replay.util.bounded import MAX_JSON_BYTES, parse_json_bytes, read_file_bytes
from replay.util.errors import ConfigError
from replay.util.words import counted, value_words

TREE_STATIC = 0
TREE_DYNAMIC = 1
TREE_TYPES = {TREE_STATIC: "static", TREE_DYNAMIC: "dynamic"}

# Engine defaults (HiAI LLM Engine test-case JSON), used when a key is absent.
DEFAULT_GAMMA = 3
DEFAULT_TREE_TYPE = TREE_STATIC
DEFAULT_GAMMA_THRESHOLD = 0.0

_TREE_KEYS = ("gamma", "topKSpec", "topHead", "treeType", "gammaThreshold")
# Run-level keys the engine knows; everything else is kept as unknown and reported.
KNOWN_RUN_KEYS = (
    "specTree",
    "gammaStrategy",
    "emaWindow",
    "typicalScaling",
    "sampleGreedy",
    "rejectScaling",
    "draftThreshold",
    "temperature",
    "topK",
    "topP",
    "sampleFlag",
    "seed",
    "maxGenTokens",
)


@dataclass(frozen=True)
class TreeConfig:
    """One tree shape. ``top_k_spec[i][j]``: children kept by the j-th node expanded at step i."""

    gamma: int
    top_k_spec: tuple[tuple[int, ...], ...]
    top_head: tuple[int, ...]
    tree_type: int = DEFAULT_TREE_TYPE
    gamma_threshold: float = DEFAULT_GAMMA_THRESHOLD
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        check_tree(self)

    @classmethod
    def from_lists(
        cls,
        top_k_spec: Sequence[Sequence[int]],
        top_head: Sequence[int] | None = None,
        tree_type: int = DEFAULT_TREE_TYPE,
        gamma_threshold: float = DEFAULT_GAMMA_THRESHOLD,
    ) -> TreeConfig:
        """Build from plain lists; ``top_head`` defaults to ``len(top_k_spec[i])`` per step."""
        spec = tuple(tuple(int(w) for w in row) for row in top_k_spec)
        head = tuple(int(h) for h in top_head) if top_head is not None else tuple(len(r) for r in spec)
        return cls(len(spec), spec, head, tree_type, float(gamma_threshold))

    @property
    def level_sizes(self) -> tuple[int, ...]:
        """Nodes per level 1..gamma (the root, level 0, is not counted)."""
        return tuple(sum(row) for row in self.top_k_spec)

    @property
    def num_nodes(self) -> int:
        """Draft nodes in the full tree, root excluded (12 for the article's config)."""
        return sum(self.level_sizes)

    def all_rows_of_deeper_trees(self, steps: int) -> tuple[int, ...]:
        """Rows of an all-layout validate (root + nodes) for this static tree drafted to more than
        ``steps`` steps. A round with ``steps`` draft files whose validate has exactly one of these
        counts lost its last draft step(s): an early stop has no rows for steps it never drafted."""
        if self.tree_type == TREE_DYNAMIC:
            return ()  # a dynamic tree's levels vary by round: row counts prove nothing
        return tuple(1 + sum(self.level_sizes[:s]) for s in range(steps + 1, self.gamma + 1))

    @property
    def num_expanded(self) -> int:
        """Nodes the draft runs on (= rows of a ``parents``-layout validate matrix)."""
        return sum(self.top_head)

    @property
    def max_width(self) -> int:
        return max(max(row) for row in self.top_k_spec)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "gamma": self.gamma,
            "topKSpec": [list(r) for r in self.top_k_spec],
            "topHead": list(self.top_head),
            "treeType": self.tree_type,
            "gammaThreshold": self.gamma_threshold,
        }
        out.update(self.extra)
        return out

    def short(self) -> str:
        """The canonical one-line form every command prints, e.g. ``[6]|[2,2]|[1,1]`` (replay.core.config_grammar)."""
        return format_config(self)


# Printing: the forms replay.core.config_grammar parses back (docs/config-grammar.md).


def _suffix(config: TreeConfig, threshold: str, dynamic: str) -> str:
    out = f"{threshold}{config.gamma_threshold:g}" if config.gamma_threshold > 0 else ""
    return out + (dynamic if config.tree_type == TREE_DYNAMIC else "")


def format_config(config: TreeConfig) -> str:
    """The canonical one-line form every command prints, e.g. ``[6]|[2,2]|[1,1]`` (``@0.2``, ``+dyn``)."""
    body = "|".join("[" + ",".join(str(w) for w in row) + "]" for row in config.top_k_spec)
    return body + _suffix(config, "@", "+dyn")


def distinct_configs(configs: Iterable[TreeConfig]) -> list[TreeConfig]:
    """Configs in order, each once: two configs are the same when they print the same."""
    seen: dict[str, TreeConfig] = {}
    for c in configs:
        seen.setdefault(format_config(c), c)
    return list(seen.values())


def grid_item(config: TreeConfig) -> str:
    """The grid form, e.g. ``6,2x2,1x1``: no brackets or '|', so it needs no shell quoting."""
    return ",".join("x".join(str(w) for w in row) for row in config.top_k_spec) + _suffix(config, "@", "+dyn")


def run_name(config: TreeConfig) -> str:
    """The file-name-safe form a sweep names a config's directory with, e.g. ``6_2x2_1x1`` (``_t0.2``, ``_dyn``)."""
    return "_".join("x".join(str(w) for w in row) for row in config.top_k_spec) + _suffix(config, "_t", "_dyn")


@dataclass(frozen=True)
class SpecConfig:
    """A whole config file: one or more trees plus run-level settings (kept, never dropped)."""

    trees: tuple[TreeConfig, ...]
    settings: Mapping[str, Any] = field(default_factory=dict)  # known run-level keys
    unknown: Mapping[str, Any] = field(default_factory=dict)  # anything else, shown to the user
    source: str | None = None
    # How messages name each tree when there are several: specTree[i] unless given (a JSON list of
    # tree objects: [i], its own unknown keys then in the tree's extra).
    tree_names: tuple[str, ...] | None = None

    @property
    def tree(self) -> TreeConfig:
        return self.trees[0]

    def to_json(self) -> dict[str, Any]:
        if len(self.trees) == 1 and "specTree" not in self.settings and not self.settings:
            out = self.trees[0].to_json()
        else:
            out = {"specTree": [t.to_json() for t in self.trees]}
            out.update({k: v for k, v in self.settings.items() if k != "specTree"})
        out.update(self.unknown)
        return out


def _int(value: Any, source: str | None, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(source, name, f"expected an integer, got {value_words(value)}")
    return value


def _int_list(value: Any, source: str | None, name: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise ConfigError(source, name, f"expected a list of integers, got {value_words(value)}")
    return tuple(_int(v, source, f"{name}[{i}]") for i, v in enumerate(value))


def check_tree(tree: TreeConfig, source: str | None = None, prefix: str = "") -> None:
    """Reject shapes the engine could not build; every message names the field and the values.

    ``prefix`` locates the tree inside a file (``specTree[1].``).
    """
    g = tree.gamma
    if g < 1:
        raise ConfigError(source, prefix + "gamma", f"must be at least 1, got {g}")
    # topKSpec first: a user always writes it, while topHead may be derived from it (one per width)
    if len(tree.top_k_spec) != g:
        raise ConfigError(
            source,
            prefix + "topKSpec",
            f"has {counted(len(tree.top_k_spec), 'row')} but gamma = {g}: gamma is the number of draft steps, one topKSpec row each",
        )
    if len(tree.top_head) != g:
        raise ConfigError(
            source,
            prefix + "topHead",
            f"has {counted(len(tree.top_head), 'entry', 'entries')} {list(tree.top_head)} but gamma = {g}",
        )
    if tree.top_head[0] != 1:
        raise ConfigError(
            source, prefix + "topHead[0]", f"must be 1 (only the root is expanded at step 0), got {tree.top_head[0]}"
        )
    level = 1  # level 0 holds the root alone
    for i in range(g):
        heads, widths = tree.top_head[i], tree.top_k_spec[i]
        if heads < 1:
            raise ConfigError(source, prefix + f"topHead[{i}]", f"must be at least 1, got {heads}")
        if heads > level:
            raise ConfigError(
                source,
                prefix + f"topHead[{i}]",
                f"= {heads} parents but level {i} has only {level} node(s)"
                + (f" (topKSpec[{i - 1}] = {list(tree.top_k_spec[i - 1])})" if i else ""),
            )
        if len(widths) != heads:
            raise ConfigError(
                source, prefix + f"topKSpec[{i}]", f"has {len(widths)} widths {list(widths)} but topHead[{i}] = {heads}"
            )
        for j, w in enumerate(widths):
            if w < 1:
                raise ConfigError(source, prefix + f"topKSpec[{i}][{j}]", f"must be at least 1, got {w}")
        level = sum(widths)
    if tree.tree_type not in TREE_TYPES:
        raise ConfigError(source, prefix + "treeType", f"must be 0 (static) or 1 (dynamic), got {tree.tree_type}")
    problem = gamma_threshold_problem(tree.gamma_threshold)
    if problem:
        raise ConfigError(source, prefix + "gammaThreshold", problem)


def gamma_threshold_problem(t: Any) -> str | None:
    """What is wrong with a gammaThreshold value (a config's or --gamma-threshold's), None when nothing."""
    if isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and 0.0 <= t <= 1.0:
        return None
    return f"must be a number in [0, 1], got {value_words(t)}"


def _flat_spec_message(flat: list[int], heads: Any) -> str:
    """topKSpec written as one flat list of widths: what it should look like, from topHead when it fits."""
    text = (
        f"expected one list of widths per draft step, e.g. [[6], [2, 2], [1, 1]], got the flat list {_short_list(flat)}"
    )
    if (
        isinstance(heads, list)
        and heads
        and all(isinstance(h, int) and not isinstance(h, bool) and h > 0 for h in heads)
        and sum(heads) == len(flat)
    ):
        rows, at = [], 0
        for h in heads:
            rows.append(flat[at : at + h])
            at += h
        text += f"; with topHead {heads} that is {rows}"
    return text


def _short_list(values: list[Any]) -> str:
    text = repr(values)
    return text if len(text) <= 80 else text[:77] + "..."


def parse_tree(obj: Mapping[str, Any], source: str | None = None, where: str = "") -> TreeConfig:
    """One tree object (keys ``gamma``, ``topKSpec``, ``topHead``, ``treeType``, ``gammaThreshold``);
    an error names the misspelt keys that may have caused it (_hinted)."""
    if not isinstance(obj, Mapping):
        raise ConfigError(source, where or "tree", f"expected a JSON object, got {value_words(obj)}")
    try:
        return _parse_tree(obj, source, where)
    except ConfigError as exc:
        raise _hinted(exc, obj) from None


def _parse_tree(obj: Mapping[str, Any], source: str | None, where: str) -> TreeConfig:
    p = where
    if "topKSpec" not in obj:
        raise ConfigError(source, p + "topKSpec", "is missing")
    raw_spec = obj["topKSpec"]
    if not isinstance(raw_spec, list) or not raw_spec:
        raise ConfigError(source, p + "topKSpec", f"expected a non-empty list of lists, got {value_words(raw_spec)}")
    if all(isinstance(v, int) and not isinstance(v, bool) for v in raw_spec):
        raise ConfigError(source, p + "topKSpec", _flat_spec_message(raw_spec, obj.get("topHead")))
    spec = tuple(_int_list(row, source, f"{p}topKSpec[{i}]") for i, row in enumerate(raw_spec))
    gamma = _int(obj.get("gamma", DEFAULT_GAMMA), source, p + "gamma")
    if "topHead" in obj:
        head = _int_list(obj["topHead"], source, p + "topHead")
    else:
        head = tuple(len(r) for r in spec)
    tree_type = _int(obj.get("treeType", DEFAULT_TREE_TYPE), source, p + "treeType")
    thr = obj.get("gammaThreshold", DEFAULT_GAMMA_THRESHOLD)
    if isinstance(thr, bool) or not isinstance(thr, (int, float)) or (isinstance(thr, int) and not 0 <= thr <= 1):
        raise ConfigError(source, p + "gammaThreshold", f"expected a number in [0, 1], got {value_words(thr)}")
    extra = {k: v for k, v in obj.items() if k not in _TREE_KEYS}
    # Build without __post_init__'s source-less check so messages carry the file and prefix.
    tree = object.__new__(TreeConfig)
    for name, value in (
        ("gamma", gamma),
        ("top_k_spec", spec),
        ("top_head", head),
        ("tree_type", tree_type),
        ("gamma_threshold", float(thr)),
        ("extra", extra),
    ):
        object.__setattr__(tree, name, value)
    check_tree(tree, source, p)
    return tree


_KNOWN_KEYS = (*_TREE_KEYS, *KNOWN_RUN_KEYS)


def _folded(key: str) -> str:
    return key.lower().replace("_", "").replace("-", "")


# A ratio that joins one dropped, doubled or swapped letter (gama, tretype, topHaed: 0.86 to 0.93) but
# not a shorter word that only shares a part (type for treeType: 0.67).
_NEAR_MISS_CUTOFF = 0.85


@lru_cache(maxsize=8)
def _folded_keys(known: tuple[str, ...]) -> dict[str, str]:
    return {_folded(k): k for k in known}


def near_miss(key: Any, known: Sequence[str] = _KNOWN_KEYS) -> str | None:
    """The known key an unknown ``key`` is probably meant to be, or None: the same key but for case,
    '_' and '-' (top_head, TOPHEAD), else one a letter or two away (gama, tretype). ``known``: a
    config's keys (tree or run level), or another JSON object's (manifest.json's, replay.io.manifest).
    The one rule of what counts as a misspelling, for the warnings and for the hint of a hard error."""
    if not isinstance(key, str) or key in known:
        return None
    folded_keys = _folded_keys(tuple(known))
    folded = _folded(key)
    if folded in folded_keys:
        return folded_keys[folded]
    close = difflib.get_close_matches(folded, list(folded_keys), n=1, cutoff=_NEAR_MISS_CUTOFF)
    return folded_keys[close[0]] if close else None


def misspelling_warning(where: str, pairs: Sequence[tuple[str, str]], consequence: str) -> tuple[str, ...]:
    """The one stderr line about keys not read but spelt like ones that are ((key, meant) pairs), or nothing."""
    if not pairs:
        return ()
    named = "; ".join(f"{key!r}: did you mean {guess!r}?" for key, guess in pairs)
    return (f"WARNING: {where}: key(s) not read, spelt like ones that are ({named}); {consequence}",)


def _hinted(error: ConfigError, obj: Mapping[str, Any]) -> ConfigError:
    """``error`` with the keys of ``obj`` named that stand for an absent key the error is about: a
    required key reported missing, or a default that broke the tree (gamma = 3 for 2 rows), is most
    often a misspelling of it. A misspelling of another key is left to the warning (config_key_warnings)."""
    about = set(re.findall(r"[A-Za-z]+", f"{error.field} {error.message}"))
    if "topKSpec" in about:
        about.add("specTree")  # a misspelt specTree leaves a tree object without topKSpec
    pairs = [(k, g) for k in obj if (g := near_miss(k)) in about and g not in obj]
    if not pairs:
        return error
    named = "; ".join(f"found {k!r}: did you mean {g!r}?" for k, g in pairs)
    return ConfigError(error.source, error.field, f"{error.message} ({named})")


def misspelt_keys(config: SpecConfig) -> list[tuple[str, str]]:
    """(unknown key, the known key it is probably meant to be: near_miss): a key kept as unknown but
    spelt like a key the replay reads (topHaed, gammathreshold, top_head). The key it stands for took
    its default, so the replay may not be of the tree the file meant."""
    names = config.tree_names or tuple(f"specTree[{i}]" for i in range(len(config.trees)))
    named = [(k, k) for k in config.unknown] + [
        (f"{names[i]}.{k}" if len(config.trees) > 1 else k, k) for i, t in enumerate(config.trees) for k in t.extra
    ]
    return [(shown, guess) for shown, key in named if (guess := near_miss(key)) is not None]


def config_key_warnings(config: SpecConfig, where: str | None = None) -> tuple[str, ...]:
    """The stderr line of misspelt_keys, or nothing; ``where`` names a config without a file (the option)."""
    return misspelling_warning(
        config.source or where or "the config",
        misspelt_keys(config),
        "each key they stand for took its default, so the tree used may not be the one meant",
    )


def parse_config(obj: Any, source: str | None = None) -> SpecConfig:
    """Accept a single tree object, or ``{"specTree": [tree, ...], <run-level keys>}``."""
    if not isinstance(obj, Mapping):
        raise ConfigError(source, "<top level>", f"expected a JSON object, got {type(obj).__name__}")
    if "specTree" in obj:
        raw = obj["specTree"]
        if not isinstance(raw, list) or not raw:
            raise ConfigError(source, "specTree", f"expected a non-empty list of tree objects, got {value_words(raw)}")
        trees = tuple(parse_tree(t, source, f"specTree[{i}].") for i, t in enumerate(raw))
        settings = {k: v for k, v in obj.items() if k in KNOWN_RUN_KEYS and k != "specTree"}
        unknown = {k: v for k, v in obj.items() if k not in KNOWN_RUN_KEYS and k not in _TREE_KEYS}
        return SpecConfig(trees, settings, unknown, source)
    try:
        tree = _parse_tree({k: v for k, v in obj.items() if k in _TREE_KEYS}, source, "")
    except ConfigError as exc:
        raise _hinted(exc, obj) from None
    settings = {k: v for k, v in obj.items() if k in KNOWN_RUN_KEYS}
    unknown = {k: v for k, v in obj.items() if k not in KNOWN_RUN_KEYS and k not in _TREE_KEYS}
    return SpecConfig((tree,), settings, unknown, source)


def load_config(path: str | Path, allow_stream: bool = True) -> SpecConfig:
    """Read a config JSON file (size and nesting bounded, see replay.util.bounded).

    allow_stream: also read a pipe (``--config <(...)``); a config.json inside a dump directory
    is read with False, like every dump file.
    """
    path = Path(path)
    data = read_file_bytes(path, MAX_JSON_BYTES, lambda message: ConfigError(path, None, message), allow_stream)
    obj = parse_json_bytes(data, lambda message: ConfigError(path, None, message))
    return parse_config(obj, str(path))
