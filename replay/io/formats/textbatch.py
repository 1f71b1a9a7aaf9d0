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
    for piece in round_pieces(
        items, lambda item: _text_exts(item[2], raw_forced), BULK_FILE_BYTES, BULK_PARSE_BYTES, rest
    ):
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
    taken: list[tuple[RoundPaths, tuple[str, ...], tuple[int, ...]]] = []  # (item, exts, scores file or -1)
    id_bytes: list[bytes] = []
    score_bytes: list[bytes] = []
    for item, exts, got in piece:
        if len(got) == len(exts):  # no companion
            id_bytes += got
            taken.append((item, exts, (-1,) * len(exts)))
        elif len(got) == 2 * len(exts):  # a companion for every matrix: its file follows the data file's
            id_bytes += got[0::2]
            taken.append((item, exts, tuple(range(len(score_bytes), len(score_bytes) + len(exts)))))
            score_bytes += got[1::2]
        else:
            reads = iter(got)
            scores_at = []
            for _, companion, _ in item[2]:
                id_bytes.append(next(reads))
                scores_at.append(-1 if companion is None else len(score_bytes))
                if companion is not None:
                    score_bytes.append(next(reads))
            taken.append((item, exts, tuple(scores_at)))
    parsed = parse_id_texts(id_bytes)
    scored = parse_score_texts(score_bytes)
    counts = np.fromiter((len(exts) for _, exts, _ in taken), dtype=np.int64, count=len(taken))  # [T] files per round
    firsts = np.concatenate(([0], np.cumsum(counts)[:-1]))  # [T] each round's first file in ``parsed``
    round_ok = np.logical_and.reduceat(parsed.ok, firsts)
    score_ok = scored.ok.tolist()
    by_kind: dict[tuple[tuple[str, ...], tuple[bool, ...]], list[int]] = {}
    for t, (item, exts, where) in enumerate(taken):
        if round_ok[t] and all(w < 0 or score_ok[w] for w in where):
            by_kind.setdefault((exts, tuple(w >= 0 for w in where)), []).append(t)
        else:
            rest.append(item)
    for (exts, has_scores), members in by_kind.items():
        idx = np.asarray(members, dtype=np.int64)
        files = firsts[idx][:, None] + np.arange(len(exts))  # [R, matrices]
        score_files = np.asarray([taken[t][2] for t in members], dtype=np.int64).reshape(len(members), len(exts))
        # Matrix sizes do not split a batch (replay.io.roundbatch): one batch per step count, extensions, scores.
        mats = []
        good = np.ones(idx.size, dtype=bool)
        for m in range(len(exts)):
            ids, rows_of, cols_of = _gather(parsed, files[:, m], PAD_TOKEN)
            logp = None
            if has_scores[m]:
                scores, s_rows, s_cols = _gather(scored, score_files[:, m], np.nan)
                logp, checked = batch_logp(scores, s_rows, s_cols, ids, rows_of, cols_of, score_kind)
                good &= checked
            mats.append((ids, rows_of, cols_of, logp))
        rest += [taken[t][0] for t in idx[~good].tolist()]
        if not good.any():
            continue
        keep = np.flatnonzero(good)
        idx = idx[keep]
        stacks = [MatrixStack.of_rounds(ids, logp, rows_of, cols_of, keep) for ids, rows_of, cols_of, logp in mats]
        batches.append(batch_of_items([taken[t][0] for t in idx.tolist()], stacks, names[exts], layout))
