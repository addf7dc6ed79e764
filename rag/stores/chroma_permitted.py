"""The permission keys and vectors of a Chroma collection's chunks, kept beside it: `PermittedVectors`.

Chroma evaluates a principal's `$or` of permission keys over its whole metadata table (unindexed
booleans: hundreds of milliseconds at 100,000 chunks), and reading the permitted chunks' vectors back
from Chroma (``get(ids=..., include=["embeddings"])``) costs 120 ms for 2,000 of them. So a
collection in a directory (a knowledge base's embedded store) has a SQLite file beside Chroma's,
``permitted-<collection id>.sqlite`` (64 KB pages), with one row per chunk: its id, its permission
keys (JSON) and, when it has any, its vector (float32, normalised; a knowledge base without
permissions keeps no copy of its vectors), the key tables of `rag.stores.permission_index`, and each
key's chunk numbers and vectors in a few segments (`rag.stores.permission_segments`: each write
appends what it wrote, merged lazily). A principal whose filter is "one of these keys is true" is
answered from it, the way `rag.stores.permission_vectors` says costs less: exactly over its chunks
(its keys' segments read and scored one at a time, NumPy), or from Chroma's own nearest list read
deeper, the file saying which candidates it may read. The closest are read from Chroma in order,
each checked against the whole filter on Chroma's own metadata (a chunk the file wrongly lists is
never returned; one it misses is missed).

**Current across processes.** `ChromaChunkStore` writes the file after each write of Chroma, with
the sequence number Chroma's metadata segment of the collection reached (``max_seq_id``). A search
uses the file only when that number is still Chroma's: a write by anything else (another version,
another tool) makes it stale, and the next search that needs it reads the collection once to build
it again (logged), or the plan's other paths answer meanwhile. A file that is missing is built the
same way: stores written before it need no step (the file of the versions before segments,
``acl-<collection id>.sqlite``, is copied when current, then removed).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document

from rag.base.acl import ACL_PREFIX
from rag.base.errors import StoreError
from rag.stores import permission_index, permission_segments, permission_vectors
from rag.stores.files import refuse_symlinks

__all__ = ["FORMAT", "REBUILD_EVERY", "PermittedVectors"]

_log = logging.getLogger(__name__)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (n INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, acl TEXT NOT NULL,
                                   vector BLOB NOT NULL);
""" + permission_index.schema("chunks", "acl") + permission_segments.SCHEMA
#: the file's pages (set when it is created): a principal's segments are read as blobs, and SQLite walks a blob's
#: overflow pages one by one (18 MB: 7 ms in 4 KB pages, 3.5 ms in 64 KB ones, mapped)
_PAGE = 65536
#: what the file says it is (another value: emptied and written again)
FORMAT = "rag-chroma-acl/5"
#: the file of the versions before segments (4 KB pages): its rows are copied once, then it is removed
_OLD_FORMAT = "rag-chroma-acl/4"
#: seconds between two builds of a stale file by one process (a store written by other tools meanwhile is searched
#: by the plan's other paths, never by a stale file)
REBUILD_EVERY = 60.0
_BATCH = 500
#: searches of one principal's filter before its keys' counts are read again (`PermittedVectors._share`)
SHARE_AGAIN = 16
#: idle connection pairs a store keeps for the next request's thread
_POOL = 4
_SHARES_KEPT = 64


def _acl(metadata: Mapping[str, Any] | None) -> str:
    return json.dumps({k: v for k, v in (metadata or {}).items() if isinstance(k, str) and k.startswith(ACL_PREFIX)
                       and isinstance(v, bool)})


def _row(id_: str, metadata: Mapping[str, Any] | None, unit: np.ndarray | None) -> tuple[str, str, bytes]:
    """A chunk's row: its id, its permission keys and, when it has any, its vector (a chunk without keys is in no
    principal's exact set: the file holds no copy of its vector, so a knowledge base without permissions pays
    a row of its id)."""
    acl = _acl(metadata)
    return id_, acl, unit.tobytes() if acl != "{}" else b""


def _sqlite_files(path: Path) -> list[Path]:
    """An SQLite file and its write-ahead log and shared-memory files."""
    return [path, Path(f"{path}-wal"), Path(f"{path}-shm")]


def _unit(vectors: Any) -> np.ndarray:
    array = np.asarray(vectors, dtype=np.float32)
    array = array.reshape(1, -1) if array.ndim == 1 else array
    norms = np.sqrt((array * array).sum(axis=1, keepdims=True, dtype=np.float32))
    return array / np.where(norms > 0, norms, 1.0)


