"""Read the optional ``manifest.json`` of a dump directory (our harness always writes one)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from replay.core.config import SpecConfig, misspelling_warning, near_miss, parse_config
from replay.core.vocab import LAYOUTS
from replay.util.bounded import read_json_file
from replay.util.errors import DumpError
from replay.util.words import counted, round_name, value_words

from .dumpnames import Key, fits_int64
from .dumpwrite import MANIFEST_NAME
from .formats.matrix_io import (
    ID_KINDS,
    MAX_NODE_LOGPROB_COLUMNS,
    SCORE_AUTO,
    SCORE_KINDS,
    RawSpec,
    check_raw_columns,
    raw_dtype,
)
from .grouping import Grouping, group_directory
from .skipped import Skipped, round_entry


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
    # The target's vocabulary size (sampling-mode bounds need it above T = 1) and the temperatures of
    # the validate files' node_logprobs columns (docs/dump-format.md "Node log-probabilities").
    vocab_size: int | None = None
    node_logprob_temperatures: tuple[float, ...] | None = None
    # The temperature the run sampled at (0: greedy), as the harness records it.
    temperature: float | None = None


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
    columns = check_raw_columns(cols, lambda m: _field(path, "encoding.columns", m))
    dtype = enc.get("dtype", "int32")
    score_dtype = enc.get("score_dtype", "float32")
    raw_dtype(dtype, ID_KINDS, lambda m: _field(path, "encoding.dtype", m))
    raw_dtype(score_dtype, SCORE_KINDS, lambda m: _field(path, "encoding.score_dtype", m))
    return RawSpec(dtype, columns, score_dtype, bool(enc.get("force", True)))


def _rounds(path: Path, records: Any) -> tuple[dict[Key, int], int | None, tuple[Key, ...] | None]:
    """(root tokens, stated round count, listed keys) of the manifest's ``rounds`` field.

    ``rounds`` is a list of round records (our harness) or just a count.
    """
    if records is None:
        return {}, None, None
    if _is_int(records) and records >= 0:
        return {}, records, None
    if not isinstance(records, list):
        raise _field(path, "rounds", f"expected a list of round records or a round count, got {_short(records)}")
    roots: dict[Key, int] = {}
    keys: list[Key] = []
    for k, rec in enumerate(records):
        key = rec.get("key") if isinstance(rec, dict) else None
        if not (isinstance(key, list) and len(key) == 2 and all(_is_int(v) and fits_int64(v) for v in key)):
            raise _field(
                path,
                f"rounds[{k}].key",
                f"expected [a, b] (two integers), got {_short(key if isinstance(rec, dict) else rec)}",
            )
        keys.append((key[0], key[1]))
        root = rec.get("root_token")
        if root is None:
            continue
        if not (_is_int(root) and fits_int64(root)):
            raise _field(path, f"rounds[{k}].root_token", f"expected an integer token id, got {_short(root)}")
        given = roots.setdefault((key[0], key[1]), root)
        if given != root:  # which record is right is unknowable; a repeat that agrees is only listed
            raise _field(
                path,
                f"rounds[{k}].root_token",
                f"round {round_name(keys[-1])} is listed earlier with root_token {given}; expected one root token per round, got {root}",
            )
    return roots, len(keys), tuple(keys)


def _vocab_size(path: Path, value: Any) -> int | None:
    if value is None:
        return None
    if not (_is_int(value) and value >= 1):
        raise _field(
            path, "vocab_size", f"expected a positive integer (the target's vocabulary size), got {_short(value)}"
        )
    return int(value)


def _temperature(path: Path, value: Any) -> float | None:
    if value is None:
        return None
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0):
        raise _field(
            path,
            "temperature",
            f"expected a finite number >= 0 (the run's sampling temperature, 0 = greedy), got {_short(value)}",
        )
    return float(value)


def _node_temperatures(path: Path, value: Any) -> tuple[float, ...] | None:
    if value is None:
        return None
    ok = isinstance(value, list) and 1 <= len(value) <= MAX_NODE_LOGPROB_COLUMNS
    ok = ok and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0 for v in value
    )
    if not ok:
        raise _field(
            path,
            "node_logprob_temperatures",
            f"expected a list of 1..{MAX_NODE_LOGPROB_COLUMNS} finite numbers >= 0 (one per node_logprobs column), "
            f"got {_short(value)}",
        )
    return tuple(float(v) for v in value)


def _short(value: Any) -> str:
    return value_words(value)


def read_manifest(directory: str | Path) -> Manifest:
    """The manifest of ``directory``, or an empty Manifest when there is none.

    An entry called manifest.json that is not a regular file (a directory, a FIFO) is an error,
    never opened and never ignored. Size and nesting are bounded (replay.util.bounded).
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
    roots, stated, keys = _rounds(path, body.get("rounds"))
    vocab = _vocab_size(path, body.get("vocab_size"))
    temps = _node_temperatures(path, body.get("node_logprob_temperatures"))
    t = _temperature(path, body.get("temperature"))
    return Manifest(str(path), config, layout, score_kind, offset, raw, roots, body, stated, keys, vocab, temps, t)


