"""Read many rounds of plain-text matrices at once: one read per file, a few numpy calls per chunk.

The common text dump (integers separated by spaces, one matrix row per line, scores in ``.scores``
and parents in ``.parents`` companions or none) costs mostly per-file Python overhead when read file
by file. Here the bytes of a whole chunk of rounds are parsed together (``textparse``, the fast
subset of the text format), the scores checked by ``matrix_io.batch_logp`` (the scores rule for many
rounds), and rounds of equal step count go straight into RoundBatches (padded to their widest
matrices).

A round with a file outside the fast subset (a comment, a CR, a BOM, a float id, a ragged or empty
file, ...), a file that is not regular or is too large, or a parents companion that is not one node
index per row of its ids is not an error here: it is handed back, and the caller reads it with the
file-by-file reader (``rounds.load_round``), so results, errors and skip messages stay exactly that
reader's.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

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
    read_files,
    round_pieces,
)

from .matrix_io import SCORE_AUTO, batch_logp, file_kind, parents_fit
from .textparse import ParsedTexts, parse_id_texts, parse_score_texts

BULK_PARSE_BYTES = 8 << 20  # text parsed per numpy pass (~15 bytes of work arrays per byte)


def _text_exts(files: tuple[FilePaths, ...], raw_forced: bool) -> tuple[str, ...] | None:
    """The data files' extensions as named when every file the round's reader reads is text
    (matrix_io.file_kind), else None."""
    exts = []
    for p, *companions in read_files(files):
        ext, fmt = file_kind(p, raw_forced)
        if fmt != "text" or any(c is not None and file_kind(c, raw_forced)[1] != "text" for c in companions):
            return None
        exts.append(ext)
    return tuple(exts)


def _text_rounds(items: Sequence[RoundPaths], raw_forced: bool) -> tuple[list[tuple[str, ...] | None], bool]:
    """(_text_exts of each round, whether some matrix has a parents companion). The common directory,
    names without a dot and companions named after their data files, is checked by a few string
    operations over all."""
    read = [fs for item in items for fs in read_files(item[2])]
    data = [fs[0] for fs in read]
    parents = [fs[2] for fs in read]
    parented = parents.count(None) < len(parents)
    if data and _plain_names(data, [fs[1] for fs in read], raw_forced) and _plain_parents(data, parents, raw_forced):
        return [("",) * len(item[2]) for item in items], parented
    return [_text_exts(item[2], raw_forced) for item in items], parented


def _plain_parents(data: list[str], parents: list[str | None], raw_forced: bool) -> bool:
    """Whether every parents companion is named data + ``.parents`` and reads as text (or there is none)."""
    named = [(d, p) for d, p in zip(data, parents) if p is not None]
    if not named:
        return True
    joined = "\0".join(p for _, p in named) == ".parents\0".join(d for d, _ in named) + ".parents"
    return joined and file_kind(named[0][1], raw_forced)[1] == "text"


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
    infos, parented = _text_rounds(items, raw_forced)
    for piece in round_pieces(items, infos, BULK_FILE_BYTES, BULK_PARSE_BYTES, rest):
        for exts in {exts for _, exts, _ in piece} - set(names):
            names[exts] = SourceNames(directory, exts, step0_offset)
        _parse_piece(piece, names, layout, score_kind, parented, batches, rest)
    rest.sort(key=lambda it: it[0])
    return batches, rest


@dataclass(frozen=True, eq=False)
class _PieceTexts:
    """A piece's files parsed: data files, then their companions."""

    ids: ParsedTexts  # [F] data files
    scores: ParsedTexts
    score_at: np.ndarray  # [F] int64 each data file's scores companion in ``scores``, -1: none
    parents: ParsedTexts
    parent_at: np.ndarray  # [F] int64 each data file's parents companion in ``parents``, -1: none


