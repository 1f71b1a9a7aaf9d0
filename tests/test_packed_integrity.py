"""A packed run checks itself when read: damage shows as skipped rounds (exit 1) or an error (exit 2).

Every test damages a copy of a small packed sample (the first 40 rounds of
sample_dumps/synthetic_article, blocks of 8 rounds, three groups) and runs the CLI in-process.
Expectations come from the unmutated run: a result that is printed must be the unmutated one.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import shutil
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest

from replay.cli import main
from replay.engine.runs import iter_run_results, open_run, replay_run
from replay.io.packed.pack import PackedRun, pack_directory
from replay.testing.replayer import replay_directory
from replay.util.errors import DumpError

SAMPLE = Path(__file__).resolve().parent.parent / "sample_dumps" / "synthetic_article"
ROUNDS = 40
BLOCK = 8
_NAME = re.compile(r"^(?:draft_step_\d+|validate)_(\d+)_(\d+)\.npz$")


def copy_sample(dst: Path, rounds: int = ROUNDS) -> Path:
    """The first ``rounds`` rounds (key order) of the synthetic sample, with its manifest."""
    keys = sorted(
        {
            (int(m[1]), int(m[2]))
            for p in SAMPLE.iterdir()
            if (m := _NAME.match(p.name)) and p.name.startswith("validate")
        }
    )
    keep = set(keys[:rounds])
    dst.mkdir(parents=True)
    manifest = json.loads((SAMPLE / "manifest.json").read_text())
    # the subset's manifest lists the subset's rounds, as the directory then holds exactly those
    manifest["rounds"] = [r for r in manifest["rounds"] if tuple(r["key"]) in keep]
    (dst / "manifest.json").write_text(json.dumps(manifest))
    for p in SAMPLE.iterdir():
        m = _NAME.match(p.name)
        if not m:
            continue
        key = (int(m[1]), int(m[2]))
        if key in keep or (p.name.startswith("draft_step_0_") and (key[0] + 1, key[1] + 1) in keep):
            shutil.copy(p, dst)
    return dst


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("integrity")
    run = root / "sample.run"
    pack_directory(copy_sample(root / "sample"), run, workers=1, block_rounds=BLOCK)
    return run


@pytest.fixture
def run(base, tmp_path) -> Path:
    """A fresh copy of the packed sample to damage."""
    out = tmp_path / "copy.run"
    shutil.copytree(base, out)
    return out


def cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def meta(run: Path) -> dict:
    return json.loads((run / "packed.json").read_text())


def reseal(run: Path, body: dict) -> None:
    """Write packed.json with a recomputed meta_sha256: the documented recipe, done by hand."""
    body = {k: v for k, v in body.items() if k != "meta_sha256"}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    body["meta_sha256"] = hashlib.sha256(canon).hexdigest()
    (run / "packed.json").write_text(json.dumps(body, indent=1))


def flip_bit(path: Path, offset: int, bit: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 1 << bit
    path.write_bytes(bytes(data))


def cell_offset(run: Path, group: str, stem: str, k: int, index: tuple[int, ...]) -> int:
    """Byte offset of element ``index`` of block ``k`` (round axis last) in an array file."""
    a = next(g for g in meta(run)["groups"] if g["name"] == group)["arrays"][stem]
    shape, item = a["shape"], np.dtype(a["dtype"]).itemsize
    header = a["bytes"] - int(np.prod(shape)) * item
    return header + (k * int(np.prod(shape[1:])) + int(np.ravel_multi_index(index, shape[1:]))) * item


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# --------------------------------------------------------------------------------------------
# Findings: each failed before packed runs checked themselves


def test_flipped_bit_in_validate_ids_is_skipped_not_replayed(base, run, capsys):
    """One flipped bit in a block's validate ids skips that block's rounds (exit 1), never changes an accepted path."""
    code, out, _ = cli(["replay", str(base), "--json"], capsys)
    assert code == 0 and len(json_lines(out)) == ROUNDS
    good = json_lines(out)
    b = PackedRun.open(base).block(PackedRun.open(base).groups[0], 1)
    by_key = {(r["key_a"], r["key_b"]): r for r in good}
    i = next(i for i in range(len(b)) if by_key[b.key(i)]["accepted_length"] > 0)
    victim = by_key[b.key(i)]
    flip_bit(run / "g000" / "v_ids.npy", cell_offset(run, "g000", "v_ids", 1, (0, 0, i)))  # the root's top-1
    for cmd in ("replay", "batch"):
        code, out, err = cli([cmd, str(run), "--json"], capsys)
        assert code == 1, cmd
        lines = json_lines(out)
        assert len(lines) == ROUNDS - BLOCK and all(r in good for r in lines)
        assert victim["round"] not in [r["round"] for r in lines]
        assert re.search(
            r"skipped block 1 of group g000 \(8 rounds\): \S*g000/v_ids\.npy \(block 1\): bytes \d+-\d+ do not match",
            err,
        ), err


def test_packed_json_edit_is_an_error(run, capsys):
    """An edited packed.json is an error, for verify-pack and every reader, never changed results."""
    body = meta(run)
    body["groups"][0]["rounds"] -= 3  # the last 3 rounds of g000 vanish from the results
    (run / "packed.json").write_text(json.dumps(body, indent=1))
    for args in (["replay", str(run)], ["batch", str(run)], ["stats", str(run)], ["verify-pack", str(run)]):
        code, out, err = cli(args, capsys)
        assert code == 2, args
        assert err.count("\n") == 1 and "packed.json (meta_sha256): differs from the sha256" in err, err


def test_meta_checksum_follows_the_documented_recipe(base, run, capsys):
    body = meta(base)
    stored = body.pop("meta_sha256")
    assert stored == hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    (run / "packed.json").write_text(json.dumps(meta(base), indent=4, sort_keys=True))  # same content, other spacing
    assert cli(["replay", str(run), "--json"], capsys)[:2] == cli(["replay", str(base), "--json"], capsys)[:2]


@pytest.mark.parametrize(
    "damage, field",
    [
        (lambda r: (r / "g000" / "s1_ids.npy").unlink(), r"g000/s1_ids\.npy: missing"),
        (lambda r: flip_bit(r / "g000" / "v_logp.npy", 30, 1), r"g000/v_logp\.npy \((header|size)\)"),
        (
            lambda r: (r / "g001" / "keys.npy").write_bytes((r / "g001" / "keys.npy").read_bytes()[:-5]),
            r"g001/keys\.npy \(size\)",
        ),
        (
            lambda r: _swap(r / "g000" / "v_ids.npy", r / "g000" / "v_logp.npy"),
            r"g000/v_ids\.npy \(header\): header says <f4 \[5, 13, 4, 8\].*packed\.json <i4",
        ),
        (
            lambda r: _overwrite(r / "g000" / "v_ids.npy", 12, b"@" * 12),
            r"g000/v_ids\.npy \(header\): damaged \.npy header: expected a dictionary like",
        ),
        (
            lambda r: _overwrite(r / "g000" / "v_ids.npy", 7, b"\x01"),
            r"g000/v_ids\.npy \(header\): damaged \.npy header \(\.npy version \(1, 1\) \(packed runs write 1\.0\)\)",
        ),
        (lambda r: (r / "manifest.json").write_text("{}"), r"manifest\.json: differs"),
        (lambda r: shutil.copy(r / "manifest.json", r / "config.json"), r"config\.json: was added after packing"),
    ],
)
def test_structural_damage_is_a_typed_error(run, capsys, damage, field):
    """A deleted file, a damaged .npy header, a truncated file: a typed error naming the field, no traceback."""
    damage(run)
    for args in (["replay", str(run)], ["batch", str(run), "--json"], ["stats", str(run)], ["verify-pack", str(run)]):
        code, out, err = cli(args, capsys)
        assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("specreplay: error: "), (args, err)
        assert re.search(field, err), err


def _overwrite(path: Path, offset: int, data: bytes) -> None:
    """Bytes ``offset`` on of ``path`` replaced by ``data``, the file's size kept."""
    body = bytearray(path.read_bytes())
    body[offset : offset + len(data)] = data
    path.write_bytes(bytes(body))


