"""The direct .npz reader (replay.io.formats.npyfile._read_stored_npz) against the zipfile path.

read_npz reads an archive as np.savez writes it straight from its bytes, and hands everything else
to BoundedZip/zipfile. These tests hold the two to the same answer: for np.savez's own files the
direct path is taken and gives the zipfile path's arrays; for every damaged variant (each byte
changed, each zip field lying, truncations, compressed members, other names) read_npz gives what
the zipfile path alone gives: the same arrays or the same error, naming the file and member.
"""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from replay.io.formats import npyfile
from replay.io.formats.npyfile import read_npz
from replay.util.bounded import read_file_bytes
from replay.util.errors import DumpError
from tests.dump_mutations import ZIP_FIELDS, npy_header, set_zip_field, zip_headers

NAMES = ("ids", "scores", "parents", "node_logprobs")


def _savez(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _outcome(path):
    """What read_npz gives: ('ok', found, {name: (dtype, shape, bytes, F-contiguous)}) or ('error', text)."""
    try:
        arrays, found = read_npz(path, NAMES)
    except DumpError as exc:
        return ("error", str(exc))
    return ("ok", found, {k: (v.dtype.str, v.shape, v.tobytes(), v.flags.f_contiguous) for k, v in arrays.items()})


def _both(path, monkeypatch):
    """(read_npz's outcome, the zipfile path's outcome) for the file at ``path``."""
    fast = _outcome(path)
    with monkeypatch.context() as m:
        m.setattr(npyfile, "_read_stored_npz", lambda *a: None)
        slow = _outcome(path)
    return fast, slow


SAMPLES = {
    "draft": {"ids": np.arange(8, dtype=np.int64).reshape(1, 8), "scores": np.linspace(-3, 0, 8, dtype=np.float32)},
    "validate": {
        "ids": np.arange(12, dtype=np.int32).reshape(3, 4),
        "scores": np.zeros((3, 4)),
        "parents": np.array([-1, 0, 1]),
    },
    "fortran, 0-d, empty": {
        "ids": np.asfortranarray(np.arange(6, dtype=np.uint16).reshape(2, 3)),
        "scores": np.float64(2.5),
        "parents": np.zeros((0, 8), dtype=np.int8),
        "other": np.ones(3, dtype=bool),
    },
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_savez_files_take_the_direct_path_with_zipfiles_arrays(tmp_path, monkeypatch, name):
    p = tmp_path / "m.npz"
    p.write_bytes(_savez(**SAMPLES[name]))
    assert npyfile._read_stored_npz(read_file_bytes(p, 1 << 30), p, NAMES) is not None  # the direct path read it
    fast, slow = _both(p, monkeypatch)
    assert fast[0] == "ok" and fast == slow
    arrays, _ = read_npz(p, NAMES)
    for k, v in arrays.items():
        assert v.flags.writeable and v.flags.aligned
        np.testing.assert_array_equal(v, SAMPLES[name][k])


def test_every_changed_byte_gives_what_zipfile_gives(tmp_path, monkeypatch):
    data = _savez(**SAMPLES["validate"])
    p = tmp_path / "m.npz"
    differing = []
    for i in range(len(data)):
        for value in {data[i] ^ 0x01, data[i] ^ 0x80, 0x00, 0xFF}:
            p.write_bytes(data[:i] + bytes([value]) + data[i + 1 :])
            fast, slow = _both(p, monkeypatch)
            if fast != slow:
                differing.append((i, value, fast, slow))
    assert differing == []


def test_lying_zip_fields_and_truncations_give_what_zipfile_gives(tmp_path, monkeypatch):
    data = _savez(**SAMPLES["draft"])
    p = tmp_path / "m.npz"
    variants = [data[:n] for n in range(0, len(data), 7)] + [data + b"x", b"junk" + data, data[:-2] + b"\x01\x00x"]
    for kind, at in zip_headers(data):
        for field in ZIP_FIELDS:
            for value in (0, 1, 8, 0xFFFF, 0xFFFFFFFF):
                variants.append(set_zip_field(data, at, kind, field, value))
    for v in variants:
        p.write_bytes(v)
        fast, slow = _both(p, monkeypatch)
        assert fast == slow, (v, fast, slow)


def _write_zip(path, members, compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, payload in members:
            z.writestr(name, payload)


def test_unusual_archives_fall_back_and_still_read_or_name_the_member(tmp_path, monkeypatch):
    ids = np.arange(8).reshape(2, 4)
    good = npy_header(ids.shape) + ids.tobytes()
    cases = {
        "compressed": ([("ids.npy", good)], zipfile.ZIP_DEFLATED, "ok"),
        "other name": ([("idz.npy", good)], zipfile.ZIP_STORED, "ok"),  # read_matrix then says no 'ids' array
        "lying header": ([("ids.npy", npy_header((3, 4)) + ids.tobytes())], zipfile.ZIP_STORED, "error"),
        "python 2 header": ([("ids.npy", good.replace(b"(2, 4)", b"(2L, 4L)"))], zipfile.ZIP_STORED, "error"),
        "duplicate": ([("ids.npy", good), ("ids.npy", good)], zipfile.ZIP_STORED, "error"),
    }
    for name, (members, method, expected) in cases.items():
        p = tmp_path / f"{name.replace(' ', '_')}.npz"
        with pytest.warns(UserWarning) if name == "duplicate" else _no_warning():
            _write_zip(p, members, method)
        direct = npyfile._read_stored_npz(read_file_bytes(p, 1 << 30), p, NAMES)
        assert (direct is not None) == (name == "other name"), name  # only a plain stored archive is read directly
        fast, slow = _both(p, monkeypatch)
        assert fast == slow and fast[0] == expected, (name, fast)
        if expected == "error" and name != "duplicate":
            assert p.name in fast[1] and "ids.npy" not in fast[1] and "(ids)" in fast[1], fast[1]


def test_bad_crc_is_named_like_zipfile_names_it(tmp_path, monkeypatch):
    data = bytearray(_savez(**SAMPLES["draft"]))
    data[data.index(b"NUMPY") + 130] ^= (
        0xFF  # a data byte of ids.npy (after its 128-byte header): its CRC no longer matches
    )
    p = tmp_path / "crc.npz"
    p.write_bytes(bytes(data))
    fast, slow = _both(p, monkeypatch)
    assert fast == slow and fast[0] == "error"
    assert "crc.npz" in fast[1] and "ids.npy" in fast[1] and "CRC" in fast[1], fast[1]


def test_the_header_shortcut_parses_like_numpy():
    """Headers in np.save's form take the regex; near-misses fall back; both agree with numpy."""
    texts = [
        npy_header(s, d, f)[10:]
        for s in [(), (5,), (1, 8), (0, 3, 2)]
        for d in ("<i8", "|u1", ">f4")
        for f in (False, True)
    ]
    assert all(npyfile._common_header(t) is not None for t in texts)
    near = [t.replace(b"(1, 8)", b"(01, 8)") for t in texts] + [t.replace(b"(5,)", b"(5)") for t in texts]
    near += [t.replace(b"<i8", b"<i3") for t in texts] + [t.replace(b", }", b"}") for t in texts]
    for t in texts + near:
        ours = npyfile._common_header(t)
        try:
            theirs = np.lib.format.read_array_header_1_0(io.BytesIO(len(t).to_bytes(2, "little") + t))
        except Exception:  # noqa: BLE001 - numpy refuses it: so must the shortcut
            theirs = None
        if ours is not None:
            assert ours == theirs, t
        assert (ours is None) == (t not in texts), t


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
