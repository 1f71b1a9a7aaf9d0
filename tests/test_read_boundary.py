"""Every dump reader is a hard boundary: damaged, hostile or odd input gives a DumpError/ConfigError
naming the file (and the field or archive member), never a raw exception, a crash, a hang, an
allocation the file's size does not justify, or bytes that are not in the file.

Each case below was first found by mutating the bundled samples; see docs/dump-format.md "Limits".
"""

import math
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tracemalloc
import warnings
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from replay import cli
from replay.core.config import load_config
from replay.io import fastread
from replay.io.formats.matrix_io import RawSpec, _parse_text_lines, parse_text_matrix, read_matrix
from replay.io.grouping import group_directory
from replay.io.manifest import read_manifest
from replay.util.bounded import MAX_JSON_DEPTH, MAX_TEXT_FILE_BYTES, json_depth
from replay.util.errors import ConfigError, DumpError
from tests.dump_mutations import ENTRY_KINDS, deflate_bomb_npz, npy_header, replace_entry, tensor_pickle, zip_bytes

ROOT = Path(__file__).resolve().parent.parent
ARTICLE = ROOT / "sample_dumps" / "article_round"
IDS = np.array([[41760, 35740, 7], [45315, 41760, 8]], dtype=np.int64)
MB = 1 << 20


# --- builders (byte-level ones live in tests/dump_mutations.py) -----------------------------------


def _tensor_pickle(offset, size, stride, storage="LongStorage", numel=6) -> bytes:
    """The whole data.pkl torch.save writes for one tensor, with any offset/size/stride."""
    return b"\x80\x02" + tensor_pickle("0", offset, size, stride, storage, numel) + b"."


def _write_pt(path: Path, pkl: bytes, storages: dict, extra: dict | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pkl)
        for key, raw in storages.items():
            z.writestr(f"archive/data/{key}", raw)
        for name, raw in (extra or {}).items():
            z.writestr(f"archive/{name}", raw)
    return path


def _article_copy(tmp_path: Path) -> Path:
    d = tmp_path / "article"
    shutil.copytree(ARTICLE, d)
    return d


def _cli(argv, capsys) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _peak_mb(fn) -> tuple[BaseException | None, float]:
    """(the exception fn raised or None, peak traced allocation in MiB)."""
    tracemalloc.start()
    try:
        fn()
        exc = None
    except BaseException as e:  # noqa: BLE001 - the test inspects it
        exc = e
    peak = tracemalloc.get_traced_memory()[1] / MB
    tracemalloc.stop()
    return exc, peak


# --- .npz -----------------------------------------------------------------------------------------


def test_npz_unknown_compression_method_is_a_dump_error(tmp_path):
    """Central-directory method byte set to an unknown method: was NotImplementedError."""
    src = tmp_path / "m.npz"
    np.savez(src, ids=IDS)
    data = bytearray(src.read_bytes())
    cd = data.index(b"PK\x01\x02")
    data[cd + 10] = 99  # compression method of the first central entry
    src.write_bytes(bytes(data))
    with pytest.raises(DumpError, match=r"m.npz \(ids.npy\): compression method 99 is not read"):
        read_matrix(src, "draft")


def test_npz_bad_crc_and_every_truncation_are_dump_errors(tmp_path):
    """Flipping a data byte (bad CRC) and truncating at any offset: were BadZipFile tracebacks."""
    src = tmp_path / "c.npz"
    np.savez(src, ids=IDS, scores=np.full(IDS.shape, 0.5))
    data = src.read_bytes()
    damaged = bytearray(data)
    damaged[data.index(b"\x93NUMPY") + 130] ^= 0xFF  # inside the ids data: CRC no longer matches
    src.write_bytes(bytes(damaged))
    with pytest.raises(DumpError, match=r"c.npz \(ids.npy\): corrupt or truncated numpy file \(.npz\): Bad CRC-32"):
        read_matrix(src, "draft")
    for cut in range(len(data)):
        src.write_bytes(data[:cut])
        with pytest.raises(DumpError, match=r"c.npz"):
            read_matrix(src, "draft")


