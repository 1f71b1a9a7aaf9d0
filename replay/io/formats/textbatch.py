"""Read many rounds of plain-text matrices at once: one read per file, a few numpy calls per chunk.

The common text dump (integers separated by spaces, one matrix row per line, scores in ``.scores``
companions or none) costs mostly per-file Python overhead when read file by file. Here the bytes of
a whole chunk of rounds are parsed together (``textparse``, the fast subset of the text format), the
scores checked by ``matrix_io.batch_logp`` (the scores rule for many rounds), and rounds of equal
step count go straight into RoundBatches (padded to their widest matrices).

A round with a file outside the fast subset (a comment, a CR, a BOM, a float id, a ragged or empty
file, ...), a file that is not regular or is too large, or a parents companion is not an error
here: it is handed back, and the caller reads it with the file-by-file reader
(``rounds.load_round``), so results, errors and skip messages stay exactly that reader's.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from replay.core.vocab import PAD_TOKEN
from replay.io.roundbatch import (
    BULK_FILE_BYTES,
    FilePaths,
    MatrixStack,
    RoundBatch,
    RoundPaths,
    SourceNames,
    batch_of_items,
    round_pieces,
)

from .matrix_io import SCORE_AUTO, batch_logp, file_kind
from .textparse import ParsedTexts, parse_id_texts, parse_score_texts

BULK_PARSE_BYTES = 8 << 20  # text parsed per numpy pass (~15 bytes of work arrays per byte)


def _text_exts(files: tuple[FilePaths, ...], raw_forced: bool) -> tuple[str, ...] | None:
    """The data files' extensions as named when every file reads as text (matrix_io.file_kind) and
    no matrix has a parents companion, else None."""
    exts = []
    for p, scores, parents in files:
        ext, fmt = file_kind(p, raw_forced)
        if parents is not None or fmt != "text":
            return None
        if scores is not None and file_kind(scores, raw_forced)[1] != "text":
            return None
        exts.append(ext)
    return tuple(exts)


def _text_rounds(items: Sequence[RoundPaths], raw_forced: bool) -> list[tuple[str, ...] | None]:
    """_text_exts of each round. The common directory, names without a dot and ``.scores``
    companions named after their data files, is checked by a few string operations over all."""
    data = [fs[0] for item in items for fs in item[2]]
    scores = [fs[1] for item in items for fs in item[2]]
    if data and _plain_names(data, scores, raw_forced) and all(fs[2] is None for item in items for fs in item[2]):
        return [("",) * len(item[2]) for item in items]
    return [_text_exts(item[2], raw_forced) for item in items]


def _plain_names(data: list[str], scores: list[str | None], raw_forced: bool) -> bool:
    """Whether every data file is named in one directory without a dot (no extension) and reads as
    text, and every matrix has a companion named data + ``.scores`` that reads as text, or none has one."""
    head = data[0][: data[0].rfind(os.sep) + 1]  # the directory as the paths spell it
    joined = "\0".join(data)  # no path holds a NUL: each one's end and start are found so
    if not (
        joined.startswith(head)
        and joined.count("\0" + head) == len(data) - 1
        and joined.count(".") == len(data) * head.count(".")
        and file_kind(data[0], raw_forced)[1] == "text"
    ):
        return False
    if scores.count(None) == len(scores):
        return True
    named = "\0".join(s or "" for s in scores) == ".scores\0".join(data) + ".scores"
    return named and file_kind(data[0] + ".scores", raw_forced)[1] == "text"


def _gather(parsed: ParsedTexts, files: np.ndarray, fill: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """([rows, cols, R] values of ``files`` (indices into ``parsed``, of any shapes) padded to the widest
    with ``fill``; each file's rows; its columns)."""
    rows_of, cols_of = parsed.rows[files], parsed.cols[files]
    rows, cols = int(rows_of.max()), int(cols_of.max())
    if (rows_of == rows).all() and (cols_of == cols).all():
        index = parsed.start[files][:, None] + np.arange(rows * cols, dtype=np.int64)  # [R, rows * cols]
        return parsed.values[index].reshape(files.shape[0], rows, cols).transpose(1, 2, 0), rows_of, cols_of
    r_i, c_i = np.arange(rows)[None, :, None], np.arange(cols)[None, None, :]
    inside = (r_i < rows_of[:, None, None]) & (c_i < cols_of[:, None, None])  # [R, rows, cols]
    index = parsed.start[files][:, None, None] + r_i * cols_of[:, None, None] + c_i
    values = np.where(inside, parsed.values[np.where(inside, index, 0)], fill).transpose(1, 2, 0)
    return values, rows_of, cols_of


def read_text_batches(
    directory: str,
    items: Sequence[RoundPaths],
    step0_offset: tuple[int, int],
    layout: str | None,
    raw_forced: bool,
    score_kind: str = SCORE_AUTO,
) -> tuple[list[RoundBatch], list[RoundPaths]]:
    """(RoundBatches of the rounds read here, the items left for the reference reader, in order).

    directory: as the RoundFiles' paths were built (str(Path(directory))); raw_forced: --raw ...:force,
    which makes extension-less files raw binary; score_kind: --scores (how scores are read). Files
    are parsed in pieces of about BULK_PARSE_BYTES, so memory stays ~15 bytes per byte of one piece
    whatever the chunk holds.
    """
    rest: list[RoundPaths] = []
    batches: list[RoundBatch] = []
    names: dict[tuple[str, ...], SourceNames] = {}
    for piece in round_pieces(items, _text_rounds(items, raw_forced), BULK_FILE_BYTES, BULK_PARSE_BYTES, rest):
        for exts in {exts for _, exts, _ in piece} - set(names):
            names[exts] = SourceNames(directory, exts, step0_offset)
        _parse_piece(piece, names, layout, score_kind, batches, rest)
    rest.sort(key=lambda it: it[0])
    return batches, rest


def _parse_piece(
    piece: list[tuple[RoundPaths, tuple[str, ...], list[bytes]]],
    names: dict[tuple[str, ...], SourceNames],
    layout: str | None,
    score_kind: str,
    batches: list[RoundBatch],
    rest: list[RoundPaths],
) -> None:
    """Parse the files of the piece's rounds; batches and rounds refused are appended."""
    id_bytes, score_bytes, score_at = _piece_files(piece)
    parsed = parse_id_texts(id_bytes)
    scored = parse_score_texts(score_bytes)
    counts = np.fromiter((len(exts) for _, exts, _ in piece), dtype=np.int64, count=len(piece))  # [T] files a round
    firsts = np.concatenate(([0], np.cumsum(counts)[:-1]))  # [T] each round's first file in ``parsed``
    has_scores = score_at >= 0  # [F]
    file_ok = parsed.ok.copy()
    file_ok[has_scores] &= scored.ok[score_at[has_scores]]
    round_ok = np.logical_and.reduceat(file_ok, firsts)  # [T]
    rest += [piece[t][0] for t in np.flatnonzero(~round_ok).tolist()]
    # Rounds of equal extensions and scored matrices form one batch (matrix sizes do not split one:
    # replay.io.roundbatch), the batches in the order of their first rounds.
    if has_scores.all() or not has_scores.any():
        keys: list[tuple[object, ...]] = [exts for _, exts, _ in piece]
    else:
        keys = [
            (exts, tuple(has_scores[f : f + len(exts)].tolist())) for (_, exts, _), f in zip(piece, firsts.tolist())
        ]
    kinds: dict[tuple[object, ...], int] = {}
    code = np.fromiter((kinds.setdefault(k, len(kinds)) for k in keys), dtype=np.int64, count=len(keys))  # [T]
    ok_rounds = np.flatnonzero(round_ok)
    _, first_seen = np.unique(code[ok_rounds], return_index=True)
    for c in code[ok_rounds[np.sort(first_seen)]].tolist():
        idx = ok_rounds[code[ok_rounds] == c]  # [R] the kind's rounds, in piece order
        exts = piece[int(idx[0])][1]
        files = firsts[idx][:, None] + np.arange(len(exts))  # [R, matrices]
        score_files = score_at[files]  # [R, matrices]
        mats = []
        good = np.ones(idx.size, dtype=bool)
        for m in range(len(exts)):
            ids, rows_of, cols_of = _gather(parsed, files[:, m], PAD_TOKEN)
            logp = None
            if score_files[0, m] >= 0:
                scores, s_rows, s_cols = _gather(scored, score_files[:, m], np.nan)
                logp, checked = batch_logp(scores, s_rows, s_cols, ids, rows_of, cols_of, score_kind)
                good &= checked
            mats.append((ids, rows_of, cols_of, logp))
        rest += [piece[t][0] for t in idx[~good].tolist()]
        if not good.any():
            continue
        keep = np.flatnonzero(good)
        stacks = [MatrixStack.of_rounds(ids, logp, rows_of, cols_of, keep) for ids, rows_of, cols_of, logp in mats]
        batches.append(batch_of_items([piece[t][0] for t in idx[keep].tolist()], stacks, names[exts], layout))


def _piece_files(
    piece: list[tuple[RoundPaths, tuple[str, ...], list[bytes]]],
) -> tuple[list[bytes], list[bytes], np.ndarray]:
    """(the data files' bytes, the scores companions' bytes, [F] int64 each data file's companion
    among them, -1: none) of the piece's rounds, whose reads hold each data file, then its companion."""
    reads = [data for _, _, got in piece for data in got]
    matrices = sum(len(exts) for _, exts, _ in piece)
    if len(reads) == 2 * matrices:  # every matrix has its companion (no round holds more than one each)
        return reads[0::2], reads[1::2], np.arange(matrices, dtype=np.int64)
    if len(reads) == matrices:  # none has one
        return reads, [], np.full(matrices, -1, dtype=np.int64)
    id_bytes: list[bytes] = []
    score_bytes: list[bytes] = []
    score_at: list[int] = []
    for item, _, got in piece:
        files = iter(got)
        for _, companion, _ in item[2]:
            id_bytes.append(next(files))
            score_at.append(-1 if companion is None else len(score_bytes))
            if companion is not None:
                score_bytes.append(next(files))
    return id_bytes, score_bytes, np.asarray(score_at, dtype=np.int64)
