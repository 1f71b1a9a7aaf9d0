"""The one per-round record: its columns, how a replayed round becomes one, how it is written and read.

Every per-round output uses these columns with these meanings (docs/output-schema.md):
``replay --json`` and ``batch --json`` (JSON Lines), ``batch -o FILE.parquet|.csv``, the analysis
round table (``stats --table rounds``, ``report``'s rounds.parquet, ``replay.cli.api.rounds_table``;
it adds analysis columns after these). Lists stay lists in JSON and Parquet; CSV holds them as
text (ids separated by spaces, notes by `` | ``) and ``CSV_CONVERTERS`` reads them back.
Whatever the file, ``normalize_frame`` gives the same frame: lists as Python lists, nullable ids
as pandas ``Int64``, a missing bonus kind as None.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import IO

from replay.util.atomic import atomic_path

from .vocab import PAD_TOKEN

NOTE_SEPARATOR = " | "  # CSV text of the notes list (a note never contains it)


@dataclass(frozen=True)
class RoundRecord:
    """One replayed round (bonus excluded from accepted_length; see docs/vocabulary.md)."""

    round: str  # key a_b: the validate file's numbers
    key_a: int
    key_b: int
    root_token: int | None  # the last committed token before the round; None when unknown
    num_steps: int  # draft steps run this round (fewer than gamma after an early stop)
    num_nodes: int  # draft nodes, root excluded
    shape: str  # widths per step actually present, short form "[6]|[2,2]|[1,1]" (topHead = lengths)
    layout: str  # validate layout: parents or all
    layout_source: str  # stated or detected
    selection: str  # how expanded nodes were chosen (path_probability, parents, rank_major_fallback, root)
    accepted_length: int  # draft tokens accepted, bonus excluded
    accepted_tokens: tuple[int, ...]  # their token ids, root side first
    accepted_nodes: tuple[int, ...]  # their tree-order node ids
    bonus_token: int | None  # target's top-1 at the last accepted node; None when not in the dump
    bonus_kind: str | None  # correction or leaf_bonus; None when the bonus is unknown
    stop: str  # why the walk stopped: leaf, mismatch, no_target_row
    committed_tokens: tuple[int, ...]  # accepted tokens, then the bonus token when known
    num_committed: int  # len(committed_tokens) = accepted_length + (bonus known)
    notes: tuple[str, ...]  # replay notes (fallbacks, disagreements)

    def to_json(self) -> dict:
        return {name: list(v) if name in LIST_COLUMNS else v for name, v in ((n, getattr(self, n)) for n in COLUMNS)}


COLUMNS = tuple(f.name for f in fields(RoundRecord))
COLUMN_MEANINGS = {
    "round": "round key a_b (the validate file's numbers)",
    "key_a": "first position counter",
    "key_b": "second position counter",
    "root_token": "the last committed token before the round (null/NA when unknown)",
    "num_steps": "draft steps run this round (fewer than gamma after an early stop)",
    "num_nodes": "draft nodes in this round's tree, root excluded",
    "shape": "kept widths per draft step actually present, short form [6]|[2,2]|[1,1] (topHead = their lengths)",
    "layout": "validate layout: parents or all",
    "layout_source": "stated (manifest/--layout) or detected (from the validate's row count)",
    "selection": "how expanded nodes were chosen (path_probability, parents, rank_major_fallback; root for one step)",
    "accepted_length": "draft tokens accepted (bonus excluded)",
    "accepted_tokens": "accepted token ids, root side first (list; CSV: ids separated by spaces)",
    "accepted_nodes": "tree-order ids of the accepted nodes (list; CSV: separated by spaces)",
    "bonus_token": "the target's top-1 at the last accepted node (null/NA when the dump has no row for it)",
    "bonus_kind": "correction or leaf_bonus (null/None when the bonus is unknown; CSV: empty)",
    "stop": "why the walk stopped: leaf, mismatch, no_target_row",
    "committed_tokens": "accepted tokens, then the bonus token when known (list; CSV: separated by spaces)",
    "num_committed": "committed tokens this round = accepted_length + 1 when the bonus is known",
    "notes": "replay notes: fallbacks, disagreements (list; CSV: joined by ' | ')",
}
LIST_COLUMNS = ("accepted_tokens", "accepted_nodes", "committed_tokens", "notes")
INT_LIST_COLUMNS = ("accepted_tokens", "accepted_nodes", "committed_tokens")
NULLABLE_INT_COLUMNS = ("root_token", "bonus_token")


def shape_text(widths: Sequence[Sequence[int]]) -> str:
    """Short form of a round's shape, as TreeConfig.short(): ``[6]|[2,2]|[1,1]``."""
    return "|".join("[" + ",".join(str(int(w)) for w in row) + "]" for row in widths)