# The top-level keys a reader takes from manifest.json (docs/dump-format.md "manifest.json"), and the
# ones the harness writes beside them for the record (replay/live/dumps.py run_manifest, run.py).
MANIFEST_KEYS = (
    "format",
    "version",
    "config",
    "layout",
    "score_kind",
    "step0_offset",
    "encoding",
    "rounds",
    "totals",
    "vocab_size",
    "node_logprob_temperatures",
    "temperature",
)
HARNESS_KEYS = (
    "score_temperature",
    "key_rule",
    "seed_rule",
    "models",
    "sequences",
    "tokenizer",
    "dtype",
    "device",
    "seed",
    "max_new_tokens",
    "sweep",
)


def manifest_key_warnings(manifest: Manifest) -> tuple[str, ...]:
    """The stderr line about top-level keys of manifest.json spelt like a key a reader takes
    (vocabsize, lay_out, Step0_Offset: replay.core.config.near_miss, the rule config keys follow):
    the key meant took its default. Other unknown keys stay quiet: engines add their own."""
    body = manifest.body or {}
    pairs = [
        (key, guess)
        for key in body
        if (guess := near_miss(key, (*MANIFEST_KEYS, *HARNESS_KEYS))) in MANIFEST_KEYS and guess not in body
    ]
    return misspelling_warning(
        manifest.path or MANIFEST_NAME, pairs, "each key they stand for was read as absent (its default)"
    )


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
            extra.append(
                Skipped(
                    MANIFEST_NAME, f"states {manifest.stated_rounds} round(s); the file names form {len(found)}", where
                )
            )
    else:
        extra.extend(_repeated_keys(manifest.round_keys, where))
        listed = set(manifest.round_keys)
        for key in sorted(listed - found):
            extra.append(
                Skipped(
                    round_entry(round_name(key)),
                    f"listed in {MANIFEST_NAME} but no file of this round is in the directory",
                    where,
                )
            )
        unlisted = sorted(found - listed)
        if unlisted:
            named = ", ".join(round_name(key) for key in unlisted[:MAX_KEYS_NAMED])
            more = f" and {len(unlisted) - MAX_KEYS_NAMED} more" if len(unlisted) > MAX_KEYS_NAMED else ""
            extra.append(
                Skipped(
                    MANIFEST_NAME,
                    f"does not list {counted(len(unlisted), 'round')} found here: {named}{more} "
                    f"(it lists {len(listed)}; replayed anyway where complete; are two runs in one directory?)",
                    where,
                )
            )
    if not extra:
        return grouping
    return replace(grouping, skipped=grouping.skipped + tuple(extra))


def _repeated_keys(keys: Sequence[Key], where: tuple[str, ...]) -> list[Skipped]:
    """One entry naming the keys that the ``rounds`` list gives more than one record, with where
    (a count stated twice over the same files is as wrong as a count the file names do not reach)."""
    places: dict[Key, list[int]] = {}
    for k, key in enumerate(keys):
        places.setdefault(key, []).append(k)
    repeated = [(key, at) for key, at in places.items() if len(at) > 1]
    if not repeated:
        return []
    named = "; ".join(
        f"{round_name(key)} (" + ", ".join(f"rounds[{k}].key" for k in at) + ")"
        for key, at in repeated[:MAX_KEYS_NAMED]
    )
    more = f"; and {len(repeated) - MAX_KEYS_NAMED} more" if len(repeated) > MAX_KEYS_NAMED else ""
    which = "a round" if len(repeated) == 1 else f"{len(repeated)} rounds"
    return [Skipped(MANIFEST_NAME, f"rounds lists {which} more than once: {named}{more}", where)]