@pytest.mark.slow
def test_npz_deflate_bomb_is_refused_before_inflating(tmp_path):
    """1.2 MB deflating to 1.2 GB: took 1.2 GB and 11 s, then failed with a wrong message."""
    bomb = tmp_path / "bomb.npz"
    bomb.write_bytes(deflate_bomb_npz(1200))
    assert bomb.stat().st_size < 2 * MB
    exc, peak = _peak_mb(lambda: read_matrix(bomb, "draft"))
    assert isinstance(exc, DumpError) and "bomb.npz (ids.npy): declares 1,258,291,328 bytes" in str(exc), exc
    assert peak < 16, peak


@pytest.mark.slow
def test_npz_member_inflating_past_its_declared_size_stops_there(tmp_path):
    """The zip headers declare a 64-byte array; the deflate stream holds 256 MB of zeros."""
    body = npy_header((1, 8))
    declared = len(body) + 64
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    stream = comp.compress(body) + b"".join(comp.compress(bytes(MB)) for _ in range(256)) + comp.flush()
    liar = tmp_path / "liar.npz"
    liar.write_bytes(zip_bytes([(b"ids.npy", 8, stream, zlib.crc32(body + bytes(64)) ^ 1, declared, 0)]))
    exc, peak = _peak_mb(lambda: read_matrix(liar, "draft"))
    assert isinstance(exc, DumpError) and "liar.npz (ids.npy): corrupt or truncated numpy file (.npz)" in str(exc), exc
    assert peak < 16, peak


def test_npz_header_disagreeing_with_member_size_is_refused_before_inflating(tmp_path):
    body = npy_header((100_000, 1000)) + bytes(64)  # header claims 800 MB, member holds 64 bytes
    crc = zlib.crc32(body)
    p = tmp_path / "h.npz"
    p.write_bytes(zip_bytes([(b"ids.npy", 0, body, crc, len(body), 0)]))
    with pytest.raises(
        DumpError,
        match=r"h.npz \(ids\): the header says 100000 rows × 1000 columns of int64, which needs .* but the archive",
    ):
        read_matrix(p, "draft")


def test_npz_without_ids_as_a_companion_is_a_dump_error(tmp_path):
    """A scores companion .npz without an 'ids' array: was KeyError."""
    (tmp_path / "d").write_text("1 2\n3 4\n")
    np.savez(tmp_path / "d.scores.npz", other=np.ones((2, 2)))
    with pytest.raises(DumpError, match=r"d.scores.npz \(ids\): no 'ids' array \(found \['other'\]\)"):
        read_matrix(tmp_path / "d", "draft", scores_path=tmp_path / "d.scores.npz")


def test_npz_with_thousands_of_entries_is_refused(tmp_path):
    p = tmp_path / "many.npz"
    np.savez(p, ids=IDS, **{f"a{i}": np.zeros(1) for i in range(5000)})
    with pytest.raises(DumpError, match=r"many.npz: .*more than 4096 entries"):
        read_matrix(p, "draft")


# --- .npy -----------------------------------------------------------------------------------------


def test_192_byte_npy_claiming_a_terabyte_is_refused_without_allocating(tmp_path):
    """Header shape (10**6, 10**6): numpy tried to allocate 7 TiB (MemoryError)."""
    p = tmp_path / "validate_1_1.npy"
    p.write_bytes(npy_header((10**6, 10**6)) + bytes(64))
    assert p.stat().st_size == 192
    exc, peak = _peak_mb(lambda: read_matrix(p, "validate"))
    assert isinstance(exc, DumpError) and "validate_1_1.npy: header claims 1000000 rows × 1000000 columns" in str(
        exc
    ), exc
    assert peak < 1


@pytest.mark.parametrize(
    "array, expected",
    [
        (np.zeros((2, 3), dtype=np.complex128), r"holds complex numbers \(numpy dtype complex128\): token ids"),
        (np.array([[{"a": 1}]], dtype=object), "holds pickled objects; refusing to unpickle"),
        (np.array([["ab"]]), r"holds text \(numpy dtype <U2\): token ids must be integers"),
        (np.zeros((2, 3), dtype=[("a", "<i8")]), r"holds structured records \(numpy dtype .*\): token ids must be"),
    ],
)
def test_npy_dtypes_other_than_numbers_are_refused_before_reading(tmp_path, array, expected):
    p = tmp_path / "x.npy"
    np.save(p, array, allow_pickle=True)
    with pytest.raises(DumpError, match=expected):
        read_matrix(p, "draft")