def _parse_piece(
    piece: list[tuple[RoundPaths, tuple[str, ...], list[bytes]]],
    names: dict[tuple[str, ...], SourceNames],
    layout: str | None,
    score_kind: str,
    parented: bool,
    batches: list[RoundBatch],
    rest: list[RoundPaths],
) -> None:
    """Parse the files of the piece's rounds; batches and rounds refused are appended. parented: some
    round of the chunk has a parents companion."""
    id_bytes, score_bytes, score_at, parent_bytes, parent_at = _piece_files(piece, parented)
    texts = _PieceTexts(
        parse_id_texts(id_bytes), parse_score_texts(score_bytes), score_at, parse_id_texts(parent_bytes), parent_at
    )
    parsed = texts.ids
    counts = np.fromiter((len(exts) for _, exts, _ in piece), dtype=np.int64, count=len(piece))  # [T] files a round
    firsts = np.concatenate(([0], np.cumsum(counts)[:-1]))  # [T] each round's first file in ``parsed``
    has_scores, has_parents = score_at >= 0, parent_at >= 0  # [F]
    file_ok = parsed.ok.copy()
    file_ok[has_scores] &= texts.scores.ok[score_at[has_scores]]
    if has_parents.any():  # a companion that breaks the parents rule goes to read_matrix, which says why
        at = parent_at[has_parents]
        par = texts.parents
        file_ok[has_parents] &= par.ok[at] & parents_fit(par.rows[at], par.cols[at], parsed.rows[has_parents])
    round_ok = np.logical_and.reduceat(file_ok, firsts)  # [T]
    rest += [piece[t][0] for t in np.flatnonzero(~round_ok).tolist()]
    # Rounds of equal extensions and matrices with scores and parents form one batch (matrix sizes do
    # not split one: replay.io.roundbatch), the batches in the order of their first rounds.
    flags = has_scores + 2 * has_parents  # [F]
    if (flags == flags[0]).all():
        keys: list[tuple[object, ...]] = [exts for _, exts, _ in piece]
    else:
        keys = [(exts, tuple(flags[f : f + len(exts)].tolist())) for (_, exts, _), f in zip(piece, firsts.tolist())]
    kinds: dict[tuple[object, ...], int] = {}
    code = np.fromiter((kinds.setdefault(k, len(kinds)) for k in keys), dtype=np.int64, count=len(keys))  # [T]
    ok_rounds = np.flatnonzero(round_ok)
    _, first_seen = np.unique(code[ok_rounds], return_index=True)
    for c in code[ok_rounds[np.sort(first_seen)]].tolist():
        idx = ok_rounds[code[ok_rounds] == c]  # [R] the kind's rounds, in piece order
        exts = piece[int(idx[0])][1]
        files = firsts[idx][:, None] + np.arange(len(exts))  # [R, matrices]
        _kind_batch(piece, idx, files, texts, names[exts], layout, score_kind, batches, rest)


def _kind_batch(
    piece: list[tuple[RoundPaths, tuple[str, ...], list[bytes]]],
    idx: np.ndarray,
    files: np.ndarray,
    texts: _PieceTexts,
    names: SourceNames,
    layout: str | None,
    score_kind: str,
    batches: list[RoundBatch],
    rest: list[RoundPaths],
) -> None:
    """The batch of rounds ``idx`` ([R] int64 into the piece) of one kind, whose matrices are
    ``files`` ([R, matrices] int64 into texts.ids); rounds whose scores fail go to ``rest``."""
    score_files = texts.score_at[files]  # [R, matrices]
    parent_files = texts.parent_at[files]  # [R, matrices]
    mats = []
    good = np.ones(idx.size, dtype=bool)
    for m in range(files.shape[1]):
        ids, rows_of, cols_of = _gather(texts.ids, files[:, m], PAD_TOKEN)
        logp = parents = None
        if score_files[0, m] >= 0:
            scores, s_rows, s_cols = _gather(texts.scores, score_files[:, m], np.nan)
            logp, checked = batch_logp(scores, s_rows, s_cols, ids, rows_of, cols_of, score_kind)
            good &= checked
        if parent_files[0, m] >= 0:
            parents = _gather(texts.parents, parent_files[:, m], PAD_TOKEN)[0][:, 0, :]  # [rows, R]
        mats.append((ids, rows_of, cols_of, logp, parents))
    rest += [piece[t][0] for t in idx[~good].tolist()]
    if not good.any():
        return
    keep = np.flatnonzero(good)
    stacks = [MatrixStack.of_rounds(ids, logp, r_of, c_of, keep, parents) for ids, r_of, c_of, logp, parents in mats]
    batches.append(batch_of_items([piece[t][0] for t in idx[keep].tolist()], stacks, names, layout))


def _piece_files(
    piece: list[tuple[RoundPaths, tuple[str, ...], list[bytes]]], parented: bool
) -> tuple[list[bytes], list[bytes], np.ndarray, list[bytes], np.ndarray]:
    """(the data files' bytes, the scores companions' bytes, [F] int64 each data file's companion
    among them, -1: none, the parents companions' bytes, [F] int64 likewise) of the piece's rounds,
    whose reads hold each data file, then its companions (roundbatch.round_pieces). parented: some
    round may have a parents companion."""
    reads = [data for _, _, got in piece for data in got]
    matrices = sum(len(exts) for _, exts, _ in piece)
    no_parents = np.full(matrices, -1, dtype=np.int64)
    if not parented and len(reads) == 2 * matrices:  # every matrix has its scores (no round holds more than one each)
        return reads[0::2], reads[1::2], np.arange(matrices, dtype=np.int64), [], no_parents
    if not parented and len(reads) == matrices:  # none has one
        return reads, [], no_parents, [], no_parents
    id_bytes: list[bytes] = []
    found: tuple[list[bytes], list[bytes]] = ([], [])
    at: tuple[list[int], list[int]] = ([], [])
    for item, _, got in piece:
        files = iter(got)
        for _, *companions in read_files(item[2]):
            id_bytes.append(next(files))
            for companion, bodies, where in zip(companions, found, at):
                where.append(-1 if companion is None else len(bodies))
                if companion is not None:
                    bodies.append(next(files))
    return id_bytes, found[0], np.asarray(at[0], dtype=np.int64), found[1], np.asarray(at[1], dtype=np.int64)