def record_of(res) -> RoundRecord:
    """The record of one scalar replay (replay.engine.replayer.RoundResult)."""
    a, tree = res.acceptance, res.tree
    _, widths = tree.shape()
    root = int(tree.tokens[0])
    return RoundRecord(
        res.name,
        int(res.key[0]),
        int(res.key[1]),
        None if root == PAD_TOKEN else root,
        tree.num_steps,
        tree.num_nodes,
        shape_text(widths),
        res.layout,
        res.layout_source,
        res.rebuilt.selection_summary,
        a.accepted_length,
        tuple(int(t) for t in a.accepted_tokens),
        tuple(int(u) for u in a.accepted_nodes),
        a.bonus_token,
        a.bonus_kind,
        a.stop,
        tuple(int(t) for t in a.committed_tokens),
        len(a.committed_tokens),
        tuple(res.notes),
    )


def records_of_batch(result) -> Iterable[RoundRecord]:
    """The records of a batch replay's replayed rounds (replay.engine.batch.BatchResult), in its order."""
    for obj in result.iter_json():
        yield RoundRecord(**{k: tuple(v) if k in LIST_COLUMNS else v for k, v in obj.items()})


def json_line(obj: dict) -> str:
    """One record's JSON Lines line: ``obj`` is RoundRecord.to_json() (its keys in COLUMNS order)."""
    return json.dumps(obj) + "\n"


def write_json_lines(records: Iterable[RoundRecord], out: IO[str]) -> int:
    """JSON Lines, one record per line; returns the count."""
    n = 0
    for rec in records:
        out.write(json_line(rec.to_json()))
        n += 1
    return n


_LINES_PER_WRITE = 1024  # one write call per block of lines, not per line
# Columns that vary round by round; the others follow from a few small codes (see _batch_templates).
_ROUND_VALUES = (
    "round",
    "key_a",
    "key_b",
    "root_token",
    "accepted_length",
    "accepted_tokens",
    "accepted_nodes",
    "bonus_token",
    "committed_tokens",
    "num_committed",
)


def write_batch_json_lines(result, out: IO[str]) -> int:
    """write_json_lines(records_of_batch(result), out), formatted from the result's arrays.

    result: a replay.engine.batch.BatchResult. Each line is json_line(result.round_json(i)) byte for byte:
    the columns that depend only on a round's codes (shape, layout, selection, bonus kind, stop)
    come from round_json of one round per distinct code tuple, the rest are formatted here from the
    arrays as round_json builds them; the first line of every code tuple is checked against
    json_line(round_json).
    """
    import numpy as np

    ok = np.flatnonzero(result.ok)  # [R'] int64
    if not ok.size:
        return 0
    own_notes = _own_notes(result, ok)  # [R'] bool
    templates, which, checked = _batch_templates(result, ok, own_notes)
    n = result.accepted_length[ok].astype(np.int64).tolist()
    tokens = result.accepted_tokens[:, ok].T.tolist()
    nodes = result.accepted_nodes[:, ok].T.tolist()
    keys_a, keys_b = result.keys[:, ok].tolist()
    roots = result.root_tokens[ok].tolist()
    bonuses = result.bonus_token[ok].tolist()
    own_notes = own_notes.tolist()
    block: list[str] = []
    for j in range(ok.shape[0]):
        k = n[j]
        toks = ", ".join(map(str, tokens[j][:k]))
        bonus = bonuses[j]
        known = bonus != PAD_TOKEN
        root = roots[j]
        line = templates[which[j]].format(
            round=f'"{keys_a[j]}_{keys_b[j]}"',
            key_a=keys_a[j],
            key_b=keys_b[j],
            root_token="null" if root == PAD_TOKEN else root,
            accepted_length=k,
            accepted_tokens=f"[{toks}]",
            accepted_nodes="[" + ", ".join(map(str, nodes[j][:k])) + "]",
            bonus_token=bonus if known else "null",
            committed_tokens=(f"[{toks}, {bonus}]" if k else f"[{bonus}]") if known else f"[{toks}]",
            num_committed=k + known,
            notes=json.dumps(result.notes(int(ok[j]))) if own_notes[j] else "",
        )
        if j in checked and line != json_line(result.round_json(int(ok[j]))):
            raise ValueError(f"round {keys_a[j]}_{keys_b[j]}: the batch line differs from json_line(round_json)")
        block.append(line)
        if len(block) == _LINES_PER_WRITE:
            out.write("".join(block))
            block.clear()
    out.write("".join(block))
    return int(ok.shape[0])


def _own_notes(result, ok):
    """[R'] bool: rounds with selection notes of their own; other rounds' notes follow from their codes."""
    import numpy as np

    return np.isin(ok, np.fromiter(result.selection_notes, dtype=np.int64, count=len(result.selection_notes)))


