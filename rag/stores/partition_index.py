"""`PartitionIndex`: per-partition vectors for exact (brute-force) search, stored as ``.npy``.

A filter that pins one document out of a thousand selects about a thousand chunks. Searching
them exactly is a single 1,000 x 384 matrix-vector product (tens of microseconds), cheaper and
more accurate than an HNSW graph, and cheaper to open than a Chroma collection: a partition is
two ``.npy`` files (float32 unit vectors and the chunk ids, ``allow_pickle=False``) plus a small
JSON file with the partition value. Loaded partitions stay in a least-recently-used cache bounded
in bytes, so a store with many partitions does not hold them all in memory.

Without a directory the partitions live in memory only (an ephemeral store).

Partition files are data from the store directory and are not trusted: they are never
unpickled, a file that is a symlink, pickled (object arrays), truncated, of the wrong type or
shape, or whose header promises more data than the file holds is a `StoreError` naming the file
and the fix, before anything is allocated. Temporary files are created without following links,
and a full disk is a `StoreError` that says so.

Example:
    >>> import numpy as np
    >>> index = PartitionIndex(None)
    >>> index.upsert("p1", "doc-A", np.eye(3, dtype=np.float32), ["a0", "a1", "a2"])
    >>> index.search(["p1"], np.array([0.0, 1.0, 0.0]), k=2)[0]
    ('a1', 0.0)
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag.base.errors import ConfigError, StoreError
from rag.base.filters import validate_filter
from rag.stores.files import open_nofollow, refuse_symlinks, store_write_error

__all__ = ["PartitionIndex", "split_partition_filter"]

Partition = tuple[np.ndarray, np.ndarray]  # (unit vectors float32 [n, d], ids str [n])


class PartitionIndex:
    """Exact-search vectors per partition, persisted as ``.npy`` (see the module docstring).

    Args:
        directory: where partition files live; None keeps everything in memory.
        cache_bytes: upper bound on the bytes of loaded partitions kept in memory (disk mode);
            the least recently used ones are dropped first.
    """

    def __init__(self, directory: str | Path | None, *, cache_bytes: int = 256 * 2**20) -> None:
        if cache_bytes < 0:
            raise ConfigError(f"cache_bytes must be >= 0, got {cache_bytes}")
        self.directory = Path(directory) if directory is not None else None
        if self.directory is not None:   # a linked partitions folder would read and write another store's files
            refuse_symlinks([self.directory.parent, self.directory])
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[str, Partition] = OrderedDict()
        self._cached_bytes = 0
        self._memory_values: dict[str, Any] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ files
    def _paths(self, key: str) -> tuple[Path, Path, Path]:
        base = self.directory or Path()
        return base / f"{key}.vectors.npy", base / f"{key}.ids.npy", base / f"{key}.json"

    def has(self, key: str) -> bool:
        """Whether partition `key` has been written (it may hold zero chunks)."""
        if self.directory is None:
            return key in self._memory_values
        return self._paths(key)[2].exists()

    def files(self, key: str) -> list[Path]:
        """The files of partition `key` (empty in memory mode)."""
        return [] if self.directory is None else list(self._paths(key))

    def values(self) -> dict[str, Any]:
        """Every partition written so far: key -> partition value."""
        if self.directory is None:
            return dict(self._memory_values)
        if not self.directory.exists():
            return {}
        return {p.name[: -len(".json")]: _read_meta(p)["value"] for p in self.directory.glob("*.json")}

    def value(self, key: str) -> Any:
        """The partition value of `key` (None if the partition was never written)."""
        if self.directory is None:
            return self._memory_values.get(key)
        meta = self._paths(key)[2]
        return _read_meta(meta)["value"] if meta.exists() else None

    def load(self, key: str) -> Partition | None:
        """The vectors and ids of partition `key` (cached), or None if it was never written."""
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        if self.directory is None:
            return None
        vec_path, ids_path, _ = self._paths(key)
        if not vec_path.exists() and not ids_path.exists() and not vec_path.is_symlink():
            return None
        part = (_read_array(vec_path, "f", 2), _read_array(ids_path, "U", 1))
        if part[0].shape[0] != part[1].shape[0]:
            raise _damaged(vec_path, f"{part[0].shape[0]} vectors for {part[1].shape[0]} ids in {ids_path.name}")
        self._remember(key, part)
        return part

    def _remember(self, key: str, part: Partition) -> None:
        size = part[0].nbytes + part[1].nbytes
        with self._lock:
            old = self._cache.pop(key, None)
            if old is not None:
                self._cached_bytes -= old[0].nbytes + old[1].nbytes
            self._cache[key] = part
            self._cached_bytes += size
            # in memory mode the cache is the storage: never evict
            while self.directory is not None and self._cached_bytes > self.cache_bytes and len(self._cache) > 1:
                _, dropped = self._cache.popitem(last=False)
                self._cached_bytes -= dropped[0].nbytes + dropped[1].nbytes

    def forget(self) -> None:
        """Drop every loaded partition from memory (disk mode; the next query reloads from files)."""
        if self.directory is None:
            return
        with self._lock:
            self._cache.clear()
            self._cached_bytes = 0

    # ------------------------------------------------------------------ writes
    def write(self, key: str, value: Any, vectors: np.ndarray, ids: Sequence[str]) -> None:
        """Replace partition `key` with these vectors (normalised here) and ids."""
        id_arr = np.asarray(list(ids), dtype=str)
        vecs = np.asarray(vectors, dtype=np.float32)
        vecs = _unit(vecs.reshape(len(id_arr), -1) if vecs.size else vecs.reshape(0, vecs.shape[-1] if vecs.ndim == 2
                                                                                    else 0))
        if self.directory is None:
            self._memory_values[key] = value
            self._remember(key, (vecs, id_arr))
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        vec_path, ids_path, meta_path = self._paths(key)
        meta = json.dumps({"value": value, "count": len(id_arr), "dim": int(vecs.shape[1])}).encode("utf-8")
        for path, write in ((vec_path, lambda fh: np.save(fh, vecs, allow_pickle=False)),
                            (ids_path, lambda fh: np.save(fh, id_arr, allow_pickle=False)),
                            (meta_path, lambda fh: fh.write(meta))):
            _replace(path, write)
        self._remember(key, (vecs, id_arr))

    def upsert(self, key: str, value: Any, vectors: np.ndarray, ids: Sequence[str]) -> None:
        """Add chunks to partition `key`; ids already there are replaced."""
        old = self.load(key)
        vectors = np.asarray(vectors, dtype=np.float32)
        if old is None or len(old[1]) == 0:
            self.write(key, value, vectors, ids)
            return
        keep = ~np.isin(old[1], np.asarray(list(ids), dtype=str))
        self.write(key, value, np.concatenate([old[0][keep], _unit(vectors)]),
                   [*old[1][keep].tolist(), *ids])

    def remove(self, key: str, ids: Iterable[str]) -> None:
        """Remove chunk ids from partition `key` (ids not there are ignored)."""
        old = self.load(key)
        if old is None:
            return
        keep = ~np.isin(old[1], np.asarray(list(ids), dtype=str))
        if not keep.all():
            self.write(key, self.value(key), old[0][keep], old[1][keep].tolist())

    # ------------------------------------------------------------------ search
    def search(self, keys: Sequence[str], vector: Sequence[float] | np.ndarray, *, k: int,
               allowed: Collection[str] | None = None) -> list[tuple[str, float]]:
        """The k nearest chunks over these partitions as (id, cosine distance), closest first.

        Args:
            keys: the partitions to search (missing ones are skipped).
            vector: the query vector (normalised here).
            k: number of results.
            allowed: if given, only these ids may be returned (the rest of a filter).
        """
        query = _unit(np.asarray(vector, dtype=np.float32).reshape(1, -1))[0]
        sims, ids = [], []
        for key in keys:
            part = self.load(key)
            if part is None or len(part[1]) == 0:
                continue
            vecs, part_ids = part
            if vecs.shape[1] != query.shape[0]:
                raise ConfigError(f"query vector has {query.shape[0]} dimensions, partition {key!r} has "
                                  f"{vecs.shape[1]}; use the embedding the store was built with")
            scores = vecs @ query
            if allowed is not None:
                mask = np.isin(part_ids, np.asarray(list(allowed), dtype=str))
                scores, part_ids = scores[mask], part_ids[mask]
            sims.append(scores)
            ids.append(part_ids)
        if not sims:
            return []
        scores, all_ids = np.concatenate(sims), np.concatenate(ids)
        top = np.argpartition(-scores, k - 1)[:k] if len(scores) > k else np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(str(all_ids[i]), float(1.0 - scores[i])) for i in top]


def _damaged(path: Path, cause: str) -> StoreError:
    return StoreError(f"the partition file {path} is damaged ({cause}). Delete the files of that partition "
                      f"({path.name.split('.')[0]}.vectors.npy, .ids.npy and .json): they are rebuilt from the store's "
                      "global collection on first use (PartitionedChroma.index_partitions() rebuilds them all)")


def _read_array(path: Path, kind: str, ndim: int) -> np.ndarray:
    """A ``.npy`` array of dtype kind `kind` and `ndim` dimensions, checked before anything is allocated."""
    refuse_symlinks([path])
    try:
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read_header(fh)
            if dtype.hasobject or dtype.kind != kind or len(shape) != ndim:
                raise ValueError(f"holds a {dtype} array of shape {shape}; expected {ndim}-d "
                                 f"{'float' if kind == 'f' else 'text'} data, never pickled objects")
            expected = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
            remaining = os.fstat(fh.fileno()).st_size - fh.tell()
            if expected > remaining:
                raise ValueError(f"its header promises {expected:,} bytes of data, the file holds {remaining:,}")
            data = fh.read(expected)
    except FileNotFoundError as exc:
        raise _damaged(path, "the file is missing while its partition exists") from exc
    except (OSError, ValueError, SyntaxError) as exc:  # read_magic / header parsing raise ValueError or SyntaxError
        raise _damaged(path, str(exc)[:300]) from exc
    array = np.frombuffer(data, dtype=dtype)
    return array.reshape(shape[::-1]).T if fortran else array.reshape(shape)


def _read_meta(path: Path) -> dict[str, Any]:
    refuse_symlinks([path])
    try:
        meta = json.loads(path.read_bytes())
        if not isinstance(meta, dict) or "value" not in meta:
            raise ValueError("no 'value' key")
    except (OSError, ValueError, RecursionError) as exc:
        raise _damaged(path, str(exc)[:300]) from exc
    return meta


def _replace(path: Path, write: Any) -> None:
    """Write `path` through a new temporary file (links are not followed) renamed over it."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.unlink(missing_ok=True)
        with os.fdopen(open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "wb") as fh:
            write(fh)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise store_write_error(exc, path, f"cannot write the partition file {path}") from exc


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32, copy=False)


def split_partition_filter(flt: dict[str, Any] | None, key: str) -> tuple[list[Any] | None, dict[str, Any] | None]:
    """Split a portable filter into the partition values it pins and the remaining filter.

    Returns ``(values, rest)``: ``values`` is None when the filter does not restrict `key` to a
    finite set (then every partition may match).

    Example:
        >>> split_partition_filter({"doc_name": "A", "year": {"$gt": 2020}}, "doc_name")
        (['A'], {'year': {'$gt': 2020}})
    """
    canon = validate_filter(flt)
    if canon is None:
        return None, None
    clauses = canon["$and"] if "$and" in canon else [canon]
    values: list[Any] | None = None
    rest = []
    for clause in clauses:
        cond = clause.get(key) if len(clause) == 1 else None
        if cond is not None and set(cond) <= {"$eq", "$in"}:
            allowed = set(cond["$in"]) if "$in" in cond else None
            if "$eq" in cond:
                allowed = {cond["$eq"]} if allowed is None else allowed & {cond["$eq"]}
            values = sorted(allowed, key=str) if values is None else [v for v in values if v in allowed]
        else:
            rest.append(clause)
    remaining = None if not rest else rest[0] if len(rest) == 1 else {"$and": rest}
    return values, remaining