def _swap(a: Path, b: Path) -> None:
    data = a.read_bytes()
    a.write_bytes(b.read_bytes())
    b.write_bytes(data)


def _rewrite_block(run: Path, group: str, stem: str, k: int, fn) -> None:
    """Change block ``k`` of an array and make every checksum agree (a deliberate, re-hashed edit)."""
    body = meta(run)
    g = next(g for g in body["groups"] if g["name"] == group)
    a = g["arrays"][stem]
    path = run / a["file"]
    arr = np.load(path, allow_pickle=False)
    fn(arr[k])
    header = a["bytes"] - arr.nbytes
    data = path.read_bytes()[:header] + arr.tobytes()
    path.write_bytes(data)
    a["block_crc32"][k] = zlib.crc32(arr[k].tobytes())
    a["sha256"] = hashlib.sha256(arr.tobytes()).hexdigest()
    reseal(run, body)


def test_out_of_range_ordinal_is_skipped(run, capsys):
    """An ordinal outside the run (re-hashed so that only the range check can catch it) is skipped, no IndexError."""
    _rewrite_block(run, "g000", "ordinal", 2, lambda blk: blk.__setitem__(0, 10**6))
    for cmd in ("replay", "batch"):
        code, out, err = cli([cmd, str(run), "--json"], capsys)
        assert code == 1 and len(json_lines(out)) == ROUNDS - BLOCK, cmd
        assert "g000/ordinal.npy (block 2): ordinals in [" in err and f"the run has {ROUNDS} rounds" in err