def group_rounds(
    directory: str | Path, asked: tuple[int, int] | None, manifest: Manifest, gamma: int | None = None
) -> Grouping:
    """The rounds of a dump directory, as every reader gets them (replay, batch, analysis, pack).

    The step-0 offset is ``asked`` (--step0-offset), else the manifest's ``step0_offset``, else
    the default or the offset the names show (replay.io.step0.Step0Check); then the files are
    checked against the manifest's rounds (check_manifest_rounds). ``grouping.step0_offset`` is
    the offset the readers must use to name the files again. gamma: the replayed config's draft
    steps, where known (replay.io.grouping.group_directory).
    """
    if asked is not None:
        grouping = group_directory(directory, asked, "--step0-offset", gamma)
    elif manifest.step0_offset is not None:
        grouping = group_directory(directory, manifest.step0_offset, f"{MANIFEST_NAME} step0_offset", gamma)
    else:
        grouping = group_directory(directory, gamma=gamma)
    return check_manifest_rounds(grouping, manifest)


# What the harness records per round (replay/live/dumps.py round_entry) beside what the replay of the
# round's files gives: (manifest field, words).
RECORDED_OUTCOMES = (
    ("num_nodes", "draft nodes"),
    ("draft_steps", "draft steps"),
    ("accepted_length", "accepted length"),
)
ROUNDS_NAMED = 3  # rounds quoted in a line about the manifest's round records; the rest are counted


def checks_recorded_rounds(manifest: Manifest, tree: Any) -> bool:
    """Whether a replay with ``tree`` must give each round what the manifest's round records give it:
    ``tree`` is the manifest's own config (another --config gives other shapes by design)."""
    return manifest.config is not None and manifest.config.tree == tree


def named_rounds(names: Sequence[str], separator: str) -> str:
    """The first ROUNDS_NAMED of ``names`` joined by ``separator``, then how many more."""
    more = f"{separator}{len(names) - ROUNDS_NAMED} more" if len(names) > ROUNDS_NAMED else ""
    return separator.join(names[:ROUNDS_NAMED]) + more


def recorded_round_warnings(manifest: Manifest, tree: Any, keys: Any, outcomes: Mapping[str, Any]) -> tuple[str, ...]:
    """ "This number is probably wrong" lines: rounds whose replay disagrees with what the directory's
    manifest.json records for them (shape: nodes and draft steps; and, at temperature 0, the accepted
    length, which the greedy replay must reproduce). Only when the run is replayed with the
    manifest's own config (another --config gives other shapes by design). The file names against
    the manifest's round list are checked when reading (check_manifest_rounds).

    tree: the TreeConfig replayed; keys: [2, R] round keys of the replayed rounds; outcomes: the
    replayed values per manifest field of RECORDED_OUTCOMES ([R] each). Every command that replays
    a directory says it (replay.engine.runs.replay_run).
    """
    records = (manifest.body or {}).get("rounds")
    if not isinstance(records, list) or not checks_recorded_rounds(manifest, tree):
        return ()
    greedy = manifest.temperature == 0
    fields = [f for f in RECORDED_OUTCOMES if greedy or f[0] != "accepted_length"]
    by_key = {tuple(r["key"]): r for r in records if isinstance(r, dict) and isinstance(r.get("key"), list)}
    columns = [[int(v) for v in outcomes[name]] for name, _ in fields]
    differ: list[str] = []
    n = 0
    for i, (a, b) in enumerate(zip(*(list(map(int, k)) for k in keys))):
        rec = by_key.get((a, b))
        if rec is None:
            continue
        n += 1
        bad = [
            f"{words} {col[i]} replayed, {rec[name]!r} recorded ({name})"
            for (name, words), col in zip(fields, columns)
            if name in rec and rec[name] != col[i]
        ]
        if bad:
            differ.append(f"round {round_name((a, b))}: " + ", ".join(bad))
    if not differ:
        return ()
    return (
        f"WARNING: {len(differ)} of {n} round(s) replay differently from what {manifest.path or 'manifest.json'} "
        f"records ({named_rounds(differ, '; ')}); the numbers from this dump are probably wrong: are the files "
        "from another run, or is --layout or --step0-offset wrong?",
    )
