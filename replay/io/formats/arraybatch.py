"""Read many rounds of ``.npz`` / ``.npy`` files at once: one read per file, a few numpy calls per layout.

An engine writes thousands of array files that differ only in their numbers: the same size, the
same zip records, the same ``.npy`` header. The first file of each extension and size in a chunk
is decoded by the reference decoders (``npyfile``, every check they make) into a layout: where each
array's values lie, their dtype and shape. Every other file whose bytes equal that file's
everywhere except in the values, the CRC fields and the zip timestamps decodes to arrays of the
same names, dtypes and shapes, so its values are cut out of the bytes of all such files at once.
What depends on the values is checked per file: the CRC of each member read, and the scores' NaN
and range rules (``matrix_io.logp_of_scores``, the one rule, for all files at once).

A round is taken only in the plain form: ``.npz``/``.npy`` files holding ``ids`` (integers,
2-D, not empty) and optional ``scores`` of the same shape, or a ``.npy``/``.npz`` scores companion;
no parents, no node log-probabilities. Any other round, any file whose layout differs from every
layout tried, a damaged file or a failed check is not an error here: the round is handed back and
the caller reads it with the file-by-file reader (``rounds.load_round``), so results and messages
stay exactly that reader's.
"""

from __future__ import annotations

import os
import zlib
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
from replay.util.bounded import MANY_ZIP_ENTRIES_BYTES
from replay.util.errors import DumpError

from .matrix_io import (
    batch_logp,
    file_kind,
    ids_refusal,
    real_refusal,
    scores_shape_refusal,
    wide_unsigned,
)
from .npyfile import stored_arrays, stored_member, whole_npy_header

BULK_PIECE_BYTES = 8 << 20  # file bytes decoded together (~3x this in work arrays)
MAX_LAYOUTS = 8  # layouts tried per format and size in one piece; files of others go to the reference
_FORMATS = ("npz", "npy")  # matrix_io.file_kind's names
# Zip fields that np.savez fills per file and the reference reader does not read (mod time, mod
# date, and the CRC, checked against the data below): offsets in the local header, central entry.
_LOCAL_FREE = (10, 18)
_CENTRAL_FREE = (12, 20)
_CENTRAL_CRC = 16


@dataclass(frozen=True, eq=False)
class _Layout:
    """What one file of a layout holds, and which of its bytes the other files of the layout may change."""

    template: np.ndarray  # [L] uint8, the decoded file's bytes
    fixed: np.ndarray  # [L] bool the bytes every file of the layout shares with the template
    arrays: dict[str, tuple[int, np.dtype, tuple[int, int], bool]]  # name -> (offset, dtype, shape, fortran)
    crcs: tuple[tuple[int, int, int], ...]  # per member read: (start, end, offset of its CRC field)


def _npy_layout(data: bytes) -> _Layout | None:
    """read_npy's decoding of ``data`` as a layout, or None where it would raise (or not be 2-D)."""
    try:
        header = whole_npy_header(data, "<bulk>")
    except DumpError:
        return None
    if len(header.shape) != 2:
        return None
    fixed = np.zeros(len(data), dtype=bool)
    fixed[: header.offset] = True
    shape = (header.shape[0], header.shape[1])
    return _Layout(_bytes(data), fixed, {"ids": (header.offset, header.dtype, shape, header.fortran_order)}, ())


def _npz_layout(data: bytes) -> _Layout | None:
    """read_npz's direct decoding of ``data`` (npyfile._read_stored_npz) as a layout, or None where the
    reference would not take the direct path, would raise, or the archive holds more than ids and scores."""
    if not data.startswith(b"PK") or len(data) >= MANY_ZIP_ENTRIES_BYTES:
        return None  # the values of a file of its layout could hold more entry signatures than allowed
    members = stored_arrays(data)
    if members is None or "ids" not in members or "parents" in members or "node_logprobs" in members:
        return None
    free = np.zeros(len(data), dtype=bool)
    arrays: dict[str, tuple[int, np.dtype, tuple[int, int], bool]] = {}
    crcs = []
    for name in ("ids", "scores"):
        if name not in members:
            continue
        read = stored_member(data, members[name], "<bulk>", name)
        if read is None or len(read[1].shape) != 2:
            return None
        header = read[1]
        start, size, _, local, central = members[name]
        arrays[name] = (start + header.offset, header.dtype, (header.shape[0], header.shape[1]), header.fortran_order)
        free[start + header.offset : start + size] = True
        free[local + _LOCAL_FREE[0] : local + _LOCAL_FREE[1]] = True
        free[central + _CENTRAL_FREE[0] : central + _CENTRAL_FREE[1]] = True
        crcs.append((start, start + size, central + _CENTRAL_CRC))
    return _Layout(_bytes(data), ~free, arrays, tuple(crcs))