def test_repeated_ordinal_is_an_error(run, capsys):
    """Two rounds at one position (re-hashed edit): an error for both readers, not a duplicated row."""
    first = int(np.load(run / "g000" / "ordinal.npy")[0, 0])
    _rewrite_block(run, "g000", "ordinal", 1, lambda blk: blk.__setitem__(0, first))
    for cmd in ("replay", "batch"):
        code, out, err = cli([cmd, str(run), "--json"], capsys)
        assert code == 2 and out == "" and "repeat" in err and "ordinal" in err, (cmd, err)


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda b: b.__setitem__("rounds", -1), "(rounds): expected an integer >= 0, got -1"),
        (lambda b: b.__setitem__("rounds", 10**15), "(rounds): 1000000000000000, expected packed_rounds + unreadable"),
        (lambda b: b["groups"][0].__setitem__("rounds", 10**12), "(groups[0].blocks): 5, but 1000000000000 rounds"),
        (
            lambda b: b["groups"][0]["arrays"]["v_ids"].__setitem__("shape", [5, 13, 4, 2**40]),
            "(groups[0].arrays.v_ids.shape[3]): expected an integer in",
        ),
        (
            lambda b: b["groups"][0]["arrays"]["v_ids"].__setitem__("shape", [5, 13, 400000, 8]),
            "(groups[0].arrays.v_ids.bytes)",
        ),
        (
            lambda b: b["groups"][0]["arrays"]["v_ids"].__setitem__("file", "../../etc/passwd"),
            "(groups[0].arrays.v_ids.file): expected g000/v_ids.npy",
        ),
        (lambda b: b["groups"][0]["arrays"]["v_ids"].__setitem__("dtype", "|O"), "(groups[0].arrays.v_ids.dtype)"),
        (lambda b: b["groups"][0]["arrays"].pop("ordinal"), "(groups[0].arrays): missing ['ordinal']"),
        (lambda b: b["groups"][1].__setitem__("exts", [".npz"]), "(groups[1].exts): expected a list of 3 strings"),
        (
            lambda b: b["unreadable"].append({"ordinal": 99, "key": None, "what": "x", "reason": "y", "paths": []}),
            "(unreadable[0].ordinal)",
        ),
        (lambda b: b.__setitem__("version", 1), "(version): 1 is not supported"),
    ],
)
def test_resealed_metadata_is_still_checked(run, capsys, edit, field):
    """A packed.json with a valid meta_sha256 still cannot make a reader crash or over-allocate."""
    body = meta(run)
    edit(body)
    reseal(run, body)
    tracemalloc.start()
    try:
        with pytest.raises(DumpError) as info:
            open_run(run)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert field in str(info.value) and "packed.json" in str(info.value)
    assert peak < 2e6  # the claimed sizes were never allocated
    code, _, err = cli(["replay", str(run)], capsys)
    assert code == 2 and field in err