def test_npy_negative_dimension_and_trailing_bytes(tmp_path):
    p = tmp_path / "n.npy"
    p.write_bytes(npy_header((-2, 3)) + bytes(48))
    with pytest.raises(DumpError, match=r"n.npy: invalid shape -2 × 3"):
        read_matrix(p, "draft")
    np.save(p, IDS)
    p.write_bytes(p.read_bytes() + b"junk")
    with pytest.raises(DumpError, match=r"n.npy: trailing bytes after the data"):
        read_matrix(p, "draft")


def test_npy_big_endian_and_fortran_order_read_the_same_values(tmp_path):
    np.save(tmp_path / "be.npy", IDS.astype(">i4"))
    np.save(tmp_path / "f.npy", np.asfortranarray(IDS))
    for name in ("be.npy", "f.npy"):
        assert np.array_equal(read_matrix(tmp_path / name, "draft").ids, IDS)


def test_uint64_ids_beyond_int64_are_refused_not_wrapped(tmp_path):
    """2**64 - 1 is refused, not wrapped to -1 (the padding token) without a word."""
    np.save(tmp_path / "u.npy", np.array([[2**64 - 1, 5]], dtype=np.uint64))
    with pytest.raises(DumpError, match=r"u.npy \(ids\): value 18446744073709551615 is outside the int64 range"):
        read_matrix(tmp_path / "u.npy", "draft")


# --- .pt ------------------------------------------------------------------------------------------


def test_pt_with_non_utf8_member_name_is_a_dump_error(tmp_path):
    """UTF-8 flag set, name not UTF-8: was UnicodeDecodeError."""
    p = _write_pt(tmp_path / "n.pt", _tensor_pickle(0, (2, 3), (3, 1)), {"0": IDS.tobytes()}, {"é": b"x"})
    p.write_bytes(p.read_bytes().replace("é".encode(), b"\xff\xfe"))
    with pytest.raises(DumpError, match=r"n.pt: corrupt or truncated .pt file: 'utf-8' codec can't decode"):
        read_matrix(p, "draft")


def test_pt_negative_stride_is_refused_not_a_segfault(tmp_path):
    """A negative stride made as_strided read before the buffer: exit 139. Checked in a child."""
    p = _write_pt(tmp_path / "neg.pt", _tensor_pickle(0, (2, 3), (-100000, 1)), {"0": IDS.tobytes()})
    code = (
        "import sys\nfrom replay.util.errors import DumpError\nfrom replay.io.formats.matrix_io import read_matrix\n"
        f"try:\n    read_matrix({str(p)!r}, 'draft')\nexcept DumpError as e:\n    print(e)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=120,
    )
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert "neg.pt (tensor): negative tensor size, stride or offset" in r.stdout


@pytest.mark.parametrize(
    "offset, size, stride",
    [(0, (2, 3), (4, 1)), (1, (2, 3), (3, 1)), (6, (1, 1), (1, 1)), (0, (3, 3), (0, 3))],
)
def test_pt_view_past_its_storage_is_refused(tmp_path, offset, size, stride):
    """Used to return bytes from beyond the storage (not in the file) and replay with rc 0."""
    p = _write_pt(tmp_path / "far.pt", _tensor_pickle(offset, size, stride), {"0": IDS.tobytes()})
    with pytest.raises(DumpError, match=r"far.pt \(tensor\): tensor .* reaches element \d+ but its storage holds 6"):
        read_matrix(p, "draft")


def test_pt_valid_views_broadcast_and_big_endian(tmp_path):
    # stride 0 (an expanded tensor) is valid torch: every row is the storage's first row
    p = _write_pt(tmp_path / "b.pt", _tensor_pickle(0, (2, 3), (0, 1)), {"0": IDS.tobytes()})
    assert read_matrix(p, "draft").ids.tolist() == [IDS[0].tolist(), IDS[0].tolist()]
    # torch records "big" in archive/byteorder on big-endian machines; storages are big-endian then
    p = _write_pt(
        tmp_path / "be.pt", _tensor_pickle(1, (2, 2), (3, 1)), {"0": IDS.astype(">i8").tobytes()}, {"byteorder": b"big"}
    )
    assert read_matrix(p, "draft").ids.tolist() == [[35740, 7], [41760, 8]]


