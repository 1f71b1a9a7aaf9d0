"""Fuzz every dump reader through the commands users run: mutated copies of the bundled samples.

Each case copies one small corpus (tests/dump_mutations.py: the article's round as text, three
synthetic rounds as .npz, .npy, .pt, raw and text), damages it one way, and runs ``replay --json``,
``batch --json`` (and sometimes ``stats``) in process through ``replay.cli.main``, under an
address-space limit. Whatever the damage:

- no exception leaves ``main``, the exit status is 0, 1 or 2, stderr holds no traceback, a case
  finishes in seconds and stays within 2 GiB more address space;
- ``replay`` and ``batch`` agree (exit status and every JSON line);
- damage a format can detect (zip CRCs and headers, .npy sizes, bombs, entries that are not files)
  either leaves the replay identical or is visible: the damaged file is named and the rounds still
  printed are rounds of the undamaged replay, unchanged;
- equivalent rewritings (BOM, CRLF, comments, separators, compression, byte order, Fortran order)
  replay identically;
- where a .pt view or an .npy header was tampered with and still read, the values are the ones an
  independent decoder finds in the file.

CI runs a fixed set of cases (derandomized); ``pytest -m fuzz_long tests/test_fuzz_readers.py`` runs
SPECREPLAY_FUZZ_EXAMPLES (default 3000) random ones; the numbers of the last long run are in
docs/dump-format.md ("Limits").
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from replay import cli
from replay.io.formats.matrix_io import read_matrix
from replay.util.bounded import MAX_MATRIX_CELLS, expansion_allowance
from replay.util.errors import DumpError
from tests.dump_mutations import (
    ENTRY_KINDS,
    MB,
    SYNTH,
    ZIP_FIELDS,
    build_corpora,
    data_files,
    deep_json,
    deflate_bomb_npz,
    npy_header,
    pt_dict_bytes,
    replace_entry,
    set_zip_field,
    zip_headers,
)

# A numpy RuntimeWarning from the reading code is a wart a user sees on stderr: make it fail the case.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning:replay")

ROOT = Path(__file__).resolve().parent.parent
CI_EXAMPLES = 250
LONG_EXAMPLES = int(os.environ.get("SPECREPLAY_FUZZ_EXAMPLES", "3000"))
CASE_SECONDS = 30.0  # a case takes ~0.2 s; this only catches a hang or an unbounded read
HEADROOM = 2 << 30  # address space a case may add (glibc reserves 64 MiB per thread arena)
RSS_GROWTH = 768 << 20  # resident memory the whole run may add over the corpora's baseline
STATS_EVERY = 8  # stats costs ~0.5 s: run it on one case in this many


# --- running the commands -----------------------------------------------------------------------


def run_cli(argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def _vm_size() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@contextlib.contextmanager
def address_space_limit(extra: int):
    """RLIMIT_AS = what the process maps now + ``extra``, restored afterwards."""
    vm = _vm_size()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if vm is None:
        yield
        return
    limit = vm + extra if hard == resource.RLIM_INFINITY else min(hard, vm + extra)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# --- mutations ----------------------------------------------------------------------------------

DETECTABLE, EQUIVALENT, ANY = "detectable", "equivalent", "any"  # what the property may demand


@dataclass(frozen=True)
class Mutation:
    kind: str
    target: str
    params: tuple
    contract: str  # DETECTABLE / EQUIVALENT / ANY


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
MANIFEST_FIELDS = (
    ("layout",),
    ("score_kind",),
    ("step0_offset",),
    ("encoding",),
    ("encoding", "dtype"),
    ("encoding", "columns"),
    ("rounds",),
    ("rounds", 0),
    ("rounds", 0, "key"),
    ("rounds", 0, "root_token"),
    ("config",),
    ("config", "gamma"),
    ("config", "topKSpec"),
    ("config", "topHead"),
    ("config", "treeType"),
    ("config", "gammaThreshold"),
    ("version",),
)
CONFIG_FIELDS = (("gamma",), ("topKSpec",), ("topHead",), ("treeType",), ("gammaThreshold",), ("specTree",))
WEIRD_CELLS = (
    "1_0",
    "\u0663",
    str(2**63),
    str(-(2**63) - 1),
    "nan",
    "inf",
    "-1",
    "-7",
    "1e3",
    "0x1F",
    "\ufeff",
    "−1",
    "",
    "99999999999",
)
NPY_DESCRS = ("<i4", ">i8", "<u8", "|i1", "|b1", "<f8", "<f2", "<c8", "|O", "<U3", "|V8")


@st.composite
def mutations(draw, corpus: str, files: list[str], side: list[str]) -> Mutation:
    target = draw(st.sampled_from(files))
    ext = Path(target).suffix
    kinds = ["flip", "truncate", "append", "insert", "entry", "bomb", "equivalent"]
    if ext == ".npy":
        kinds.append("npy_header")
    if ext in (".npz", ".pt"):
        kinds += ["zip_field", "member", "member"]
    if ext == ".pt":
        kinds.append("pt_view")
    if ext in ("", ".txt"):
        kinds.append("text_cell")
    if side:
        kinds += ["json", "json"]
    kind = draw(st.sampled_from(kinds))
    zipped = ext in (".npz", ".pt")
    if kind == "flip":
        flips = draw(st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(1, 255)), min_size=1, max_size=4))
        return Mutation(kind, target, tuple(flips), DETECTABLE if zipped else ANY)
    if kind == "truncate":
        sized = zipped or ext == ".npy"
        return Mutation(kind, target, (draw(st.integers(0, 1 << 16)),), DETECTABLE if sized else ANY)
    if kind in ("append", "insert"):
        extra = draw(st.binary(min_size=1, max_size=64))
        sized = zipped or ext == ".npy"
        return Mutation(kind, target, (draw(st.integers(0, 1 << 16)), extra), DETECTABLE if sized else ANY)
    if kind == "entry":
        return Mutation(kind, target, (draw(st.sampled_from(ENTRY_KINDS)),), DETECTABLE)
    if kind == "bomb":
        return Mutation(kind, target, (draw(st.sampled_from(("refused", "refused", "large"))),), ANY)
    if kind == "equivalent":
        return Mutation(kind, target, (draw(st.integers(0, 5)),), EQUIVALENT)
    if kind == "npy_header":
        dims = st.one_of(st.integers(0, 20), st.integers(-3, 1 << 40), st.sampled_from((10**6, 2**62, 2**63 - 1)))
        shape = tuple(draw(st.lists(dims, min_size=0, max_size=4)))
        return Mutation(kind, target, (shape, draw(st.sampled_from(NPY_DESCRS)), draw(st.booleans())), ANY)
    if kind == "zip_field":
        field = draw(st.sampled_from(sorted(ZIP_FIELDS)))
        value = draw(st.one_of(st.integers(0, 16), st.integers(0, 1 << 32), st.sampled_from((0xFFFF, 0xFFFFFFFF, 99))))
        return Mutation(kind, target, (draw(st.integers(0, 15)), field, value), DETECTABLE)
    if kind == "member":  # damage inside a member, then re-zip with a valid CRC: reaches the parsers
        flips = draw(st.lists(st.tuples(st.integers(0, 1 << 12), st.integers(1, 255)), max_size=3))
        cut = draw(st.none() | st.integers(0, 1 << 12))
        extra = draw(st.binary(max_size=16))
        return Mutation(kind, target, (draw(st.integers(0, 7)), tuple(flips), cut, extra, draw(st.booleans())), ANY)
    if kind == "pt_view":
        ints = st.one_of(st.integers(-3, 12), st.integers(-(1 << 40), 1 << 40))
        size = tuple(draw(st.lists(st.integers(-2, 12) | st.integers(0, 1 << 33), min_size=0, max_size=3)))
        stride = tuple(draw(st.lists(ints, min_size=len(size), max_size=len(size))))
        return Mutation(kind, target, (draw(ints), size, stride), ANY)
    if kind == "text_cell":
        cell = draw(st.sampled_from(WEIRD_CELLS) | st.text(max_size=6))
        return Mutation(kind, target, (draw(st.integers(0, 100)), draw(st.integers(0, 100)), cell), ANY)
    name = draw(st.sampled_from(side))
    fields = MANIFEST_FIELDS if name == "manifest.json" else CONFIG_FIELDS
    how = draw(st.sampled_from(("deep", "value", "value", "value", "bytes", "non-utf8")))
    if how == "deep":
        params = (how, draw(st.sampled_from((60, 65, 1000, 100_000))))
    elif how == "value":
        params = (how, draw(st.sampled_from(fields)), draw(json_values))
    else:
        params = (how, draw(st.binary(max_size=40)))
    return Mutation("json", name, params, ANY)


def _set_path(obj, path, value):
    for key in path[:-1]:
        if isinstance(obj, dict) and key in obj:
            obj = obj[key]
        elif isinstance(obj, list) and isinstance(key, int) and key < len(obj):
            obj = obj[key]
        else:
            return
    if isinstance(obj, dict):
        obj[path[-1]] = value
    elif isinstance(obj, list) and isinstance(path[-1], int) and path[-1] < len(obj):
        obj[path[-1]] = value


def _synth_arrays(stem: str) -> dict[str, np.ndarray]:
    with np.load(SYNTH / f"{stem}.npz") as z:
        return {"ids": z["ids"], "scores": z["scores"]}


def _equivalent(p: Path, variant: int) -> None:
    """Rewrite ``p`` in a form every reader must read as the same matrix."""
    ext, data = p.suffix, p.read_bytes()
    if ext == ".npz":
        with np.load(p) as z:
            arrays = {k: z[k] for k in z.files}
        with open(p, "wb") as fh:
            (np.savez_compressed if variant % 2 else np.savez)(fh, **arrays)
    elif ext == ".npy":
        arr = np.load(p)
        arr = np.asfortranarray(arr) if variant % 2 else arr.astype(arr.dtype.newbyteorder(">"))
        np.save(p, arr)
    elif ext in ("", ".txt"):
        text = data.decode()
        forms = [
            lambda t: "\ufeff" + t,
            lambda t: t.replace("\n", "\r\n"),
            lambda t: "# a comment\n\n" + t.replace("\n", "\n\n"),
            lambda t: t.replace(" ", ", "),
            lambda t: t.replace(" ", "\t"),
            lambda t: "\n".join("  " + line + "  " for line in t.split("\n")),
        ]
        p.write_bytes(forms[variant % len(forms)](text).encode())
    elif ext == ".pt":
        p.write_bytes(pt_dict_bytes(_synth_arrays(p.name[: -len(".pt")])))
    # raw binary has no other form


def _bomb(p: Path, variant: str) -> None:
    """Replace ``p`` by a file that claims (refused) or holds (large, within the limits) far more."""
    ext = p.suffix
    if ext == ".npy":
        p.write_bytes(
            npy_header((10**6, 10**6)) + bytes(64) if variant == "refused" else npy_header((4096, 256)) + bytes(8 * MB)
        )
    elif ext == ".npz":
        p.write_bytes(deflate_bomb_npz(40) if variant == "refused" else deflate_bomb_npz(8, (8 * MB // 8 // 256, 256)))
    elif ext == ".pt":
        pkl = b"\x80\x04\x8e" + (1 << 40).to_bytes(8, "little") + b"abc."
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("archive/data.pkl", pkl)
        p.write_bytes(buf.getvalue())
    elif ext == ".bin":
        p.write_bytes(bytes(4 * MB) if variant == "large" else bytes(3))
    else:
        p.write_bytes(b" ".join([b"7"] * (MB if variant == "large" else 10)) + b"\n")


def apply(d: Path, m: Mutation) -> None:
    p = d / m.target
    if m.kind == "json":
        _apply_json(p, m.params)
        return
    if m.kind == "entry":
        replace_entry(p, m.params[0])
        return
    if m.kind == "bomb":
        _bomb(p, m.params[0])
        return
    if m.kind == "equivalent":
        _equivalent(p, m.params[0])
        return
    if m.kind == "long_line":  # the brief's 10 MB single line
        p.write_bytes(b" ".join([b"41760"] * (10 * MB // 6)) + b"\n")
        return
    data = bytearray(p.read_bytes())
    if m.kind == "flip":
        for pos, mask in m.params:
            if data:
                data[pos % len(data)] ^= mask
    elif m.kind == "truncate":
        data = data[: m.params[0] % (len(data) + 1)]
        if not m.params[0] % 7:
            data = data[:0]
    elif m.kind == "append":
        data += m.params[1]
    elif m.kind == "insert":
        at = m.params[0] % (len(data) + 1)
        data[at:at] = m.params[1]
    elif m.kind == "npy_header":
        shape, descr, fortran = m.params
        hlen = int.from_bytes(data[8:10], "little")
        data = bytearray(npy_header(shape, descr, fortran)) + data[10 + hlen :]
    elif m.kind == "zip_field":
        headers = zip_headers(bytes(data))
        if headers:
            which, field, value = m.params
            kind, offset = headers[which % len(headers)]
            data = bytearray(set_zip_field(bytes(data), offset, kind, field, value))
    elif m.kind == "member":
        data = bytearray(_damage_member(bytes(data), *m.params))
    elif m.kind == "pt_view":
        arrays = _synth_arrays(p.name[: -len(".pt")])
        data = bytearray(pt_dict_bytes(arrays, {"ids": m.params}))
    elif m.kind == "text_cell":
        row, col, cell = m.params
        lines = data.decode().splitlines()
        cells = lines[row % len(lines)].split()
        cells[col % len(cells)] = cell
        lines[row % len(lines)] = " ".join(cells)
        data = bytearray(("\n".join(lines) + "\n").encode())
    p.write_bytes(bytes(data))


def _damage_member(data: bytes, which: int, flips, cut, extra: bytes, deflate: bool) -> bytes:
    """Flip/cut/extend one member's bytes and write the archive again, CRCs recomputed."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        members = [(info.filename, z.read(info)) for info in z.infolist()]
    name, body = members[which % len(members)]
    body = bytearray(body)
    for pos, mask in flips:
        if body:
            body[pos % len(body)] ^= mask
    if cut is not None:
        body = body[: cut % (len(body) + 1)]
    body += extra
    members[which % len(members)] = (name, bytes(body))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as z:
        for n, b in members:
            z.writestr(n, b)
    return out.getvalue()


