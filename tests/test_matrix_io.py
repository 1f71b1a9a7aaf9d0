"""Every encoding reads the same matrix; bad files give errors naming file and field."""

import math
import pickle
import struct
import zipfile

import numpy as np
import pytest

from replay.io.formats.matrix_io import RawSpec, read_matrix
from replay.io.formats.ptfile import load_pt
from replay.util.errors import DumpError

IDS = np.array([[41760, 35740, 7], [45315, 41760, 8]], dtype=np.int64)


def _write_pt_like(path, pkl_bytes: bytes, storages: dict[str, bytes]) -> None:
    """A torch.save-style zip archive, built without torch."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pkl_bytes)
        for key, raw in storages.items():
            z.writestr(f"archive/data/{key}", raw)


@pytest.mark.parametrize("sep", [" ", ",", "\t", ", "])
def test_text_with_any_separator_and_no_extension(tmp_path, sep):
    p = tmp_path / "draft_step_1_124_140"
    p.write_text("\n".join(sep.join(str(v) for v in row) for row in IDS) + "\n\n# a comment\n")
    assert np.array_equal(read_matrix(p, "draft").ids, IDS)


def test_npy_npz_and_raw_agree(tmp_path):
    np.save(tmp_path / "a.npy", IDS.astype(np.int32))
    np.savez(tmp_path / "b.npz", ids=IDS, scores=np.full(IDS.shape, 0.25), parents=np.array([1, 2]))
    (tmp_path / "c.bin").write_bytes(IDS.astype("<i4").tobytes())
    a = read_matrix(tmp_path / "a.npy", "draft")
    b = read_matrix(tmp_path / "b.npz", "draft")
    c = read_matrix(tmp_path / "c.bin", "draft", RawSpec("int32", {"draft": 3}))
    for m in (a, b, c):
        assert np.array_equal(m.ids, IDS)
    assert b.logp == pytest.approx(np.full(IDS.shape, math.log(0.25)))
    assert b.parents.tolist() == [1, 2]


def test_raw_spec_parsing():
    spec = RawSpec.parse("int32:draft=16,validate=1")
    assert spec.columns == {"draft": 16, "validate": 1} and not spec.force
    assert RawSpec.parse("int16:4:force").force
    with pytest.raises(DumpError, match="--raw"):
        RawSpec.parse("int32")


def _u(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def test_pt_tensor_read_without_torch(tmp_path):
    """The pickle torch.save writes for a [2, 3] int64 tensor, assembled opcode by opcode."""
    pid = b"(" + _u("storage") + b"ctorch\nLongStorage\n" + _u("0") + _u("cpu") + b"K\x06tQ"
    args = b"(" + pid + b"K\x00" + b"K\x02K\x03\x86" + b"K\x03K\x01\x86" + b"\x89}t"
    pkl = b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n" + args + b"R."
    path = tmp_path / "m.pt"
    _write_pt_like(path, pkl, {"0": IDS.astype("<i8").tobytes()})
    assert np.array_equal(read_matrix(path, "draft").ids, IDS)


def test_torch_saved_tensor_and_dict_if_torch_available(tmp_path):
    torch = pytest.importorskip("torch")
    torch.save(torch.tensor(IDS), tmp_path / "t.pt")
    torch.save({"ids": torch.tensor(IDS), "scores": torch.full(IDS.shape, -1.0)}, tmp_path / "d.pt")
    assert np.array_equal(read_matrix(tmp_path / "t.pt", "draft").ids, IDS)
    d = read_matrix(tmp_path / "d.pt", "draft")
    assert np.array_equal(d.ids, IDS) and np.allclose(d.logp, -1.0)
    # a transposed (non-contiguous) tensor keeps its strides
    torch.save(torch.tensor(IDS).t(), tmp_path / "tt.pt")
    assert np.array_equal(read_matrix(tmp_path / "tt.pt", "draft").ids, IDS.T)


class _Evil:
    def __reduce__(self):
        import os

        return (os.system, ("echo pwned > /tmp/specreplay_pwned",))


def test_pickled_pt_is_refused_without_running_it(tmp_path):
    path = tmp_path / "evil.pt"
    _write_pt_like(path, pickle.dumps(_Evil(), protocol=2), {})
    with pytest.raises(DumpError, match="evil.pt.*refusing to load (posix|os).system"):
        load_pt(path)


def test_pickled_npy_is_refused(tmp_path):
    path = tmp_path / "obj.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DumpError, match="obj.npy.*refusing to unpickle"):
        read_matrix(path, "draft")


def test_truncated_npy_and_raw(tmp_path):
    np.save(tmp_path / "t.npy", IDS)
    data = (tmp_path / "t.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(data[: len(data) - 5])
    with pytest.raises(DumpError, match="t.npy.*truncated"):
        read_matrix(tmp_path / "t.npy", "draft")
    (tmp_path / "r.bin").write_bytes(IDS.astype("<i4").tobytes()[:-2])
    with pytest.raises(DumpError, match="r.bin.*not a whole number of rows"):
        read_matrix(tmp_path / "r.bin", "draft", RawSpec("int32", {"draft": 3}))


def test_ragged_and_non_integer_text(tmp_path):
    p = tmp_path / "validate_1_1"
    p.write_text("1 2 3\n4 5\n")
    with pytest.raises(DumpError, match=r"validate_1_1 \(ids\): ragged rows: line 2 has 2 values, line 1 has 3"):
        read_matrix(p, "validate")
    p.write_text("1 2 3\n4 x 6\n")
    with pytest.raises(DumpError, match=r"validate_1_1 \(ids\): line 2: 'x' is not an integer token id"):
        read_matrix(p, "validate")
    p.write_text("")
    with pytest.raises(DumpError, match="empty file"):
        read_matrix(p, "validate")


def test_scores_probability_and_logprob_detection(tmp_path):
    p = tmp_path / "d.npz"
    np.savez(p, ids=IDS, scores=np.array([[0.5, 0.25, 0.1], [1.0, 0.0, 0.0]]))
    m = read_matrix(p, "draft")
    assert m.logp[0, 0] == pytest.approx(math.log(0.5)) and m.logp[1, 1] == -math.inf
    np.savez(p, ids=IDS, scores=np.array([[0.5, -0.2, 0.1], [1.0, 0.0, 0.0]]))
    with pytest.raises(DumpError, match=r"\(scores\): log-probabilities must be <= 0, found 0.5 \(row 0 \(0-based\)\)"):
        read_matrix(p, "draft")
    # where the bad value is, not only that there is one
    np.savez(p, ids=IDS, scores=np.array([[-0.5, -0.2, -1.0], [-1.0, np.nan, -2.0]]))
    with pytest.raises(
        DumpError, match=r"\(scores\): NaN among the scores of real tokens, row 1 \(0-based\), column 1 holds NaN$"
    ):
        read_matrix(p, "draft")
    np.savez(p, ids=IDS, scores=np.array([[0.5, 0.2, 0.1], [1.0, 1.5, 0.0]]))
    with pytest.raises(DumpError, match=r"probabilities must lie in \[0, 1\], found 1.5 \(row 1 \(0-based\)\)"):
        read_matrix(p, "draft", score_kind="prob")
    np.savez(p, ids=IDS, scores=np.ones((3, 3)))
    with pytest.raises(DumpError, match=r"\(scores\): the scores are 3 rows × 3 columns, the ids 2 rows × 3 columns"):
        read_matrix(p, "draft")


def test_companion_scores_and_parents_files(tmp_path):
    (tmp_path / "draft_step_1_5_5").write_text("1 2\n3 4\n")
    (tmp_path / "draft_step_1_5_5.scores").write_text("0.6 0.4\n0.7 0.3\n")
    (tmp_path / "draft_step_1_5_5.parents").write_text("2\n1\n")
    m = read_matrix(
        tmp_path / "draft_step_1_5_5",
        "draft",
        None,
        tmp_path / "draft_step_1_5_5.scores",
        tmp_path / "draft_step_1_5_5.parents",
    )
    assert m.parents.tolist() == [2, 1]
    assert m.logp[1, 0] == pytest.approx(math.log(0.7))


def test_float_ids_are_rejected(tmp_path):
    np.save(tmp_path / "f.npy", IDS.astype(np.float32))
    with pytest.raises(DumpError, match=r"f.npy \(ids\): expected integer token ids, got dtype float32"):
        read_matrix(tmp_path / "f.npy", "draft")


def test_corrupt_npz_is_not_called_a_pickle(tmp_path):
    np.savez(tmp_path / "c.npz", ids=IDS)
    data = (tmp_path / "c.npz").read_bytes()
    (tmp_path / "c.npz").write_bytes(b"garbage!" + data[8:])  # zip magic destroyed
    with pytest.raises(DumpError, match=r"c.npz \(ids.npy\): corrupt or truncated numpy file"):
        read_matrix(tmp_path / "c.npz", "draft")
    (tmp_path / "p.npy").write_bytes(pickle.dumps([1, 2, 3], protocol=2))  # a bare pickle named .npy
    with pytest.raises(DumpError, match=r"p.npy: holds pickled objects; refusing to unpickle"):
        read_matrix(tmp_path / "p.npy", "draft")
