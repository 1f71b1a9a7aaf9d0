"""Read tensors from a PyTorch ``.pt`` zip archive without torch and without running its pickle.

``torch.save`` writes a zip holding ``data.pkl`` (a pickle that names storages and tensor
rebuild calls), ``data/<key>`` (raw storage bytes) and ``byteorder``. A restricted unpickler maps
the few globals a plain tensor needs onto inert stand-ins; any other global (``os.system``, a
custom class) is refused, so a malicious file can never execute code — the same guarantee as
``torch.load(weights_only=True)``, while the offline side stays free of torch.

Nothing the pickle says is trusted: the archive is read within replay.util.bounded's limits, and each
tensor's size, stride and storage offset are checked against its storage before a view is made,
so a hostile file can neither crash the reader nor make it return bytes that are not in the file.
"""

from __future__ import annotations

import collections
import io
import math
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from replay.util.bounded import (
    MAX_MATRIX_FILE_BYTES,
    BoundedZip,
    check_cells,
    dump_fail,
    expansion_allowance,
    read_file_bytes,
)
from replay.util.errors import DumpError

from .npyfile import MAX_NDIM

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


MAX_BYTEORDER_BYTES = 16  # the archive's "byteorder" record: "little" or "big"


class _Inert:
    """A stand-in the pickle may name but not alter: BUILD would otherwise rewrite its __dict__."""

    def __setstate__(self, state: object) -> None:
        raise pickle.UnpicklingError(f"BUILD on {type(self).__name__[1:]}")


@dataclass(frozen=True)
class _StorageType(_Inert):
    dtype: Any


@dataclass(frozen=True)
class _StorageRef(_Inert):
    key: str
    dtype: Any


@dataclass(frozen=True)
class _TensorRef(_Inert):
    """A tensor as the pickle describes it: values are unchecked until ``_materialise``."""

    storage: Any
    offset: Any
    size: Any
    stride: Any


def _rebuild_tensor(
    storage: object = None, offset: object = None, size: object = None, stride: object = None, *_ignored: object
) -> _TensorRef:
    return _TensorRef(storage, offset, size, stride)


# The pure-Python unpickler: it reads counted byte strings with file.read(n), which returns what
# the (already bounded) pickle holds, where the C unpickler first allocates whatever count the
# pickle claims. A .pt file's pickle is a few hundred bytes, so speed does not matter.
class _SafeUnpickler(pickle._Unpickler):
    def __init__(self, fh: io.BytesIO, path: str):
        super().__init__(fh)
        self._path = path

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return _rebuild_tensor
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(_STORAGE_DTYPES[name])
        if module == "torch" and name in _TORCH_DTYPES:
            return _StorageType(_TORCH_DTYPES[name])
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        raise DumpError(
            self._path,
            f"refusing to load {str(module)[:100]}.{str(name)[:100]}: only plain tensors are read from .pt files",
        )

    def persistent_load(self, pid: Any) -> _StorageRef:
        # ('storage', storage_type, key, location, numel)
        if not (isinstance(pid, tuple) and len(pid) >= 3 and pid[0] == "storage"):
            raise DumpError(self._path, "unexpected persistent id in data.pkl (expected ('storage', type, key, ...))")
        storage_type = pid[1]
        if not isinstance(storage_type, _StorageType) or not isinstance(pid[2], (str, int)):
            raise DumpError(self._path, "unsupported storage type or key in data.pkl")
        return _StorageRef(str(pid[2]), storage_type.dtype)