def _apply_json(p: Path, params: tuple) -> None:
    how = params[0]
    if how == "deep":
        p.write_bytes(deep_json(params[1]))
    elif how == "value":
        body = json.loads(p.read_text())
        _set_path(body, params[1], params[2])
        p.write_text(json.dumps(body))
    elif how == "bytes":
        p.write_bytes(params[1])
    else:
        p.write_bytes(b'{"layout": "\xff\xfe"}' + params[1])


# --- oracles ------------------------------------------------------------------------------------


def pt_view_oracle(ids: np.ndarray, offset, size, stride, file_bytes: int) -> np.ndarray | None:
    """The values a tensor view selects from ``ids``' storage; None where the reader must refuse.

    Refused: a negative offset, size or stride, sizes and strides of different lengths, more than
    MAX_MATRIX_CELLS values or more bytes than the file's expansion allowance, or any selected
    element past the storage.
    """
    flat = ids.reshape(-1)
    if offset < 0 or any(v < 0 for v in (*size, *stride)) or len(size) != len(stride):
        return None
    cells = int(np.prod(size, dtype=object))
    if cells > MAX_MATRIX_CELLS or cells * flat.itemsize > expansion_allowance(file_bytes):
        return None
    if cells == 0:  # (0, 10**8): no index arrays as long as the other dimensions
        return np.empty(size, dtype=flat.dtype)
    at = np.full(size, offset, dtype=np.int64)
    for axis, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[axis] = n
        at = at + np.arange(n, dtype=np.int64).reshape(shape) * s
    if at.size and int(at.max()) >= flat.shape[0]:
        return None
    return flat[at]


