"""The model cache directory: where a model's file lives, the ``.sha256`` sidecar that vouches for
it, and the checks that decide whether a cached file can be used.

Layout: ``<cache>/<name>.gguf`` plus ``<cache>/<name>.gguf.sha256`` (``sha256sum`` format), the
cache being ``--dir``/``--models-dir``, else ``$SPECREPLAY_MODELS``, else
``~/.cache/specreplay/models``. Stdlib only.
"""

from __future__ import annotations

import os
from pathlib import Path

from replay.util.atomic import umask_mode, write_bytes_atomic
from replay.util.hashing import file_sha256

from .catalogue import ModelSpec
from .progress import ProgressFactory, open_progress

CHUNK_BYTES = 1 << 20
ENV_CACHE_DIR = "SPECREPLAY_MODELS"
SIDECAR_SUFFIX = ".sha256"


def default_cache_dir() -> Path:
    env = os.environ.get(ENV_CACHE_DIR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "specreplay" / "models"


def cache_dir_or_default(cache_dir: str | Path | None) -> Path:
    return Path(cache_dir or default_cache_dir())


def model_path(spec: ModelSpec, cache_dir: str | Path | None = None) -> Path:
    return cache_dir_or_default(cache_dir) / spec.filename


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
    os.chmod(path, umask_mode(0o666))


def remove_cached(path: Path) -> None:
    # Sidecar first: it must never vouch for a file that is half gone.
    sidecar_path(path).unlink(missing_ok=True)
    path.unlink(missing_ok=True)


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


def is_present(spec: ModelSpec, cache_dir: str | Path | None = None) -> bool:
    # Size only, no hashing: resolving happens on every harness start; `fetch --verify` re-hashes.
    path = model_path(spec, cache_dir)
    return path.is_file() and path.stat().st_size == spec.size


def hash_file(path: Path, progress: ProgressFactory | None = None, desc: str = "") -> str:
    with open_progress(progress, desc or f"verify {path.name}", path.stat().st_size) as bar:
        return file_sha256(path, progress=bar.update)