def test_verify_pack_exit_codes(base, run, capsys):
    code, out, err = cli(["verify-pack", str(base)], capsys)
    assert (code, out.strip(), err) == (0, f"{base}: OK", "")
    flip_bit(run / "g000" / "s2_logp.npy", cell_offset(run, "g000", "s2_logp", 3, (1, 0, 0)), 5)
    flip_bit(run / "g002" / "root.npy", -1)
    code, out, err = cli(["verify-pack", str(run)], capsys)
    assert code == 2 and err.count("\n") == 1 and "2 problem(s)" in err
    assert re.search(r"g000/s2_logp\.npy \(block 3\): bytes", out) and re.search(
        r"g002/root\.npy \(block 0\): bytes", out
    )


def test_streaming_readers_skip_bad_blocks(base, run):
    """iter_run_results (batch, stats tables, Dask) reports the block, keeps every other round."""
    flip_bit(run / "g000" / "s0_ids.npy", cell_offset(run, "g000", "s0_ids", 4, (0, 2, 1)), 3)
    good = replay_run(base)
    rounds, skipped = 0, []
    for res, why in iter_run_results(open_run(run), workers=2):
        rounds += len(res)
        skipped += [s for _, s in why]
    n4 = PackedRun.open(base).groups[0].rounds - 4 * BLOCK  # block 4 is g000's last
    assert rounds == ROUNDS - n4
    assert [s.what for s in skipped] == [f"block 4 of group g000 ({n4} rounds)"]
    assert "g000/s0_ids.npy" in skipped[0].paths[0]
    rep = replay_run(run)
    ref = replay_directory(run)
    assert rep.skipped == ref.skipped and list(rep.iter_json()) == [r.to_json() for r in ref.results]
    assert all(r in list(good.iter_json()) for r in rep.iter_json())


def test_only_round_in_a_bad_block(base, run, capsys):
    b = PackedRun.open(base).block(PackedRun.open(base).groups[0], 2)
    inside, outside = b.key(0), PackedRun.open(base).block(PackedRun.open(base).groups[0], 0).key(0)
    flip_bit(run / "g000" / "v_logp.npy", cell_offset(run, "g000", "v_logp", 2, (3, 1, 5)), 2)
    for cmd in ("replay", "batch"):
        code, out, err = cli([cmd, str(run), "--json", "--round", f"{inside[0]}_{inside[1]}"], capsys)
        assert code == 2 and out == "" and "skipped block 2 of group g000" in err, cmd  # nothing replayed: an error
        assert cli([cmd, str(run), "--json", "--round", f"{outside[0]}_{outside[1]}"], capsys) == cli(
            [cmd, str(base), "--json", "--round", f"{outside[0]}_{outside[1]}"], capsys
        )
    # the keys themselves unreadable: the block may hold any round, so it is listed, not "no round"
    flip_bit(run / "g000" / "keys.npy", cell_offset(run, "g000", "keys", 2, (0, 0)), 0)
    code, _, err = cli(["replay", str(run), "--json", "--round", "1_2"], capsys)
    assert code == 2 and "skipped block 2 of group g000" in err and "no round could be replayed" in err
    code, _, err = cli(["replay", str(base), "--json", "--round", "1_2"], capsys)
    assert code == 2 and "--round 1_2: no such round" in err


