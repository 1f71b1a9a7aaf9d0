"""Read tensors from a PyTorch ``.pt`` zip archive without torch and without running its pickle.

``torch.save`` writes a zip holding ``data.pkl`` (a pickle that names storages and tensor
rebuild calls) and ``data/<key>`` (raw little-endian storage bytes). A restricted unpickler maps
the few globals a plain tensor needs onto inert stand-ins; any other global (``os.system``, a
custom class) is refused, so a malicious file can never execute code — the same guarantee as
``torch.load(weights_only=True)``, while the offline side stays free of torch.
"""

from __future__ import annotations

import collections
import io
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import DumpError

_STORAGE_DTYPES = {
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
}
_TORCH_DTYPES = {
    "int64": np.int64,
    "int32": np.int32,
    "int16": np.int16,
    "int8": np.int8,
    "uint8": np.uint8,
    "bool": np.bool_,
    "float32": np.float32,
    "float64": np.float64,
    "float16": np.float16,
    "long": np.int64,
    "int": np.int32,
    "float": np.float32,
    "double": np.float64,
    "half": np.float16,
}


@dataclass(frozen=True)
class _StorageType:
    dtype: Any


@dataclass(frozen=True)
class _StorageRef:
    key: str
    dtype: Any


def _rebuild_tensor(storage, offset, size, stride, *_ignored):
    return ("tensor", storage, int(offset), tuple(size), tuple(stride))


class _SafeUnpickler(pickle.Unpickler):
    def __init__(self, fh, path: str):
        super().__init__(fh)
        self._path = path

    def find_class(self, module: str, name: str):
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return _rebuild_tensor
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(_STORAGE_DTYPES[name])
        if module == "torch" and name in _TORCH_DTYPES:
            return _StorageType(_TORCH_DTYPES[name])
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        raise DumpError(self._path, f"refusing to load {module}.{name}: only plain tensors are read from .pt files")

    def persistent_load(self, pid):
        # ('storage', storage_type, key, location, numel)
        if not (isinstance(pid, tuple) and pid and pid[0] == "storage"):
            raise DumpError(self._path, f"unexpected persistent id {pid!r}")
        storage_type = pid[1]
        dtype = storage_type.dtype if isinstance(storage_type, _StorageType) else None
        if dtype is None:
            raise DumpError(self._path, f"unsupported storage type {storage_type!r}")
        return _StorageRef(str(pid[2]), dtype)


def _materialise(obj, archive: zipfile.ZipFile, prefix: str, path: str):
    if isinstance(obj, tuple) and obj and obj[0] == "tensor":
        _, storage, offset, size, stride = obj
        raw = archive.read(f"{prefix}data/{storage.key}")
        flat = np.frombuffer(raw, dtype=np.dtype(storage.dtype).newbyteorder("<"))
        itemsize = flat.dtype.itemsize
        arr = np.lib.stride_tricks.as_strided(
            flat[offset:], shape=size, strides=tuple(s * itemsize for s in stride), writeable=False
        )
        return np.array(arr)
    if isinstance(obj, dict):
        return {k: _materialise(v, archive, prefix, path) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_materialise(v, archive, prefix, path) for v in obj)
    return obj


def load_pt(path: str | Path) -> Any:
    """A tensor, or a dict/list of tensors, from ``path`` as numpy arrays."""
    path = str(path)
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise DumpError(path, "not a zip-format .pt file (legacy or truncated); re-save with torch.save") from None
    except OSError as exc:
        raise DumpError(path, f"cannot read: {exc.strerror}") from None
    with archive:
        pkl = [n for n in archive.namelist() if n.endswith("data.pkl")]
        if len(pkl) != 1:
            raise DumpError(path, "no data.pkl inside the archive: not a torch.save file")
        prefix = pkl[0][: -len("data.pkl")]
        try:
            obj = _SafeUnpickler(io.BytesIO(archive.read(pkl[0])), path).load()
            return _materialise(obj, archive, prefix, path)
        except DumpError:
            raise
        except (pickle.UnpicklingError, EOFError, KeyError, ValueError, TypeError, zipfile.BadZipFile) as exc:
            raise DumpError(path, f"corrupt .pt archive: {exc}") from None