def _bytes(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def _arrays_ok(arrays: dict[str, tuple[int, np.dtype, tuple[int, int], bool]]) -> bool:
    """Every array is of a kind the scores rule reads, and scores inside the file have the ids' shape
    (else the file-by-file reader refuses them: it words it)."""
    if any(real_refusal(spec[1]) is not None for spec in arrays.values()):
        return False
    return "scores" not in arrays or scores_shape_refusal(arrays["scores"][2], arrays["ids"][2]) is None


def _ids_ok(arrays: dict[str, tuple[int, np.dtype, tuple[int, int], bool]]) -> bool:
    """The file-by-file reader takes every ``ids`` of this dtype and shape, whatever their values."""
    _, dtype, shape, _ = arrays["ids"]
    return ids_refusal(dtype, shape) is None and not wide_unsigned(dtype)


@dataclass(frozen=True, eq=False)
class _Decoded:
    """The files of one piece: which decoded, and their arrays by layout."""

    ok: np.ndarray  # [F] bool
    layout: np.ndarray  # [F] int64 index into ``values``
    row: np.ndarray  # [F] int64 the file's place in its layout's arrays
    values: list[dict[str, np.ndarray]]  # per layout: name -> [n, rows, cols] in the file's dtype
    shapes: list[tuple[int, int]]  # per layout: the arrays' shape
    ids_ok: list[bool]  # per layout: its ids pass matrix_io._as_ids (a scores companion's need not)


def _decode(datas: Sequence[bytes], formats: Sequence[str]) -> _Decoded:
    """Decode files by layout: files of equal format and size are compared with one template at a time."""
    n = len(datas)
    ok = np.zeros(n, dtype=bool)
    layout_of = np.full(n, -1, dtype=np.int64)
    row = np.zeros(n, dtype=np.int64)
    values: list[dict[str, np.ndarray]] = []
    shapes: list[tuple[int, int]] = []
    ids_ok: list[bool] = []
    for fmt, size, members in _by_format_and_size(datas, formats):
        files = np.asarray(members, dtype=np.int64)
        table = np.frombuffer(b"".join(datas[f] for f in members), dtype=np.uint8).reshape(len(members), size)
        left = np.arange(len(members))
        for _ in range(MAX_LAYOUTS):
            if not left.size:
                break
            data = datas[members[left[0]]]
            lay = _npz_layout(data) if fmt == "npz" else _npy_layout(data)
            if lay is None or not _arrays_ok(lay.arrays):
                left = left[1:]
                continue
            same = _same_fixed(table, left, lay) if lay.fixed.any() else None
            take = left if same is None else left[same]
            left = left[:0] if same is None else left[~same]
            good = np.ones(take.size, dtype=bool)
            crc32 = zlib.crc32
            for start, end, at in lay.crcs:
                stored = np.ascontiguousarray(table[take, at : at + 4]).view("<u4")[:, 0]
                computed = np.array([crc32(datas[members[t]][start:end]) for t in take.tolist()], dtype=np.uint32)
                good &= stored == computed
            take = take[good]
            k = len(values)
            values.append({name: _cut(table, take, spec) for name, spec in lay.arrays.items()})
            shapes.append(lay.arrays["ids"][2])
            ids_ok.append(_ids_ok(lay.arrays))
            ok[files[take]] = True
            layout_of[files[take]] = k
            row[files[take]] = np.arange(take.size)
    return _Decoded(ok, layout_of, row, values, shapes, ids_ok)


def _by_format_and_size(datas: Sequence[bytes], formats: Sequence[str]) -> list[tuple[str, int, list[int]]]:
    """(format, size, the files of that format and size in order) for each pair, in order of first file."""
    code = np.fromiter(map(_FORMATS.index, formats), dtype=np.int64, count=len(formats))  # [F]
    size = np.fromiter(map(len, datas), dtype=np.int64, count=len(datas))  # [F]
    order = np.lexsort((size, code))  # stable: each pair's files stay in order
    starts = np.flatnonzero(np.diff(code[order], prepend=-1) | np.diff(size[order], prepend=-1))
    parts = np.split(order, starts[1:])
    return [
        (_FORMATS[int(code[part[0]])], int(size[part[0]]), part.tolist())
        for part in sorted(parts, key=lambda part: int(part[0]))
    ]


def _same_fixed(table: np.ndarray, left: np.ndarray, lay: _Layout) -> np.ndarray:
    """[n] bool: which files ``left`` (rows of ``table`` [F, L] uint8) equal ``lay``'s template in its fixed bytes."""
    rows = table if left.size == table.shape[0] else table[left]  # every file: no copy
    differ = rows != lay.template  # whole rows with a mask: far cheaper than gathering the fixed columns
    differ &= lay.fixed
    same: np.ndarray = ~differ.any(axis=1)
    return same


def _cut(table: np.ndarray, rows: np.ndarray, spec: tuple[int, np.dtype, tuple[int, int], bool]) -> np.ndarray:
    """[n, rows, cols] values of array ``spec`` in files ``rows`` of ``table`` (as array_from_buffer reads them)."""
    offset, dtype, (r, c), fortran = spec
    raw = np.ascontiguousarray(table[rows, offset : offset + r * c * dtype.itemsize]).view(dtype)
    return raw.reshape(rows.size, c, r).transpose(0, 2, 1) if fortran else raw.reshape(rows.size, r, c)


def _array_files(files: tuple[FilePaths, ...]) -> tuple[list[str], tuple[str, ...], tuple[bool, ...]] | None:
    """(the file_kind format of every file the round's reader reads (read_files): each data file, then
    its scores companion; the data files' extensions as named; which matrices have a companion) when
    all are .npz/.npy without parents companions, else None."""
    formats, data_exts, companions = [], [], []
    for data, scores, parents in read_files(files):
        ext, fmt = file_kind(data, False)  # raw --force reads extension-less files only
        if parents is not None or fmt not in _FORMATS:
            return None
        formats.append(fmt)
        data_exts.append(ext)
        companions.append(scores is not None)
        if scores is not None:
            fmt = file_kind(scores, False)[1]
            if fmt not in _FORMATS:
                return None
            formats.append(fmt)
    return formats, tuple(data_exts), tuple(companions)


def _array_infos(items: Sequence[RoundPaths]) -> list[tuple[list[str], tuple[str, ...], tuple[bool, ...]] | None]:
    """_array_files of every round. The common chunk (every data file under one directory with one
    extension, no name starting with a dot, and a scores companion named stem + ``.scores`` + that
    extension for every matrix or for none) is classified by a few string operations over all its
    paths and one file_kind call, where file_kind per file took ~2 us a round; any other chunk, a
    round at a time."""
    data = [fs[0] for item in items for fs in item[2]]
    if not data:
        return []
    scores = [fs[1] for item in items for fs in item[2]]
    parents = [fs[2] for item in items for fs in item[2][:-1]]  # read_files: a validate's is never read
    ext, fmt = file_kind(data[0], False)
    scored = scores[0] is not None
    if fmt not in _FORMATS or parents.count(None) != len(parents) or not _one_extension(data, ext):
        return [_array_files(item[2]) for item in items]
    if scored and "\0".join(map(str, scores)) != ("\0".join(data) + "\0").replace(ext + "\0", f".scores{ext}\0")[:-1]:
        return [_array_files(item[2]) for item in items]
    if not scored and scores.count(None) != len(scores):
        return [_array_files(item[2]) for item in items]
    infos: dict[int, tuple[list[str], tuple[str, ...], tuple[bool, ...]]] = {}
    for n in {len(item[2]) for item in items}:
        infos[n] = ([fmt] * (n * (1 + scored)), (ext,) * n, (scored,) * n)
    return [infos[len(item[2])] for item in items]


def _one_extension(paths: list[str], ext: str) -> bool:
    """Whether file_kind names extension ``ext`` (one dot, as it names them) for every path: each lies
    in the first one's directory and ends with ``ext``, which starts no name (else file_kind names none)."""
    head = paths[0][: paths[0].rfind(os.sep) + 1]  # the directory as the paths spell it
    joined = "\0".join(paths)  # no path holds a NUL: each one's end and start are found so
    n = len(paths)
    return (
        joined.count("\0" + head) == n - 1
        and joined.endswith(ext)
        and joined.count(ext + "\0") == n - 1  # a NUL follows only a path's end
        and joined.count(os.sep + ".") == n * head.count(os.sep + ".")  # no name past the directory starts with a dot
        and (bool(head) or not (joined.startswith(".") or "\0." in joined))
    )


# A round read here: (its item, its data files' extensions as named, which matrices have a companion)
_Taken = tuple[RoundPaths, tuple[str, ...], tuple[bool, ...]]


def read_array_batches(
    directory: str, items: Sequence[RoundPaths], step0_offset: tuple[int, int], layout: str | None, score_kind: str
) -> tuple[list[RoundBatch], list[RoundPaths]]:
    """(RoundBatches of the rounds read here, the items left for the reference reader, in order).

    directory: as the RoundFiles' paths were built (str(Path(directory))). Files are decoded in
    pieces of about BULK_PIECE_BYTES, so memory stays proportional to one piece.
    """
    rest: list[RoundPaths] = []
    batches: list[RoundBatch] = []
    for piece in round_pieces(items, _array_infos(items), BULK_FILE_BYTES, BULK_PIECE_BYTES, rest):
        taken = [(item, data_exts, companions) for item, (_, data_exts, companions), _ in piece]
        datas = [data for _, _, got in piece for data in got]
        formats = [fmt for _, (fmts, _, _), _ in piece for fmt in fmts]
        _decode_piece(directory, taken, datas, formats, step0_offset, layout, score_kind, batches, rest)
    rest.sort(key=lambda it: it[0])
    return batches, rest


@dataclass(frozen=True, eq=False)
class _Rounds:
    """Rounds of one batch: equal data extensions and equal matrices with scores."""

    taken: np.ndarray  # [R] int64 index into the piece's rounds
    data_f: np.ndarray  # [R, matrices] int64 each matrix's data file
    score_f: np.ndarray  # [R, matrices] int64 the file holding its scores, -1: none
    from_companion: np.ndarray  # [R, matrices] bool its scores are a companion's ids (else the file's "scores")


def _decode_piece(
    directory: str,
    taken: list[_Taken],
    datas: list[bytes],
    formats: list[str],
    step0_offset: tuple[int, int],
    layout: str | None,
    score_kind: str,
    batches: list[RoundBatch],
    rest: list[RoundPaths],
) -> None:
    """Decode the files of rounds ``taken`` (their bytes ``datas``, in order); batches and refused rounds are appended."""
    dec = _decode(datas, formats)
    ids_ok = np.asarray([*dec.ids_ok, False])  # [layouts + 1]; [-1]: an undecoded file's layout
    inner = np.asarray([*(("scores" in v) for v in dec.values), False])  # [layouts + 1] the files hold scores
    counts = np.fromiter((len(c) + sum(c) for _, _, c in taken), dtype=np.int64, count=len(taken))  # files per round
    firsts = np.cumsum(counts) - counts  # [T] each round's first file
    by_files: dict[tuple[tuple[str, ...], tuple[bool, ...]], list[int]] = {}
    for r, (_, data_exts, companions) in enumerate(taken):
        by_files.setdefault((data_exts, companions), []).append(r)
    # a batch per extensions and matrices with scores (where the scores come from does not split it)
    parts: dict[tuple[tuple[str, ...], int], list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]] = {}
    refused = np.zeros(len(taken), dtype=bool)
    for (data_exts, companions), members in by_files.items():
        t = np.asarray(members, dtype=np.int64)  # [R]
        # a data file's place among its round's files; its companion is the next file
        place = np.cumsum([0, *(1 + c for c in companions[:-1])])  # [matrices]
        data_f = firsts[t][:, None] + place  # [R, matrices]
        comp = np.asarray(companions)  # [matrices]
        good = (dec.ok[data_f] & ids_ok[dec.layout[data_f]]).all(axis=1)
        good &= dec.ok[data_f[:, comp] + 1].all(axis=1)
        good &= ~(inner[dec.layout[data_f]] & comp).any(axis=1)  # two sources of scores: the reader refuses it
        has_inner = inner[dec.layout[data_f]] & ~comp  # [R, matrices]
        score_f = np.where(comp, data_f + 1, np.where(has_inner, data_f, -1))
        refused[t[~good]] = True
        weights = np.asarray([1 << m for m in range(len(companions))], dtype=object)  # any number of matrices
        code = ((score_f >= 0).astype(object) * weights).sum(axis=1)  # [R] which matrices have scores
        for c in dict.fromkeys(code[good].tolist()):
            at = np.flatnonzero(good & (code == c))
            from_companion = np.broadcast_to(comp, (at.size, comp.size))
            parts.setdefault((data_exts, c), []).append((t[at], data_f[at], score_f[at], from_companion))
    rest += [taken[r][0] for r in np.flatnonzero(refused).tolist()]
    # batches in the order of their first round, each batch's rounds in piece order
    for (data_exts, _), group in sorted(parts.items(), key=lambda kv: min(int(p[0][0]) for p in kv[1])):
        t, data_f, score_f, from_companion = (np.concatenate(col) for col in zip(*group))
        order = np.argsort(t, kind="stable")
        rounds = _Rounds(t[order], data_f[order], score_f[order], from_companion[order])
        _group_batches(directory, taken, rounds, data_exts, dec, step0_offset, layout, score_kind, batches, rest)