def test_reading_without_block_checks_is_possible(base, run):
    """check_blocks=False (benchmarks) reads the damaged bytes: the check is what catches them."""
    flip_bit(run / "g000" / "v_ids.npy", cell_offset(run, "g000", "v_ids", 0, (0, 0, 0)), 4)
    unchecked = PackedRun.open(run, check_blocks=False)
    b = unchecked.block(unchecked.groups[0], 0)
    orig = PackedRun.open(base).block(PackedRun.open(base).groups[0], 0)
    assert b.validate.ids[0, 0, 0] == orig.validate.ids[0, 0, 0] ^ 16
    with pytest.raises(DumpError, match=r"v_ids\.npy \(block 0\)"):
        PackedRun.open(run).block(PackedRun.open(run).groups[0], 0)


def test_pack_verify_flag_keeps_skip_status(tmp_path, capsys):
    d = copy_sample(tmp_path / "d", rounds=5)
    (d / "notes.dat").write_text("not a dump file\n")
    code, out, _ = cli(["pack", str(d), "-o", str(tmp_path / "r.run"), "--verify", "--no-progress"], capsys)
    assert code == 1 and f"{tmp_path / 'r.run'}: OK" in out  # a skipped file, an intact run


def _tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("damage", ["truncated", "missing"])
@pytest.mark.parametrize("force", [False, True])
def test_pack_without_a_readable_round_is_an_error(tmp_path, capsys, damage, force):
    """Not one round packed: the skip reasons, one error line, exit 2 (pack --help), and nothing
    written at -o; with --force the run already there stays as it was. Every round unreadable
    (truncated) was packed as a run of 0 rounds with exit 1."""
    d = copy_sample(tmp_path / "d", rounds=5)
    for v in d.glob("validate_*.npz"):
        if damage == "truncated":
            v.write_bytes(v.read_bytes()[:100])
        else:
            v.unlink()
    out = tmp_path / "r.run"
    if force:
        copy_sample(tmp_path / "good", rounds=3)
        assert cli(["pack", str(tmp_path / "good"), "-o", str(out), "--no-progress"], capsys)[0] == 0
    before = _tree(out) if force else {}
    code, stdout, err = cli(["pack", str(d), "-o", str(out), "--no-progress"] + ["--force"] * force, capsys)
    replay_err = cli(["replay", str(d)], capsys)[2].splitlines()
    *reasons, error = err.splitlines()
    assert code == 2 and stdout == ""
    assert reasons == replay_err[:-1] and len(reasons) == 5  # the same skip list `replay` gives
    assert error.startswith(f"specreplay: error: {d}: no round could be packed (5 round(s) skipped, listed above")
    assert sorted(p.name for p in tmp_path.iterdir()) == (["d", "good", "r.run"] if force else ["d"])  # no staging left
    assert _tree(out) == before if force else not out.exists()
    if force:
        assert cli(["verify-pack", str(out)], capsys)[0] == 0


# --------------------------------------------------------------------------------------------
# Fuzz: random damage never escapes as an exception, a traceback or a wrong result

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

COMMANDS = (("replay", "--json"), ("batch", "--json"), ("stats",), ("verify-pack",))


@pytest.fixture(scope="module")
def fuzz_site(base, tmp_path_factory):
    """(where each case's copy lives, the run's files, each command's output on the intact copy there)."""
    site = tmp_path_factory.mktemp("fuzz") / "case.run"  # one path for every case: stats prints it
    shutil.copytree(base, site)
    files = sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.is_file())
    intact = {cmd[0]: captured([cmd[0], str(site), *cmd[1:]]) for cmd in COMMANDS}
    assert all(code == 0 for code, _, _ in intact.values())
    return site, files, intact