def check_direct_read(d: Path, m: Mutation) -> None:
    """For tampered .pt views and .npy headers: accepted values are exactly those in the file."""
    p = d / m.target
    try:
        got = read_matrix(p, "draft").ids
    except DumpError:
        got = None
    if m.kind == "pt_view":
        offset, size, stride = m.params
        want = pt_view_oracle(_synth_arrays(p.name[: -len(".pt")])["ids"], offset, size, stride, p.stat().st_size)
        if got is not None:
            assert want is not None and want.ndim == 2 and np.array_equal(got, want), (m, got)
        elif want is not None and want.ndim == 2 and want.size:
            raise AssertionError(f"a valid view was refused: {m}")
    elif m.kind == "npy_header" and got is not None:
        assert np.array_equal(got, np.load(p, allow_pickle=False).astype(np.int64)), m


# --- the property -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Baseline:
    path: Path
    stdout: str
    max_rss: int  # the process's peak resident bytes once the corpora were replayed


def _max_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict[str, Baseline]:
    out = {}
    for c in build_corpora(tmp_path_factory.mktemp("corpora")):
        rc, stdout, stderr = run_cli(["replay", c.path, "--json"])
        assert rc == 0 and stdout.count("\n") >= 1, stderr
        out[c.name] = Baseline(c.path, stdout, 0)
    rss = _max_rss()
    out = {name: Baseline(b.path, b.stdout, rss) for name, b in out.items()}
    return out


