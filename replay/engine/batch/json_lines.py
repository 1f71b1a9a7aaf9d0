"""The JSON Lines of a batch replay's records (``replay --json``, ``batch --json``), formatted from
its arrays: each line is replay.core.records.json_line of the round's record, byte for byte."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from replay.core.records import COLUMNS, json_line
from replay.core.vocab import PAD_TOKEN

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


def write_batch_json_lines(result: Any, out: IO[str], progress: Callable[[int, int], None] | None = None) -> int:
    """The JSON Lines of records_of_batch(result), one json_line per record, formatted from the result's arrays;
    ``progress(lines written, lines)`` after each block.

    result: a replay.engine.batch.BatchResult. Each line is json_line(result.round_json(i)) byte for byte:
    the columns that depend only on a round's codes (shape, layout, selection, bonus kind, stop)
    come from round_json of one round per distinct code tuple (a template), the rest are
    formatted column by column in Arrow from the arrays as round_json builds them, and spliced
    into the templates' literal text; the first line of every code tuple is checked against
    json_line(round_json).
    """
    ok = np.flatnonzero(result.ok)  # [R'] int64
    if not ok.size:
        return 0
    own_notes = _own_notes(result, ok)  # [R'] bool
    templates, which, checked = _batch_templates(result, ok, own_notes)
    pieces = [_template_pieces(t) for t in templates]
    which_rows = np.asarray(which, dtype=np.int64)  # [R'] template of each round
    for start in range(0, ok.shape[0], _JSON_ROWS_PER_BLOCK):
        rows = np.arange(start, min(start + _JSON_ROWS_PER_BLOCK, ok.shape[0]))
        lines = _json_block(result, ok[rows], own_notes[rows], which_rows[rows], pieces)
        for j in sorted(k for k in checked if start <= k < start + rows.shape[0]):
            i = int(ok[j])
            if lines[j - start].as_py() != json_line(result.round_json(i)):
                key = "_".join(str(int(v)) for v in result.keys[:, i])
                raise ValueError(f"round {key}: the batch line differs from json_line(round_json)")
        out.write(_utf8_text(lines))
        if progress:
            progress(start + rows.shape[0], ok.shape[0])
    return int(ok.shape[0])


_JSON_ROWS_PER_BLOCK = 16_384  # lines formatted at a time: ~7 MB of text, bounded memory at millions of rounds


def _template_pieces(template: str) -> list[tuple[str, str | None]]:
    """A str.format template as (literal text, column name or None) pieces, in order."""
    import string

    return [(lit, name) for lit, name, _, _ in string.Formatter().parse(template)]


def _json_block(result: Any, ok: Any, own_notes: Any, which: Any, pieces: list[list[tuple[str, str | None]]]) -> Any:
    """pyarrow large_string array: the JSON lines of rounds ``ok`` (each line ends with a newline)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pa.large_string()
    n = ok.shape[0]
    lengths = result.accepted_length[ok].astype(np.int64)
    bonus = result.bonus_token[ok].astype(np.int64)
    known = bonus != PAD_TOKEN
    keys = result.keys[:, ok].astype(np.int64)
    roots = result.root_tokens[ok].astype(np.int64)

    def ints(v: Any, missing: Any = None) -> Any:
        s = pc.cast(pa.array(v), text)
        return s if missing is None else pc.if_else(pa.array(missing), pa.scalar("null", text), s)

    def listed(values2d: Any, counts: Any) -> Any:  # [R, W] row-major, the first counts[r] of each row, as JSON lists
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        flat = values2d[np.arange(values2d.shape[1])[None, :] < counts[:, None]].astype(np.int64)
        joined = pc.binary_join(pa.LargeListArray.from_arrays(pa.array(offsets), ints(flat)), pa.scalar(", ", text))
        return pc.binary_join_element_wise(pa.scalar("[", text), joined, pa.scalar("]", text), pa.scalar("", text))

    g = result.accepted_tokens.shape[0]
    tokens = result.accepted_tokens[:, ok].T.astype(np.int64)
    committed = np.zeros((n, g + 1), dtype=np.int64)
    committed[:, :g] = tokens
    at = np.minimum(lengths, g)
    committed[np.arange(n), at] = np.where(known, bonus, committed[np.arange(n), at])
    quote = pa.scalar('"', text)
    cols = {
        "round": pc.binary_join_element_wise(
            quote, ints(keys[0]), pa.scalar("_", text), ints(keys[1]), quote, pa.scalar("", text)
        ),
        "key_a": ints(keys[0]),
        "key_b": ints(keys[1]),
        "root_token": ints(roots, roots == PAD_TOKEN),
        "accepted_length": ints(lengths),
        "accepted_tokens": listed(tokens, lengths),
        "accepted_nodes": listed(result.accepted_nodes[:, ok].T, lengths),
        "bonus_token": ints(bonus, ~known),
        "committed_tokens": listed(committed, lengths + known),
        "num_committed": ints(lengths + known),
        "notes": pa.array([json.dumps(result.notes(i)) for i in ok[own_notes].tolist()], type=text),
    }
    note_at = np.cumsum(own_notes) - 1  # row -> index into cols["notes"] for rows with own notes
    parts, order = [], []
    empty = pa.scalar("", text)
    for t in np.unique(which).tolist():
        rows = np.flatnonzero(which == t)
        take = pa.array(rows)
        args = []
        for lit, name in pieces[t]:
            if lit:
                args.append(pa.scalar(lit, text))
            if name == "notes":
                args.append(cols["notes"].take(pa.array(note_at[rows])))
            elif name is not None:
                args.append(cols[name].take(take))
        parts.append(
            pc.binary_join_element_wise(*args, empty) if len(args) > 1 else pa.array([lit] * rows.shape[0], text)
        )
        order.append(rows)
    lines = pa.concat_arrays(parts)
    return lines.take(pa.array(np.argsort(np.concatenate(order), kind="stable")))


def _utf8_text(lines: Any) -> str:
    """The concatenated text of a large_string array (its data buffer, without a copy per line)."""
    if not len(lines):
        return ""
    _, offsets, data = lines.buffers()
    ends = np.frombuffer(offsets, dtype=np.int64)[lines.offset : lines.offset + len(lines) + 1]
    return memoryview(data)[int(ends[0]) : int(ends[-1])].tobytes().decode("utf-8")


def _own_notes(result: Any, ok: np.ndarray) -> np.ndarray:
    """[R'] bool: rounds with selection notes of their own; other rounds' notes follow from their codes."""
    return np.isin(ok, np.fromiter(result.selection_notes, dtype=np.int64, count=len(result.selection_notes)))


def _batch_templates(result: Any, ok: np.ndarray, own: np.ndarray) -> tuple[list[str], list[int], set[int]]:
    """(one str.format template per distinct code tuple, each ok round's template index, the
    positions in ``ok`` of each template's first round, whose line the caller checks).

    ok: [R'] int64 the rounds written; own: [R'] bool their _own_notes. A template holds a line with every column but _ROUND_VALUES
    filled in from round_json of its first round, and is checked on that round. The codes are
    everything round_json reads besides _ROUND_VALUES' arrays (notes: the selection column, the
    extra validate rows and the layout; a round with selection notes of its own formats its notes).
    """
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
