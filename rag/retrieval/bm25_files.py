"""A saved `BM25Index` on disk (``index.json`` + ``arrays.npz``), written atomically and read as untrusted.

A saved index lives in a store directory, so its files are input someone else may have written or
a crash may have cut short. Reading never trusts them:

- ``index.json`` is read with a size bound and parsed by `json` (a nesting too deep to parse is a
  `StoreError`, not a `RecursionError`); every field must have its type;
- each array's ``.npy`` header in ``arrays.npz`` is checked before its data is read: dtype (never
  an object array, never pickled), one dimension, and a length that ``index.json`` implies (the
  vocabulary size; the postings at most one per token of the texts), so a 3 MB file whose member
  claims 3 GiB allocates nothing;
- the postings must be consistent (pointers from 0, non-decreasing, ending at the postings'
  length; chunk numbers inside the index; weights and IDFs finite and not negative).

Anything else is a `StoreError` naming the file, which `rag.retrieval.bm25_cache` treats as a
cache miss: the index is built again. Writing goes through temporary files, fsynced, renamed into
place, so a crash leaves the old file or the new one.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from rag.base.errors import StoreError
from rag.indexing.store_files import open_nofollow, refuse_symlinks

__all__ = ["MAX_INDEX_JSON_BYTES", "read_arrays", "read_meta", "write_index_files"]

#: the largest index.json read (a million chunks of 2,000 characters fit)
MAX_INDEX_JSON_BYTES = 4 * 2**30
_FIELDS = {"k1": (int, float), "b": (int, float), "stem": bool, "stop_words": bool, "metadata_fields": list,
           "vocab": list, "texts": list, "metadatas": list, "ids": list}


def write_index_files(path: Path, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Write ``index.json`` and ``arrays.npz`` into `path` through fsynced temporary files renamed into place."""
    path.mkdir(parents=True, exist_ok=True)
    _write(path / "index.json", lambda fh: fh.write(json.dumps(meta, ensure_ascii=False).encode("utf-8")))
    _write(path / "arrays.npz", lambda fh: np.savez(fh, **arrays))
    _fsync_directory(path)


def _write(target: Path, write: Any) -> None:
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    tmp.unlink(missing_ok=True)
    try:
        with os.fdopen(open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _fsync_directory(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:   # (not every platform opens directories)
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_meta(path: Path) -> dict[str, Any]:
    """``index.json`` of a saved index, checked field by field (`StoreError` when it is not one)."""
    file = path / "index.json"
    refuse_symlinks([path, file, path / "arrays.npz"])
    try:
        if file.stat().st_size > MAX_INDEX_JSON_BYTES:
            raise ValueError(f"{file.stat().st_size:,} bytes, over the {MAX_INDEX_JSON_BYTES:,} read")
        meta = json.loads(file.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:   # RecursionError: nested too deep to parse
        raise _damaged(file, f"{type(exc).__name__}: {str(exc)[:200]}") from None
    if not isinstance(meta, dict):
        raise _damaged(file, "not a JSON object")
    for key, kind in _FIELDS.items():
        if not isinstance(meta.get(key), kind) or (kind != bool and isinstance(meta.get(key), bool)):
            raise _damaged(file, f"{key!r} is missing or not a {getattr(kind, '__name__', 'number')}")
    n = len(meta["texts"])
    if len(meta["metadatas"]) != n or len(meta["ids"]) != n or not all(isinstance(m, dict) for m in meta["metadatas"]):
        raise _damaged(file, "texts, metadatas and ids do not line up")
    if not all(isinstance(t, str) for t in meta["texts"]) or not all(isinstance(t, str) for t in meta["vocab"]):
        raise _damaged(file, "texts and vocab must be strings")
    return meta


def read_arrays(path: Path, meta: dict[str, Any]) -> dict[str, np.ndarray]:
    """The postings arrays of ``arrays.npz``, each header checked against `meta` before its data is read."""
    file = path / "arrays.npz"
    vocab, n = len(meta["vocab"]), len(meta["texts"])
    most_postings = sum(len(t) for t in meta["texts"]) + sum(len(json.dumps(m)) for m in meta["metadatas"]) + n
    try:
        with zipfile.ZipFile(file) as zf:
            ptr = _member(zf, "ptr", "iu", vocab + 1)
            if ptr[0] != 0 or np.any(np.diff(ptr) < 0) or int(ptr[-1]) > most_postings:
                raise ValueError("the term pointers are not a valid postings index")
            arrays = {"ptr": ptr.astype(np.int64), "idf": _member(zf, "idf", "f", vocab),
                      "docs": _member(zf, "docs", "iu", int(ptr[-1])),
                      "weights": _member(zf, "weights", "f", int(ptr[-1]))}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile) as exc:
        raise _damaged(file, f"{type(exc).__name__}: {str(exc)[:200]}") from None
    if len(arrays["docs"]) and (arrays["docs"].min() < 0 or arrays["docs"].max() >= n):
        raise _damaged(file, "postings name chunks the index does not hold")
    for name in ("weights", "idf"):   # BM25 weights and IDFs are finite and never negative
        if not np.all(np.isfinite(arrays[name])) or (len(arrays[name]) and arrays[name].min() < 0):
            raise _damaged(file, f"{name} holds negative or non-finite numbers")
    return arrays


def _member(zf: zipfile.ZipFile, name: str, kinds: str, length: int) -> np.ndarray:
    """One 1-d array of `length` items of a numeric kind; the header is checked before any data is read."""
    info = zf.getinfo(f"{name}.npy")
    with zf.open(info) as fh:
        version = np.lib.format.read_magic(fh)
        if version not in ((1, 0), (2, 0), (3, 0)):
            raise ValueError(f"{name}.npy has format version {version}")
        reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = reader(fh)
        if dtype.hasobject or dtype.kind not in kinds or shape != (length,):
            raise ValueError(f"{name}.npy holds a {dtype} array of shape {shape}; expected {length:,} numbers")
        expected = length * dtype.itemsize
        if info.file_size - fh.tell() != expected:   # the zip's own record of the member's size
            raise ValueError(f"{name}.npy holds {info.file_size - fh.tell():,} bytes of data, not {expected:,}")
        data = fh.read(expected)
    if len(data) != expected:
        raise ValueError(f"{name}.npy is cut short ({len(data):,} of {expected:,} bytes)")
    return np.frombuffer(data, dtype=dtype).copy()


def _damaged(file: Path, why: str) -> StoreError:
    return StoreError(f"the saved BM25 index {file} is damaged ({why}); it is built again on the next search "
                      "(or delete its folder)")
