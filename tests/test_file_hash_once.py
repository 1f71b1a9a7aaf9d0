"""A file's sha256 is read in one place, replay.util.hashing.file_sha256: the packed run's checks
and the model cache's sidecar check both call it (each had its own read loop)."""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

from replay.live.models.cache import hash_file
from replay.util.hashing import HASH_CHUNK, file_sha256
from tests.library_scan import assert_one_place

HOME = "replay/util/hashing.py"

# (module, the call's source text) → why it keeps its own running hash.
ALLOWED = {
    ("replay/io/packed/write.py", "hashlib.sha256()"): "hashes each array file's bytes as it writes them",
    ("replay/live/models/download.py", "hashlib.sha256()"): "hashes a model's parts as it joins them",
}


def _running_hashes(path: Path) -> list[str]:
    """Source text of every ``hashlib.sha256()`` made empty, to be fed chunk by chunk."""
    text = path.read_text()
    return [
        ast.get_source_segment(text, node) or "sha256"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", None) == "sha256"
        and not node.args
        and getattr(node.func.value, "id", None) == "hashlib"
    ]


def test_a_files_sha256_is_read_in_one_place():
    assert_one_place(HOME, _running_hashes, "a file hashed", "file_sha256", allowed=ALLOWED)


def test_file_sha256_from_an_offset_and_the_cache_check_agree(tmp_path):
    data = bytes(range(256)) * (HASH_CHUNK // 128 + 3)  # more than two chunks
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    seen: list[int] = []
    assert file_sha256(path, progress=seen.append) == hashlib.sha256(data).hexdigest()
    assert sum(seen) == len(data) and len(seen) == 3
    assert file_sha256(path, start=100) == hashlib.sha256(data[100:]).hexdigest()
    assert hash_file(path) == hashlib.sha256(data).hexdigest()