def _group_batches(
    directory: str,
    taken: list[_Taken],
    rounds: _Rounds,
    data_exts: tuple[str, ...],
    dec: _Decoded,
    step0_offset: tuple[int, int],
    layout: str | None,
    score_kind: str,
    batches: list[RoundBatch],
    rest: list[RoundPaths],
) -> None:
    """One RoundBatch of ``rounds`` (equal extensions and scores), less those a scores check refuses."""
    n_mat = len(data_exts)
    data_f, score_f = rounds.data_f, rounds.score_f
    good = np.ones(rounds.taken.shape[0], dtype=bool)
    stacks: list[tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]] = []
    for m in range(n_mat):
        ids, rows_of, cols_of = _gather(dec, data_f[:, m], "ids", None, PAD_TOKEN, np.int64)
        logp = None
        if score_f[0, m] >= 0:
            scores = None
            s_rows, s_cols = np.zeros_like(rows_of), np.zeros_like(cols_of)
            companion = rounds.from_companion[:, m]
            for name, sel in (("ids", companion), ("scores", ~companion)):  # a companion's matrix is its ids
                if not sel.any():
                    continue
                part, part_rows, part_cols = _gather(dec, score_f[:, m], name, sel, np.nan, np.float64)
                s_rows, s_cols = np.where(sel, part_rows, s_rows), np.where(sel, part_cols, s_cols)
                scores = part if scores is None else _fill(scores, part, sel)
            if scores is None:
                raise ValueError("_group_batches: a scored matrix without scores")  # sel is all of one kind
            logp, checked = batch_logp(scores, s_rows, s_cols, ids, rows_of, cols_of, score_kind)
            good &= checked
        stacks.append((ids, logp, rows_of, cols_of))
    rest += [taken[r][0] for r in rounds.taken[~good].tolist()]
    keep = np.flatnonzero(good)
    if not keep.size:
        return
    items = [taken[r][0] for r in rounds.taken[keep].tolist()]
    mats = [MatrixStack.of_rounds(ids, logp, rows_of, cols_of, keep) for ids, logp, rows_of, cols_of in stacks]
    batches.append(batch_of_items(items, mats, SourceNames(directory, data_exts, step0_offset), layout))