def run_case(corpora: dict[str, Baseline], data) -> None:
    name = data.draw(st.sampled_from(sorted(corpora)), label="corpus")
    base = corpora[name]
    side = [n for n in ("manifest.json", "config.json") if (base.path / n).exists()]
    m = data.draw(mutations(name, data_files(base.path), side), label="mutation")
    with_stats = data.draw(st.integers(0, STATS_EVERY - 1), label="stats") == 0
    event(f"mutation: {m.kind}")
    work = Path(tempfile.mkdtemp(prefix="fuzz-", dir=base.path.parent))
    d = work / name
    try:
        shutil.copytree(base.path, d, symlinks=True)
        apply(d, m)
        started = time.monotonic()
        with address_space_limit(HEADROOM):
            rc, out, err = run_cli(["replay", d, "--json"])
            brc, bout, berr = run_cli(["batch", d, "--json", "--workers", "1", "--no-progress"])
            if with_stats:
                src, _, serr = run_cli(["stats", d, "--no-progress"])
                assert src in (0, 1, 2) and "Traceback" not in serr, (m, serr)
            if m.kind in ("pt_view", "npy_header"):
                check_direct_read(d, m)
        assert time.monotonic() - started < CASE_SECONDS, m
        assert _max_rss() < base.max_rss + RSS_GROWTH, (m, "resident memory grew past the bound")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    event(f"exit status: {rc}")
    assert rc in (0, 1, 2) and brc in (0, 1, 2), (m, rc, brc)
    assert "Traceback" not in err + berr, (m, err, berr)
    assert (rc, out) == (brc, bout), (m, rc, brc, err, berr)
    lines, base_lines = out.splitlines(), set(base.stdout.splitlines())
    if m.contract == EQUIVALENT:
        assert (rc, out) == (0, base.stdout), (m, err)
    elif m.contract == DETECTABLE and out != base.stdout:
        assert rc != 0 and m.target in out + err, (m, rc, err)
        assert set(lines) <= base_lines, (m, "a damaged file changed a round instead of skipping it")