class _Storages:
    """Each storage of the archive read once, after its declared size was checked.

    ``views_left``: bytes the tensors may still copy out. A stride-0 (broadcast) view is valid
    torch but copies more than its storage holds, so views share the file's expansion allowance:
    a 400-byte file cannot make the reader allocate a gigabyte.
    """

    def __init__(self, archive: BoundedZip, prefix: str, path: str, byteorder: str, file_bytes: int):
        self._archive, self._prefix, self._path, self._order = archive, prefix, path, byteorder
        self._raw: dict[str, bytes] = {}
        self.views_left = expansion_allowance(file_bytes)

    def flat(self, ref: _StorageRef) -> np.ndarray:
        """[numel] the storage's elements, read-only."""
        member = f"{self._prefix}data/{ref.key}"
        if ref.key not in self._raw:
            if not self._archive.has(member):
                raise DumpError(
                    self._path, f"data.pkl names storage {ref.key[:50]!r} but the archive has no {member[:80]!r}"
                )
            self._raw[ref.key] = self._archive.read(member)
        raw = self._raw[ref.key]
        dtype = np.dtype(ref.dtype).newbyteorder(self._order)
        if len(raw) % dtype.itemsize:
            raise DumpError(self._path, f"{len(raw)} bytes are not a whole number of {dtype.name} elements", member)
        return np.frombuffer(raw, dtype=dtype)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _materialise(ref: _TensorRef, storages: _Storages, path: str, name: str) -> np.ndarray:
    """The tensor's values, after size, stride and offset were checked against its storage."""
    fail = dump_fail(path, name)
    if not isinstance(ref.storage, _StorageRef):
        raise fail("tensor without a storage")
    size, stride, offset = ref.size, ref.stride, ref.offset
    if not (
        isinstance(size, tuple) and isinstance(stride, tuple) and all(map(_is_int, size + stride)) and _is_int(offset)
    ):
        raise fail("tensor size, stride and storage offset must be integers")
    if len(size) != len(stride) or len(size) > MAX_NDIM:
        raise fail(f"tensor has {len(size)} sizes and {len(stride)} strides")
    if offset < 0 or any(v < 0 for v in size + stride):
        raise fail(f"negative tensor size, stride or offset (size {size}, stride {stride}, offset {offset})")
    cells = math.prod(size)
    check_cells(cells, lambda: f"tensor of shape {size} ({cells:,} values)", fail)
    flat = storages.flat(ref.storage)
    if cells == 0:
        return np.empty(size, dtype=flat.dtype)
    if cells * flat.dtype.itemsize > storages.views_left:
        raise fail(
            f"tensor of shape {size} (stride {stride}) expands to {cells * flat.dtype.itemsize:,} bytes, "
            "more than this file's size allows (see docs/dump-format.md, Limits)"
        )
    storages.views_left -= cells * flat.dtype.itemsize
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= flat.shape[0]:
        raise fail(
            f"tensor (size {size}, stride {stride}, offset {offset}) reaches element {last} "
            f"but its storage holds {flat.shape[0]}"
        )
    # Every element the view can touch was just checked to lie inside the storage.
    view = np.lib.stride_tricks.as_strided(
        flat[offset:], shape=size, strides=tuple(s * flat.dtype.itemsize for s in stride), writeable=False
    )
    return np.array(view)


def _byteorder(archive: BoundedZip, prefix: str, path: str) -> str:
    """'<' or '>': torch >= 2.1 records the writer's byte order; older archives are little-endian."""
    member = f"{prefix}byteorder"
    if not archive.has(member):
        return "<"
    text = archive.read(member, MAX_BYTEORDER_BYTES).strip()
    if text not in (b"little", b"big"):
        raise DumpError(path, f"byteorder record {text[:20]!r}, expected 'little' or 'big'", member)
    return "<" if text == b"little" else ">"


def load_pt(path: str | Path) -> np.ndarray | dict[str, np.ndarray]:
    """A tensor, or a dict of tensors, from ``path`` as numpy arrays (each checked, then copied)."""
    path = str(path)
    data = read_file_bytes(path, MAX_MATRIX_FILE_BYTES)
    if not data.startswith(b"PK"):
        raise DumpError(path, "not a zip-format .pt file (legacy or truncated); re-save with torch.save")
    with BoundedZip(data, path, ".pt file") as archive:
        pkl = [n for n in archive.names() if n.endswith("data.pkl")]
        if len(pkl) != 1:
            raise DumpError(path, "no data.pkl inside the archive: not a torch.save file")
        prefix = pkl[0][: -len("data.pkl")]
        pickled = archive.read(pkl[0])
        try:
            obj = _SafeUnpickler(io.BytesIO(pickled), path).load()
        except DumpError:
            raise
        # A hostile pickle can make the interpreter raise nearly anything (UnpicklingError,
        # EOFError, TypeError from a REDUCE on a non-callable, AttributeError from BUILD, ...).
        except Exception as exc:  # noqa: BLE001 - the boundary of an untrusted-input parser
            raise DumpError(
                path, f"corrupt .pt archive: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            ) from None
        storages = _Storages(archive, prefix, path, _byteorder(archive, prefix, path), len(data))
        if isinstance(obj, _TensorRef):
            return _materialise(obj, storages, path, "tensor")
        if (
            isinstance(obj, dict)
            and obj
            and all(isinstance(k, str) and isinstance(v, _TensorRef) for k, v in obj.items())
        ):
            return {k: _materialise(v, storages, path, k) for k, v in obj.items()}
        raise DumpError(path, f"expected a tensor or a dict of named tensors, got {_describe(obj)}")


def _describe(obj: Any) -> str:
    if isinstance(obj, dict):
        kinds = sorted({type(v).__name__ if not isinstance(v, _TensorRef) else "tensor" for v in obj.values()})
        return f"a dict of {', '.join(kinds) or 'nothing'}"
    return type(obj).__name__