def captured(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


def _json_path_and_parent(body, data):
    """A random node of packed.json: (container, key) with container[key] the node."""
    node, parent, key = body, None, None
    while isinstance(node, (dict, list)) and node and (parent is None or data.draw(st.booleans(), label="descend")):
        keys = list(node.keys()) if isinstance(node, dict) else list(range(len(node)))
        k = data.draw(st.sampled_from(keys), label="key")
        parent, key, node = node, k, node[k]
    return parent, key


JSON_VALUES = st.one_of(
    st.integers(-(2**70), 2**70),
    st.integers(-3, 70),
    st.none(),
    st.booleans(),
    st.text(max_size=12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(-2, 40), max_size=5),
    st.just({}),
)


def _mutate(run: Path, files: list[str], data) -> str:
    """Apply one random kind of damage to ``run``; returns a description for failure reports."""
    kind = data.draw(
        st.sampled_from(
            ["flip", "flip", "flip", "truncate", "delete", "append", "swap", "zero", "json", "json", "json"]
        ),
        label="kind",
    )
    name = data.draw(st.sampled_from(files), label="file")
    path = run / name
    if not path.exists():
        return f"{kind} {name}: already gone"
    size = path.stat().st_size
    pos = data.draw(st.integers(0, max(size - 1, 0)), label="pos")
    if kind == "flip" and size:
        flip_bit(path, pos, data.draw(st.integers(0, 7), label="bit"))
    elif kind == "truncate":
        path.write_bytes(path.read_bytes()[:pos])
    elif kind == "delete":
        path.unlink()
    elif kind == "append":
        with open(path, "ab") as fh:
            fh.write(data.draw(st.binary(min_size=1, max_size=16), label="tail"))
    elif kind == "swap":
        other = run / data.draw(st.sampled_from(files), label="other")
        if other.exists():
            a, b = path.read_bytes(), other.read_bytes()
            path.write_bytes(b)
            other.write_bytes(a)
    elif kind == "zero":
        raw = bytearray(path.read_bytes())
        n = data.draw(st.integers(1, 64), label="len")
        raw[pos : pos + n] = bytes(len(raw[pos : pos + n]))
        path.write_bytes(bytes(raw))
    elif kind == "json":
        try:
            body = json.loads((run / "packed.json").read_text())
        except (OSError, ValueError):
            return "json: packed.json already gone or unparsable"
        parent, key = _json_path_and_parent(body, data)
        if parent is None:
            return "json: nothing to edit"
        if data.draw(st.booleans(), label="remove") and isinstance(parent, (dict, list)):
            del parent[key]
        else:
            parent[key] = data.draw(JSON_VALUES, label="value")
        if data.draw(st.booleans(), label="reseal"):
            reseal(run, body)  # a deliberate edit: only the structural checks stand in the way
        else:
            (run / "packed.json").write_text(json.dumps(body, indent=1))
        return f"json edit at {key!r}"
    return f"{kind} {name} at {pos}"


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@pytest.mark.slow
@given(data=st.data())
def test_fuzz_damage_is_visible_or_harmless(base, fuzz_site, data):
    """Random damage: nothing escapes, nothing tracebacks, a printed result is the intact run's.

    stats (pandas tables, ~10x the cost of the others) runs on a quarter of the cases; it reads
    through the same replay_directory as replay.
    """
    site, files, intact = fuzz_site
    shutil.rmtree(site)
    shutil.copytree(base, site)
    what = [_mutate(site, files, data) for _ in range(data.draw(st.integers(1, 3), label="mutations"))]
    commands = [c for c in COMMANDS if c[0] != "stats" or data.draw(st.integers(0, 3), label="stats") == 0]
    got = {}
    for cmd in commands:
        try:
            got[cmd[0]] = captured([cmd[0], str(site), *cmd[1:]])
        except BaseException as exc:  # noqa: BLE001 - the point: nothing may escape
            pytest.fail(f"{cmd[0]} raised {type(exc).__name__}: {exc} after {what}")
    for name, (code, out, err) in got.items():
        assert code in (0, 1, 2) and "Traceback" not in err, (name, code, err, what)
        if code == 2:
            assert err.count("\n") == 1 and err.startswith("specreplay: error: "), (name, err, what)
            assert name == "verify-pack" or out == "", (name, out, what)
        if name == "verify-pack":
            continue
        if code == 0:
            assert (out, err) == intact[name][1:], (name, what)  # no damage shown means no damage done
        elif code == 1:
            assert "skipped" in err, (name, err, what)
            if name != "stats":
                good = intact[name][1].splitlines()
                assert all(line in good for line in out.splitlines()), (name, what)  # never a changed result
    assert got["replay"] == got["batch"], what  # the reference and the batch replay see the same damage
    if got["verify-pack"][0] == 0:
        assert all(got[n][0] == 0 for n in got), what