def test_pt_pickle_claiming_a_huge_byte_string_allocates_nothing(tmp_path):
    """BINBYTES8 with a 2**40 length: the C unpickler allocated the claimed size first."""
    pkl = b"\x80\x04\x8e" + struct.pack("<Q", 1 << 40) + b"abc."
    p = _write_pt(tmp_path / "big.pt", pkl, {})
    exc, peak = _peak_mb(lambda: read_matrix(p, "draft"))
    assert isinstance(exc, DumpError) and "big.pt" in str(exc), exc
    assert peak < 16, peak


@pytest.mark.parametrize(
    "pkl, expected",
    [
        (b"\x80\x02" + b"(" * 100_000 + b"t" * 100_000 + b".", "corrupt .pt archive|expected a tensor"),
        (b"\x80\x02K\x01K\x02R.", "corrupt .pt archive: TypeError"),  # REDUCE on an int
        (b"\x80\x02}(X\x03\x00\x00\x00idsK\x01u.", r"expected a tensor or a dict of named tensors, got a dict of int"),
        (pickle.dumps([1, 2], protocol=2), "expected a tensor or a dict of named tensors, got list"),
    ],
)
def test_pt_hostile_pickles_are_dump_errors(tmp_path, pkl, expected):
    p = _write_pt(tmp_path / "h.pt", pkl, {})
    with pytest.raises(DumpError, match=expected):
        read_matrix(p, "draft")


# --- text and raw -----------------------------------------------------------------------------------


def test_text_token_id_beyond_int64_is_a_dump_error(tmp_path):
    """Was OverflowError."""
    p = tmp_path / "validate_1_1"
    p.write_text(f"1 2\n3 {2**63}\n")
    with pytest.raises(
        DumpError, match=r"validate_1_1 \(ids\): line 2: token id 9223372036854775808 is outside the int64 range"
    ):
        read_matrix(p, "validate")


def test_text_bom_crlf_and_strict_digits(tmp_path):
    p = tmp_path / "t"
    p.write_bytes(b"\xef\xbb\xbf41760 35740 7\r\n45315,41760,8\r\n")
    assert np.array_equal(read_matrix(p, "draft").ids, IDS)
    for cell in ("1_0", "\u0663", "0x10", "1.0"):  # Python's int() takes the first two
        p.write_text(f"1 {cell}\n")
        with pytest.raises(DumpError, match=r"t \(ids\): line 1: .* is not an integer token id"):
            read_matrix(p, "draft")


def test_text_over_the_size_limit_is_refused_and_a_long_line_is_read(tmp_path):
    p = tmp_path / "big"
    line = b" ".join([b"7"] * (5 * MB)) + b"\n"  # a 10 MB single line: one row of 5,242,880 ids
    p.write_bytes(line)
    m = read_matrix(p, "draft")
    assert m.ids.shape == (1, 5 * MB) and int(m.ids.sum()) == 7 * 5 * MB
    p.write_bytes(line * 2)
    with pytest.raises(
        DumpError,
        match=rf"big: is {2 * len(line):,} bytes; files of this kind are read up to {MAX_TEXT_FILE_BYTES:,} bytes",
    ):
        read_matrix(p, "draft")


def test_nan_and_infinite_scores(tmp_path):
    (tmp_path / "d").write_text("1 2\n3 4\n")
    s = tmp_path / "d.scores"
    s.write_text("0.5 nan\n0.5 0.5\n")
    with pytest.raises(DumpError, match=r"d.scores \(scores\): NaN among the scores"):
        read_matrix(tmp_path / "d", "draft", scores_path=s)
    s.write_text("0.5 inf\n0.5 0.5\n")
    with pytest.raises(DumpError, match=r"d.scores \(scores\): probabilities must lie in \[0, 1\]"):
        read_matrix(tmp_path / "d", "draft", scores_path=s)
    s.write_text("-0.5 -inf\n-1 -2\n")  # log(0) is a valid log-probability
    assert read_matrix(tmp_path / "d", "draft", scores_path=s).logp[0, 1] == -math.inf