def _gather(
    dec: _Decoded, files: np.ndarray, name: str, sel: np.ndarray | None, fill: float, dtype: type
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """([rows, cols, R] array ``name`` of ``files`` (rounds outside ``sel`` left at ``fill``), padded to the
    widest, as ``dtype``; each round's own rows; its own columns)."""
    r_count = files.shape[0]
    lay = dec.layout[files]
    if sel is not None:
        lay = np.where(sel, lay, -1)
    rows_of = np.zeros(r_count, dtype=np.int64)
    cols_of = np.zeros(r_count, dtype=np.int64)
    used = [u for u in sorted(set(lay.tolist())) if u >= 0]  # not np.unique: it imports numpy.ma (~20 ms a process)
    for u in used:
        rows_of[lay == u], cols_of[lay == u] = dec.shapes[u]
    rows, cols = int(rows_of.max(initial=0)), int(cols_of.max(initial=0))
    out: np.ndarray = np.full((rows, cols, r_count), fill, dtype=dtype)
    with np.errstate(invalid="ignore"):  # a signalling NaN widens quietly (as matrix_io._as_real converts)
        for u in used:
            at = np.flatnonzero(lay == u)
            r, c = dec.shapes[u]
            out[:r, :c, at] = dec.values[u][name][dec.row[files[at]]].transpose(1, 2, 0)
    return out, rows_of, cols_of


def _fill(into: np.ndarray, part: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """``into`` with rounds ``sel`` taken from ``part`` (both padded to the larger)."""
    rows, cols = max(into.shape[0], part.shape[0]), max(into.shape[1], part.shape[1])
    out: np.ndarray = np.full((rows, cols, into.shape[2]), np.nan)
    out[: into.shape[0], : into.shape[1]] = into
    out[:, :, sel] = np.nan
    out[: part.shape[0], : part.shape[1], sel] = part[:, :, sel]
    return out