class PermittedVectors:
    """The file beside one collection (see the module docstring)."""

    def __init__(self, directory: Path, collection_id: str) -> None:
        self.path = Path(directory) / f"permitted-{collection_id}.sqlite"
        self.old_path = Path(directory) / f"acl-{collection_id}.sqlite"
        self.chroma_file = Path(directory) / "chroma.sqlite3"
        self.collection_id = collection_id
        self._local = threading.local()
        self._build_lock = threading.Lock()
        self._built_at = -REBUILD_EVERY
        self._segment: str | None = None
        self._pool: list[tuple[sqlite3.Connection, sqlite3.Connection]] = []
        self._pool_lock = threading.Lock()
        self._shares: OrderedDict[int, tuple[Any, tuple[int, int], int]] = OrderedDict()

    @classmethod
    def of(cls, collection: Any, client: Any, directory: Path | None) -> PermittedVectors | None:
        """The file of a collection kept in a directory (given, or its persistent client's); None otherwise."""
        if directory is None and client is not None:
            try:
                settings = client.get_settings()
                directory = Path(settings.persist_directory) if settings.is_persistent else None
            except Exception:   # (a client of another kind: no file)
                directory = None
        if directory is None or not (Path(directory) / "chroma.sqlite3").is_file():
            return None
        return cls(Path(directory), str(collection.id))

    @contextlib.contextmanager
    def _held(self) -> Iterator[tuple[sqlite3.Connection, sqlite3.Connection]]:
        """This thread's connections (the file's, Chroma's read-only) for the call: taken from the store's pool and
        given back after (a request may run on a new thread each time: opening them costs milliseconds), at most
        `_POOL` kept idle."""
        found = getattr(self._local, "dbs", None)
        if found is not None:   # (nested, or a thread that holds its own)
            yield found
            return
        with self._pool_lock:
            pair = self._pool.pop() if self._pool else None
        pair = pair or self._open()
        self._local.dbs = pair
        try:
            yield pair
        finally:
            self._local.dbs = None
            if pair[0].in_transaction:   # (a call cut short: nothing half-done goes back to the pool)
                pair[0].close()
                pair[1].close()
                return
            with self._pool_lock:
                if len(self._pool) < _POOL:
                    self._pool.append(pair)
                    pair = None
            for db in pair or ():
                db.close()

    def _dbs(self) -> tuple[sqlite3.Connection, sqlite3.Connection]:
        """The connections this thread holds (outside `_held`: opened for this thread, kept by it)."""
        found = getattr(self._local, "dbs", None)
        if found is None:
            found = self._local.dbs = self._open()
        return found

    def _open(self) -> tuple[sqlite3.Connection, sqlite3.Connection]:
        refuse_symlinks(_sqlite_files(self.path))
        side = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        side.execute(f"PRAGMA page_size = {_PAGE}")   # (a new file's; an existing one keeps its own)
        side.execute("PRAGMA journal_mode=WAL")
        side.execute("PRAGMA mmap_size = 1073741824")   # (segments are read whole: mapped, not copied page by page)
        side.executescript(_SCHEMA)
        found = side.execute("SELECT value FROM settings WHERE key = 'format'").fetchone()
        if not permission_index.ready(side) or found is None or found[0] != FORMAT:
            side.execute("BEGIN IMMEDIATE")   # (another layout: emptied, stale, written again when searched)
            side.execute("DELETE FROM chunks")
            permission_segments.clear(side)
            side.execute("DELETE FROM settings WHERE key = 'chroma_seq'")
            side.execute("INSERT OR REPLACE INTO settings (key, value) VALUES ('format', ?)", (FORMAT,))
            permission_index.build(side, "chunks", "acl")
            side.execute("COMMIT")
        chroma = sqlite3.connect(f"{self.chroma_file.resolve().as_uri()}?mode=ro", uri=True, timeout=5,
                                 isolation_level=None, check_same_thread=False)
        return side, chroma

    def _chroma_seq(self) -> int | None:
        """The last write Chroma applied to this collection's metadata (-1: none yet; None when it cannot be read)."""
        try:
            row = self._dbs()[1].execute(
                "SELECT m.seq_id FROM max_seq_id AS m JOIN segments AS s ON s.id = m.segment_id "
                "WHERE s.collection = ? AND s.scope = 'METADATA'", (self.collection_id,)).fetchone()
        except sqlite3.Error:
            return None
        if row is None:
            return -1
        return row[0] if isinstance(row[0], int) else None

    def current(self) -> bool:
        """Whether the file holds what Chroma holds (written after Chroma's last write of the collection)."""
        with self._held() as (side, _):
            try:
                row = side.execute("SELECT value FROM settings WHERE key = 'chroma_seq'").fetchone()
            except sqlite3.Error:
                return False
            seq = self._chroma_seq()
            return row is not None and seq is not None and row[0] == str(seq)

    # ------------------------------------------------------------------ writing (after Chroma's write)
    def _stamp(self, side: sqlite3.Connection) -> None:
        seq = self._chroma_seq()
        side.execute("INSERT OR REPLACE INTO settings (key, value) VALUES ('chroma_seq', ?)",
                     (str(seq) if seq is not None else "none",))

    def _write(self, was_current: bool, change: Callable[[sqlite3.Connection], None]) -> None:
        """Apply a change Chroma just took, when the file held everything before it (else, or when the file cannot
        be written, it stays stale: never read until written again)."""
        if not was_current:
            return
        try:
            with self._held() as (side, _):
                self._apply(side, change)
        except (sqlite3.Error, StoreError):
            return

    def _apply(self, side: sqlite3.Connection, change: Callable[[sqlite3.Connection], Iterable[str]]) -> None:
        side.execute("BEGIN IMMEDIATE")
        try:
            permission_segments.settle(side, change(side))
            self._stamp(side)
        except BaseException:
            side.execute("ROLLBACK")
            raise
        side.execute("COMMIT")

    def put(self, was_current: bool, ids: Sequence[str], vectors: Any, metadatas: Sequence[Mapping[str, Any]]) -> None:
        """Chunks added or replaced (their vectors and permission keys)."""
        def change(side: sqlite3.Connection) -> list[str]:
            keyed = len(ids) and any(_acl(md) != "{}" for md in metadatas)   # (else no row keeps a vector)
            units, touched = _unit(vectors) if keyed else None, []
            for start in range(0, len(ids), _BATCH):
                part = [str(i) for i in ids[start:start + _BATCH]]
                touched += permission_segments.forget(side, part)
                touched += permission_segments.insert(side, [_row(id_, md, None if units is None else units[start + i])
                                                             for i, (id_, md) in
                                          enumerate(zip(part, metadatas[start:start + _BATCH], strict=True))])
            return touched
        self._write(was_current, change)

    def drop(self, was_current: bool, ids: Sequence[str]) -> None:
        """Chunks deleted."""
        def change(side: sqlite3.Connection) -> list[str]:
            return [key for start in range(0, len(ids), _BATCH)
                    for key in permission_segments.forget(side, [str(i) for i in ids[start:start + _BATCH]])]
        self._write(was_current, change)

    def relabel(self, was_current: bool, ids: Sequence[str], metadatas: Sequence[Mapping[str, Any]],
                vectors_of: Callable[[list[str]], Mapping[str, Any]]) -> None:
        """Chunks' metadata replaced (a permission change re-embeds nothing: only their keys change; a chunk that gets
        its first key gets its vector too, read from Chroma by `vectors_of`, id -> vector). Each key a chunk gained
        gets an entry in a new segment; each it lost, a dead one."""
        def change(side: sqlite3.Connection) -> list[str]:
            touched = []
            for start in range(0, len(ids), _BATCH):
                acls = {str(i): _acl(md) for i, md in zip(ids[start:start + _BATCH], metadatas[start:start + _BATCH],
                                                          strict=True)}
                touched += permission_segments.relabel(side, acls, lambda bare: {
                    id_: _unit(vector)[0].tobytes() for id_, vector in vectors_of(bare).items()})
            return touched
        self._write(was_current, change)

    def start_empty(self) -> None:
        """The collection holds nothing: the file holds nothing, current from now."""
        def change(side: sqlite3.Connection) -> list[str]:
            side.execute("DELETE FROM chunks")
            permission_segments.clear(side)
            return []
        self._write(True, change)
        self._drop_old()

    def _drop_old(self) -> None:
        """Remove the file of the versions before segments (its rows are in this one, or the collection's are)."""
        for path in _sqlite_files(self.old_path):
            path.unlink(missing_ok=True)

    def remove(self) -> None:
        """The collection is gone (replaced): its file too."""
        found = getattr(self._local, "dbs", None)
        with self._pool_lock:
            pool, self._pool = self._pool, []
        for pair in [*pool, *([found] if found is not None else [])]:
            for db in pair:
                db.close()
        self._local = threading.local()
        for path in _sqlite_files(self.path):
            path.unlink(missing_ok=True)
        self._drop_old()

    def rebuild(self, pages: Callable[[], Any]) -> bool:
        """Write the file again from the collection (`pages`: its records with metadata and embeddings, page by
        page), or from the file of the versions before segments when it is current (no Chroma read; removed after),
        at most once per `REBUILD_EVERY` seconds in this process; whether it did."""
        with self._build_lock:
            if time.monotonic() - self._built_at < REBUILD_EVERY:
                return False
            self._built_at = time.monotonic()
            with self._held() as (side, _):
                old = permission_segments.old_rows(self.old_path, self._chroma_seq(), _OLD_FORMAT)
                rows = old or ([_row(id_, md, unit) for id_, md, unit in
                                zip(page["ids"], page["metadatas"], _unit(page["embeddings"]) if page["ids"] else [],
                                    strict=True)] for page in pages())
                count = self._write_all(side, rows)
            self._drop_old()
        if count:
            _log.warning("%s: wrote the permission keys and vectors of its %d chunks%s in %.1f s (once; later writes "
                         "keep them)", self.path, count, f" from {self.old_path.name}" if old else "",
                         time.monotonic() - self._built_at)
        return True

    def _write_all(self, side: sqlite3.Connection, pages: Iterable[list[tuple[str, str, bytes]]]) -> int:
        seq = self._chroma_seq()
        side.execute("BEGIN IMMEDIATE")
        try:
            side.execute("DELETE FROM chunks")
            permission_segments.clear(side)
            count, touched = 0, set()
            for rows in pages:   # (one segment per key and page, merged into one at the end: each entry written twice)
                touched.update(permission_segments.insert(side, rows))
                count += len(rows)
            permission_segments.settle(side, sorted(touched), whole=True)
            side.execute("INSERT OR REPLACE INTO settings (key, value) VALUES ('chroma_seq', ?)",
                         (str(seq) if seq is not None else "none",))
        except BaseException:
            side.execute("ROLLBACK")
            raise
        side.execute("COMMIT")
        return count

    # ------------------------------------------------------------------ reading
    def search(self, vector: Sequence[float], k: int, keys: Sequence[str], *, keep: Callable[[Mapping[str, Any]], bool],
               rest: dict[str, Any] | None, read: Callable[[list[str]], list[Document]],
               nearest: Callable[[int], tuple[list[tuple[str, float]], int]], memo: Any = None,
               ) -> tuple[list[tuple[Document, float]], str, int] | None:
        """The `k` closest chunks holding one of `keys` as true whose Chroma metadata `keep` (the whole permission
        check) and `rest` (the request's own conditions) allow, as (document, cosine distance), the path that found
        them ("exact" or "over-fetch", `rag.stores.permission_vectors`) and how many candidates it weighed; None when
        the file is stale or holds vectors of another size. `nearest(n)`: Chroma's `n` closest (id, distance) with
        the request's own conditions, and how many it returned; `memo`: the principal's filter (one shared object:
        its keys' counts are read once per `SHARE_AGAIN` searches)."""
        with self._held() as (side, chroma):
            segment = self._segment = self._segment or permission_vectors.chroma_segment(chroma, self.collection_id)

            def rows(ids: list[str]) -> list[Document]:   # (from Chroma's tables: a third of `get`'s cost)
                found = permission_vectors.chroma_documents(chroma, segment, ids) if segment else None
                return read(ids) if found is None else found

            return self._search(side, vector, k, keys, keep=keep, rest=rest, read=rows, nearest=nearest, memo=memo)

    def _search(self, side: sqlite3.Connection, vector: Sequence[float], k: int, keys: Sequence[str], *,
                keep: Callable[[Mapping[str, Any]], bool], rest: dict[str, Any] | None,
                read: Callable[[list[str]], list[Document]],
                nearest: Callable[[int], tuple[list[tuple[str, float]], int]], memo: Any,
                ) -> tuple[list[tuple[Document, float]], str, int] | None:
        side.execute("BEGIN")
        try:
            if not self.current():
                return None
            most, stored = self._share(side, keys, memo)
            query = _unit(vector)[0]
            path = permission_vectors.choose(k=k, permitted=most, stored=stored, dim=query.size)
            if path == "over-fetch":
                found = permission_vectors.over_fetch(side, k, frozenset(keys), most, stored, keep, read, nearest)
                if found is not None:
                    return found[0], "over-fetch", found[1]
            scored = permission_vectors.estimates(permission_segments.read(side, keys), query)
            if scored is None:
                return None   # (vectors of another size: Chroma answers)
            batches = permission_vectors.exactly(side, *scored, query, max(k + 4, 32))
            return permission_vectors.walk(side, batches, k, keep, rest, read), "exact", most
        finally:
            side.execute("COMMIT")

    def _share(self, side: sqlite3.Connection, keys: Sequence[str], memo: Any) -> tuple[int, int]:
        """`permission_index.share` (~1 ms for 1,000 keys), remembered for `SHARE_AGAIN` searches of the same filter
        object, for at most `_SHARES_KEPT` filters (a speed decision only)."""
        if memo is None:
            return permission_index.share(side, keys)
        with self._pool_lock:
            found = self._shares.get(id(memo))
            if found is not None and found[0] is memo and found[2] < SHARE_AGAIN:
                self._shares[id(memo)] = (memo, found[1], found[2] + 1)
                self._shares.move_to_end(id(memo))
                return found[1]
        counted = permission_index.share(side, keys)
        with self._pool_lock:
            self._shares[id(memo)] = (memo, counted, 0)
            while len(self._shares) > _SHARES_KEPT:
                self._shares.popitem(last=False)
        return counted