@pytest.mark.parametrize(
    "dtype, expected",
    [
        ("object", "dtype 'object' is not an integer dtype"),
        ("complex64", "dtype 'complex64' is not an integer dtype"),
        ("nonsense", "expected a numpy dtype name .*, got unknown dtype"),
    ],
)
def test_raw_spec_refuses_non_integer_dtypes(dtype, expected):
    with pytest.raises(DumpError, match=rf"--raw: {expected}"):
        RawSpec.parse(f"{dtype}:4")


def test_empty_files_of_every_encoding(tmp_path):
    for name in ("e", "e.txt", "e.npy", "e.npz", "e.pt", "e.bin"):
        (tmp_path / name).write_bytes(b"")
        with pytest.raises(DumpError, match=rf"{name}"):
            read_matrix(tmp_path / name, "draft", RawSpec("int32", {"draft": 2}))


# --- JSON ------------------------------------------------------------------------------------------


def test_deeply_nested_manifest_and_config_are_refused(tmp_path):
    """100,000 levels: was RecursionError."""
    d = _article_copy(tmp_path)
    (d / "manifest.json").write_text('{"rounds": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(DumpError, match=rf"manifest.json: JSON nested 100001 levels deep; at most {MAX_JSON_DEPTH}"):
        read_manifest(d)
    (d / "config.json").write_text('{"x": ' + "{" * 100_000 + "}" * 100_000 + "}")
    with pytest.raises(ConfigError, match=r"config.json: JSON nested 100001 levels"):
        load_config(d / "config.json")


def test_json_depth_ignores_brackets_inside_strings():
    assert json_depth(b'{"a": "[[[[", "b": ["\\\\", ["\\"]]"]]}') == 3
    assert json_depth(b'["unterminated') is None


@pytest.mark.parametrize(
    "body, expected",
    [
        (b"\xff\xfe{}", "manifest.json: not UTF-8 text"),
        (b'{"rounds": [{"key": [1, 2], "root_token": 1' + b"0" * 5000 + b"}]}", "manifest.json: not valid JSON"),
        (
            b'{"rounds": [{"key": [1, 2], "root_token": 99999999999999999999}]}',
            r"manifest.json \(rounds\[0\].root_token\)",
        ),
        (b'{"rounds": [{"key": [1, 2], "root_token": "43107"}]}', r"manifest.json \(rounds\[0\].root_token\)"),
        (b'{"rounds": -5}', r"manifest.json \(rounds\): expected a list of round records or a round count"),
        (b'{"rounds": "5"}', r"manifest.json \(rounds\): expected a list of round records or a round count"),
        (b'{"encoding": {"format": "raw", "dtype": "object", "columns": 4}}', r"manifest.json \(encoding.dtype\)"),
        (
            b'{"encoding": {"format": "raw", "dtype": 5, "columns": 4}}',
            r"manifest.json \(encoding.dtype\): expected a numpy dtype .*, got unknown dtype 5",
        ),
        (b'{"encoding": {"format": "raw", "columns": {"draft": 0}}}', r"manifest.json \(encoding.columns\)"),
    ],
)
def test_manifest_fields_are_checked_with_the_field_named(tmp_path, body, expected):
    (tmp_path / "manifest.json").write_bytes(body)
    with pytest.raises(DumpError, match=expected):
        read_manifest(tmp_path)


def test_manifest_that_is_not_a_regular_file_is_an_error_not_ignored(tmp_path):
    (tmp_path / "manifest.json").mkdir()
    with pytest.raises(DumpError, match=r"manifest.json: is a directory, not a regular file"):
        read_manifest(tmp_path)


def test_config_threshold_beyond_float_is_a_config_error(tmp_path):
    p = tmp_path / "c.json"
    p.write_text('{"topKSpec": [[2]], "gamma": 1, "gammaThreshold": 1' + "0" * 400 + "}")
    with pytest.raises(ConfigError, match=r"gammaThreshold"):
        load_config(p)


# --- what counts as a dump file --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ENTRY_KINDS)
def test_non_regular_dump_entry_is_listed_and_its_round_not_replayed(tmp_path, capsys, kind):
    """draft_step_2 replaced by a non-file: the round is listed, not replayed with 2 steps and rc 0."""
    d = _article_copy(tmp_path)
    replace_entry(d / "draft_step_2_124_140", kind)
    g = group_directory(d)
    assert g.rounds == ()
    reasons = {s.what: s.reason for s in g.skipped}
    assert list(reasons) == ["round 124_140"]  # the entry is named in its round's entry: counted once
    entry = d / "draft_step_2_124_140"  # named by its path, as the other skipped files are
    assert reasons["round 124_140"].startswith(
        (f"{entry}: is a", f"{entry}: cannot be examined: Too many levels of symbolic links")
    )
    if entry.is_symlink() and kind != "symlink loop":  # the link is named, with its target
        assert f"symbolic link to {os.readlink(entry)}" in reasons["round 124_140"]
    for command in ("replay", "batch"):
        rc, out, err = _cli([command, d, "--no-progress"] if command == "batch" else [command, d], capsys)
        assert rc == 2, (out, err)  # its only round skipped: nothing replayed
        assert f"skipped round 124_140: {entry}: " in err and "Traceback" not in err
        assert out == ""


def test_symlink_to_a_regular_file_is_a_dump_file(tmp_path, capsys):
    d = _article_copy(tmp_path)
    (d / "draft_step_2_124_140").rename(tmp_path / "kept")
    (d / "draft_step_2_124_140").symlink_to(tmp_path / "kept")
    rc, out, _ = _cli(["replay", d], capsys)
    assert rc == 0 and "accepted path: R → 41824 → 41760 → 22870" in out


def test_a_dead_reader_process_is_a_dump_error(tmp_path, monkeypatch):
    """A worker killed (e.g. by the OOM killer) is a dump error, not a BrokenProcessPool traceback."""
    for k in range(16):
        shutil.copy(ARTICLE / "draft_step_0_123_139", tmp_path / f"draft_step_0_{123 + 8 * k}_139")
        shutil.copy(ARTICLE / "draft_step_1_124_140", tmp_path / f"draft_step_1_{124 + 8 * k}_140")
        shutil.copy(ARTICLE / "validate_124_140", tmp_path / f"validate_{124 + 8 * k}_140")
    monkeypatch.setattr(fastread, "_read_task", _die)
    items = fastread.plan_items(group_directory(tmp_path), {})
    with pytest.raises(DumpError, match="a reader process died"):
        list(
            fastread.iter_read_chunks(
                tmp_path, items, fastread.ReadOptions(), workers=2, chunk_rounds=2, progress=False
            )
        )


def _die(args):
    os._exit(3)


# --- the commands, in process --------------------------------------------------------------------


@pytest.mark.parametrize("command", ["replay", "batch", "stats", "compare", "recommend"])
def test_bombs_through_the_commands_are_listed_not_allocated(tmp_path, capsys, command):
    """The 192-byte terabyte .npy as a round's validate file: MemoryError out of every command."""
    d = _article_copy(tmp_path)
    (d / "validate_124_140").unlink()
    (d / "validate_124_140.npy").write_bytes(npy_header((10**6, 10**6)) + bytes(64))
    extra = {
        "batch": ["--no-progress"],
        "stats": ["--no-progress"],
        "compare": ["--no-progress"],
        "recommend": ["--budget", "8"],
    }
    result = []
    exc, peak = _peak_mb(lambda: result.append(_cli([command, d, *extra.get(command, [])], capsys)))
    assert exc is None, exc
    rc, out, err = result[0]
    assert rc in (1, 2) and "Traceback" not in err
    # recommend only says that nothing was left to estimate from; the others name the file
    assert command == "recommend" or "validate_124_140.npy: header claims 1000000 rows × 1000000 columns" in out + err
    assert peak < 200, peak


# --- the text fast path (np.loadtxt) reads exactly what the line-by-line reference reads --------------

_TEXT = st.text(alphabet="0123456789+- ,\t\n\r#x.e\u3000\x0c", max_size=60)


@settings(max_examples=400, deadline=None, database=None)
@given(text=_TEXT, as_float=st.booleans())
def test_text_fast_path_equals_the_reference(text, as_float):
    def outcome(parse):
        try:
            return parse().tolist()
        except DumpError as exc:
            return str(exc)

    fast = outcome(lambda: parse_text_matrix(text, "t", as_float))
    reference = outcome(lambda: _parse_text_lines(text.replace("\r\n", "\n"), "t", as_float))
    assert fast == reference


def test_pt_pickle_cannot_rewrite_the_storage_stand_ins(tmp_path):
    """BUILD on the storage reference set its key to a list: TypeError (unhashable) while reading."""
    pkl = _tensor_pickle(0, (2, 3), (3, 1)).replace(b"tQ", b"tQ}(X\x03\x00\x00\x00key]ub", 1)
    p = _write_pt(tmp_path / "b.pt", pkl, {"0": IDS.tobytes()})
    with pytest.raises(DumpError, match=r"b.pt: corrupt .pt archive: UnpicklingError: BUILD on StorageRef"):
        read_matrix(p, "draft")


def test_config_json_that_is_not_a_regular_file_is_an_error(tmp_path, capsys):
    """A FIFO config.json beside the dumps: ignored without a word (never opened, but not reported)."""
    d = _article_copy(tmp_path)
    (d / "config.json").unlink()
    os.mkfifo(d / "config.json")
    rc, _, err = _cli(["replay", d], capsys)
    assert rc == 2 and "config.json: is a FIFO (named pipe), not a regular file" in err


def test_undecodable_file_names_are_listed_printably(tmp_path, capsys):
    """A name that is not UTF-8 made the summary unprintable on a strict UTF-8 stdout."""
    d = _article_copy(tmp_path)
    (d / os.fsdecode(b"notes\xff.bin")).write_bytes(b"x")
    (d / "draft_step_\u0663_124_140").write_text("1\n")  # an Arabic-Indic 3 is not a step number
    rc, out, err = _cli(["replay", d], capsys)
    assert rc == 1
    out.encode("utf-8")  # strict: no lone surrogates
    err.encode("utf-8")
    assert "notes\\xff.bin: name matches neither" in err and "draft_step_\u0663_124_140: name matches neither" in err


def test_counters_beyond_int64_and_huge_step_numbers(tmp_path, capsys):
    """Counters of 23 digits: batch raised OverflowError. draft_step_10**9: a billion-entry list."""
    d = tmp_path / "d"
    d.mkdir()
    shutil.copy(ARTICLE / "config.json", d)
    big = "99999999999999999999999"
    for name in ("draft_step_0_123_139", "draft_step_1_124_140", "validate_124_140"):
        shutil.copy(ARTICLE / name, d / name.replace("124", big).replace("123", big))
    shutil.copy(ARTICLE / "draft_step_1_124_140", d / "draft_step_1000000000_124_140")
    shutil.copy(ARTICLE / "validate_124_140", d / "validate_124_140")
    g = group_directory(d)
    reasons = {s.what: s.reason for s in g.skipped}
    assert reasons[f"validate_{big}_140"] == "step or counters outside the int64 range"
    assert reasons["round 124_140"] == (
        "missing draft_step_0_123_139, draft_step_1_124_140, draft_step_2_124_140, draft_step_3_124_140, "
        "draft_step_4_124_140 and 999999995 more"
    )
    for command in (["replay", d], ["batch", d, "--no-progress"]):
        rc, out, err = _cli(command, capsys)
        assert rc in (1, 2) and "Traceback" not in err


def test_signalling_nan_scores_are_reported_without_a_warning(tmp_path):
    """A flipped bit made a float32 signalling NaN: numpy printed a RuntimeWarning when widening it."""
    scores = np.full(IDS.shape, 0.25, dtype=np.float32)
    scores.view(np.uint32)[0, 1] = 0x7FA00000
    np.savez(tmp_path / "s.npz", ids=IDS, scores=scores)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(DumpError, match=r"s.npz \(scores\): NaN among the scores of real tokens"):
            read_matrix(tmp_path / "s.npz", "draft")


def test_pt_broadcast_view_cannot_expand_a_small_file_to_a_gigabyte(tmp_path):
    """Stride 0 is valid torch, but size (2**26, 2) from a 6-element storage copied 1 GiB out of 400 bytes."""
    p = _write_pt(tmp_path / "wide.pt", _tensor_pickle(0, (2**26, 2), (0, 1)), {"0": IDS.tobytes()})
    exc, peak = _peak_mb(lambda: read_matrix(p, "draft"))
    assert isinstance(
        exc, DumpError
    ) and "wide.pt (tensor): tensor of shape (67108864, 2) (stride (0, 1)) expands to 1,073,741,824 bytes" in str(
        exc
    ), exc
    assert peak < 16, peak