def _batch_templates(result, ok, own) -> tuple[list[str], list[int], set[int]]:
    """(one str.format template per distinct code tuple, each ok round's template index, the
    positions in ``ok`` of each template's first round, whose line the caller checks).

    ok: [R'] int64 the rounds written; own: [R'] bool their _own_notes. A template holds a line with every column but _ROUND_VALUES
    filled in from round_json of its first round, and is checked on that round. The codes are
    everything round_json reads besides _ROUND_VALUES' arrays (notes: the selection column, the
    extra validate rows and the layout; a round with selection notes of its own formats its notes).
    """
    import numpy as np

    codes = np.concatenate(
        (
            result.shape_index[ok][None],
            result.layout[ok][None],
            result.layout_stated[ok][None],
            result.selection[:, ok],
            result.bonus_kind[ok][None],
            result.stop[ok][None],
            result.validate_extra_rows[ok][None],
            own[None],
        )
    ).astype(np.int64)  # [codes, R']
    _, first, which = np.unique(codes, axis=1, return_index=True, return_inverse=True)
    templates = []
    for i, mine in zip(ok[first].tolist(), own[first].tolist()):
        per_round = _ROUND_VALUES + ("notes",) if mine else _ROUND_VALUES
        obj = result.round_json(i)
        if tuple(obj) != COLUMNS:
            raise ValueError(f"batch record keys {tuple(obj)} differ from the record's columns {COLUMNS}")
        fixed = ", ".join(
            f"{json.dumps(c)}: "
            + ("{" + c + "}" if c in per_round else json.dumps(obj[c]).replace("{", "{{").replace("}", "}}"))
            for c in COLUMNS
        )
        template = "{{" + fixed + "}}\n"
        templates.append(template)
    return templates, which.reshape(-1).tolist(), set(first.tolist())


def records_frame(records: Iterable[RoundRecord]):
    """The records as a pandas DataFrame in COLUMNS order (lists as lists, nullable ids Int64)."""
    import pandas as pd

    rows = [rec.to_json() for rec in records]
    frame = (
        pd.DataFrame(rows, columns=list(COLUMNS))
        if rows
        else pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS})
    )
    return normalize_frame(frame)


def _list_cell(v) -> list:
    if v is None or (isinstance(v, float) and v != v):
        return []
    return [x.item() if hasattr(x, "item") else x for x in v]


def normalize_frame(frame):
    """Any loaded per-round frame (JSON Lines, CSV read with CSV_CONVERTERS, Parquet) to one form."""

    frame = frame.copy()
    for c in LIST_COLUMNS:
        if c in frame.columns:
            frame[c] = [_list_cell(v) for v in frame[c]]
    for c in NULLABLE_INT_COLUMNS:
        if c in frame.columns:
            frame[c] = frame[c].astype("Int64")
    if "bonus_kind" in frame.columns:
        frame["bonus_kind"] = [v if isinstance(v, str) and v else None for v in frame["bonus_kind"]]
    return frame


def _ints(text: str) -> list[int]:
    return [int(t) for t in text.split()]


def _notes(text: str) -> list[str]:
    return text.split(NOTE_SEPARATOR) if text else []


# pd.read_csv(path, converters=CSV_CONVERTERS, dtype=CSV_DTYPES) reads a per-round CSV back.
CSV_CONVERTERS = {**{c: _ints for c in INT_LIST_COLUMNS}, "notes": _notes, "bonus_kind": lambda s: s or None}
CSV_DTYPES = {c: "Int64" for c in NULLABLE_INT_COLUMNS} | {"round": str}
# pd.read_json(path, lines=True, dtype=JSON_DTYPES) keeps the round key "124_140" a string and the
# nullable ids integers (a null would make them float). A null bonus_kind still reads as NaN there
# (pandas 3 reads JSON text as its str dtype, whose missing value is NaN): read_json gives None.
JSON_DTYPES = {"round": str} | {c: "Int64" for c in NULLABLE_INT_COLUMNS}


def csv_frame(frame):
    """``frame`` with its list columns as CSV text (ids separated by spaces, notes by `` | ``)."""
    frame = frame.copy()
    for c in INT_LIST_COLUMNS:
        if c in frame.columns:
            frame[c] = [" ".join(str(int(t)) for t in v) for v in frame[c]]
    if "notes" in frame.columns:
        frame["notes"] = [NOTE_SEPARATOR.join(v) for v in frame["notes"]]
    return frame


def read_json(path_or_buffer):
    """Per-round JSON (``replay``/``batch --json`` lines, or the array ``stats --table rounds --json``
    prints) back as records_frame gave it: a null bonus_kind is None, null ids are pandas NA."""
    import io

    import pandas as pd

    if hasattr(path_or_buffer, "read"):
        text = path_or_buffer.read()
    else:
        with open(path_or_buffer, encoding="utf-8") as f:
            text = f.read()
    lines = not text.lstrip().startswith("[")
    return normalize_frame(pd.read_json(io.StringIO(text), lines=lines, dtype=JSON_DTYPES))


def read_csv(path):
    """A per-round CSV written by ``write_table`` back as records_frame gave it."""
    import pandas as pd

    return normalize_frame(pd.read_csv(path, converters=CSV_CONVERTERS, dtype=CSV_DTYPES))


def write_table(frame, path) -> None:
    """A per-round frame to ``path``, atomically (.parquet keeps lists; .csv encodes them, see csv_frame)."""
    with atomic_path(path) as tmp:
        if str(path).endswith(".parquet"):
            frame.to_parquet(tmp, index=False)
        else:
            csv_frame(frame).to_csv(tmp, index=False)