FUZZ_SETTINGS = dict(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)


@pytest.mark.slow
@settings(max_examples=CI_EXAMPLES, derandomize=True, **FUZZ_SETTINGS)
@given(data=st.data())
def test_mutated_samples_through_the_commands(corpora, data):
    run_case(corpora, data)


@pytest.mark.fuzz_long
@pytest.mark.skipif("'fuzz_long' not in (config.getoption('markexpr') or '')", reason="selected with -m fuzz_long")
@settings(max_examples=LONG_EXAMPLES, **FUZZ_SETTINGS)
@given(data=st.data())
def test_mutated_samples_long_run(corpora, data):
    """Thousands of random cases: ``pytest -m fuzz_long tests/test_fuzz_readers.py``."""
    run_case(corpora, data)


# --- a few in a child process: no signal, no traceback, within 2 GiB ------------------------------

CHILD_CASES = [
    ("npy", "validate_100_116.npy", "bomb", ("refused",)),
    ("npz", "validate_100_116.npz", "bomb", ("refused",)),
    ("pt", "validate_100_116.pt", "pt_view", (0, (13, 4), (-(1 << 20), 1))),
    ("pt", "validate_100_116.pt", "pt_view", (0, (13, 4), (1 << 20, 1))),
    ("article", "draft_step_2_124_140", "entry", ("FIFO",)),
    ("article", "manifest.json", "json", ("deep", 100_000)),
    ("article", "draft_step_1_124_140", "long_line", ()),
]


def _limit_child():
    resource.setrlimit(resource.RLIMIT_AS, (HEADROOM, HEADROOM))


@pytest.mark.slow
@pytest.mark.parametrize("corpus, target, kind, params", CHILD_CASES)
def test_hostile_dumps_in_a_child_with_2_gib(corpora, tmp_path, corpus, target, kind, params):
    """The worst cases once more as a user runs them: a process of its own, 2 GiB address space."""
    d = tmp_path / corpus
    shutil.copytree(corpora[corpus].path, d, symlinks=True)
    apply(d, Mutation(kind, target, params, ANY))
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    commands = [["replay", d]] + ([["batch", d, "--no-progress"]] if kind in ("pt_view", "entry") else [])
    for command in commands:
        r = subprocess.run(
            [sys.executable, "-m", "replay.cli", *map(str, command)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            preexec_fn=_limit_child,
            timeout=120,
        )
        assert r.returncode in (1, 2), (command, r.returncode, r.stderr[-2000:])
        assert "Traceback" not in r.stderr and "MemoryError" not in r.stderr, r.stderr[-2000:]
        assert target in r.stdout + r.stderr, (r.stdout[-2000:], r.stderr[-2000:])
