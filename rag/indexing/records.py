"""The record manager of a knowledge base: what was indexed from each source, by content hash.

One SQLite file per knowledge base holds a row per source document: its content hash, file
size and modification time (a cheap first check before hashing), the ids of its chunks
(themselves content hashes) and a state. A write marks the rows `pending` first and `ok`
only after the vector store has the chunks, so after a crash the interrupted documents are
indexed again (`pending` for a new document, `updating` for one that was indexed before, so the
re-run reports it as updated); deletions are marked `deleting` and finished by the next writer.

The file comes from the store directory and is not trusted: a records file that is a symlink,
a table with missing columns or rows that do not parse, and a write on a full disk are each a
`StoreError` naming the file, the cause and the fix.

Example:
    >>> records = RecordStore(":memory:")
    >>> records.put(DocumentRecord(source="a.txt", doc_id="d1", content_hash="h", chunk_ids=["c1"]))
    >>> records.get("a.txt").chunk_ids
    ['c1']
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rag.base.errors import StoreError
from rag.indexing.store_files import refuse_symlinks, store_condition, store_write_error

__all__ = ["STATES", "WRITING", "DocumentRecord", "RecordStore"]

STATES = ("ok", "pending", "updating", "deleting")
WRITING = ("pending", "updating")  # states of a document whose chunks were being written
_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    source TEXT PRIMARY KEY,
    doc_id TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    size INTEGER NOT NULL DEFAULT -1,
    mtime_ns INTEGER NOT NULL DEFAULT -1,
    chunk_ids TEXT NOT NULL DEFAULT '[]',
    pages INTEGER NOT NULL DEFAULT 0,
    title TEXT NOT NULL DEFAULT '',
    summary TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL DEFAULT 'ok',
    updated_at REAL NOT NULL DEFAULT 0,
    source_state TEXT NOT NULL DEFAULT ''
)
"""
_FIELDS = ("source", "doc_id", "content_hash", "size", "mtime_ns", "chunk_ids", "pages", "title", "summary",
           "state", "updated_at", "source_state")
#: columns added after the first release: a records file without one gets it (empty) when opened
_ADDED = {"source_state": "TEXT NOT NULL DEFAULT ''"}


@dataclass
class DocumentRecord:
    """What the knowledge base holds for one source document.

    Attributes:
        source: the key: an absolute file path, or the `source` of an added Document.
        doc_id: the `doc_id` metadata of its chunks.
        content_hash: sha256 of the file bytes, then what the run's load limits changed in reading it
            (`LoadLimits.reading`, e.g. `+read:tables=none`); or of the documents' text and metadata.
        size, mtime_ns: the file's size and modification time when indexed (-1 if not a file).
        chunk_ids: ids of its chunks in the vector store, in order.
        pages: pages (or documents) loaded; title and summary as used by AutoContext.
        state: "ok", "pending" (being written for the first time), "updating" (being
            rewritten) or "deleting".
        source_state: what a `rag.sources.Source` keeps for the item between syncs (`SourceItem.state`: a web
            page's ETag, Last-Modified and links, for a conditional GET next time); "" for files.
    """

    source: str
    doc_id: str
    content_hash: str
    size: int = -1
    mtime_ns: int = -1
    chunk_ids: list[str] = field(default_factory=list)
    pages: int = 0
    title: str = ""
    summary: str = ""
    state: str = "ok"
    updated_at: float = 0.0
    source_state: str = ""


class RecordStore:
    """Document records in one SQLite file (WAL mode; one connection behind a lock).

    Args:
        path: the SQLite file, or ":memory:".
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        if self.path != ":memory:":
            refuse_symlinks([self.path, *(self.path + suffix for suffix in ("-wal", "-shm", "-journal"))])
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False, isolation_level=None)
            if self.path != ":memory:":
                self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(_SCHEMA)
            columns = {row[1] for row in self._conn.execute("PRAGMA table_info(documents)")}
            for name, kind in _ADDED.items():
                if name not in columns and columns:
                    self._conn.execute(f"ALTER TABLE documents ADD COLUMN {name} {kind}")
                    columns.add(name)
        except (sqlite3.Error, OSError) as exc:
            raise self._damaged(f"cannot open it: {exc}") if _is_damage(exc) else \
                store_write_error(exc, self.path, f"cannot open the record file {self.path}") from exc
        if missing := [f for f in _FIELDS if f not in columns]:
            raise self._damaged(f"its documents table has no column {', '.join(missing)}")

    def _damaged(self, cause: str) -> StoreError:
        return StoreError(f"the record file {self.path} is damaged ({cause}). Delete it and index the documents "
                          "again with cleanup='full' (rag index PATH --cleanup full); unchanged chunks are reused")

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._conn
            except sqlite3.Error as exc:   # (a lock, a full disk, a read-only store are not damage)
                raise store_write_error(exc, self.path, f"cannot read the record file {self.path}") \
                    if store_condition(exc) else self._damaged(str(exc)) from exc

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()

    def _row(self, row: tuple) -> DocumentRecord:
        values = dict(zip(_FIELDS, row, strict=True))
        try:
            values["chunk_ids"] = json.loads(values["chunk_ids"])
            record = DocumentRecord(**values)
            _check_types(record)
        except (TypeError, ValueError, RecursionError) as exc:
            raise self._damaged(f"the row of {str(values['source'])[:200]!r} does not parse: "
                                f"{str(exc)[:200]}") from exc
        return record

    def all(self) -> dict[str, DocumentRecord]:
        """Every record, by source."""
        with self._reading() as conn:
            rows = conn.execute(f"SELECT {', '.join(_FIELDS)} FROM documents ORDER BY source").fetchall()
        return {row[0]: self._row(row) for row in rows}

    def get(self, source: str) -> DocumentRecord | None:
        """The record of `source`, if any."""
        with self._reading() as conn:
            row = conn.execute(f"SELECT {', '.join(_FIELDS)} FROM documents WHERE source = ?", (source,)).fetchone()
        return self._row(row) if row else None

    def find(self, key: str) -> DocumentRecord | None:
        """The record whose source or doc_id is `key`."""
        found = self.get(key)
        if found is None:
            with self._reading() as conn:
                row = conn.execute(f"SELECT {', '.join(_FIELDS)} FROM documents WHERE doc_id = ?", (key,)).fetchone()
            found = self._row(row) if row else None
        return found

    def put(self, *records: DocumentRecord) -> None:
        """Insert or replace records in one transaction."""
        self.put_many(records)

    def put_many(self, records: Iterable[DocumentRecord]) -> None:
        """Insert or replace records in one transaction."""
        rows = []
        now = time.time()
        for rec in records:
            if rec.state not in STATES:
                raise StoreError(f"unknown record state {rec.state!r}; valid: {', '.join(STATES)}")
            values = {f: getattr(rec, f) for f in _FIELDS}  # not asdict(): it deep-copies the chunk ids
            values["chunk_ids"] = json.dumps(rec.chunk_ids)
            values["updated_at"] = now
            rows.append(tuple(values[f] for f in _FIELDS))
        if rows:
            marks = ", ".join("?" * len(_FIELDS))
            self._write([(f"INSERT OR REPLACE INTO documents ({', '.join(_FIELDS)}) VALUES ({marks})", rows)])

    def delete(self, *sources: str) -> None:
        """Remove the records of `sources`."""
        self._write([("DELETE FROM documents WHERE source = ?", [(s,) for s in sources])])

    def rename(self, old_source: str, record: DocumentRecord) -> None:
        """Replace the record of `old_source` by `record` (a moved document) in one transaction."""
        values = {f: getattr(record, f) for f in _FIELDS}
        values["chunk_ids"], values["updated_at"] = json.dumps(record.chunk_ids), time.time()
        marks = ", ".join("?" * len(_FIELDS))
        self._write([("DELETE FROM documents WHERE source = ?", [(old_source,)]),
                     (f"INSERT OR REPLACE INTO documents ({', '.join(_FIELDS)}) VALUES ({marks})",
                      [tuple(values[f] for f in _FIELDS)])])

    def _write(self, statements: list[tuple[str, list[tuple]]]) -> None:
        """Run statements in one transaction; a failure (full disk, ...) is a `StoreError`, nothing half-written."""
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                for sql, rows in statements:
                    self._conn.executemany(sql, rows)
                self._conn.execute("COMMIT")
            except BaseException as exc:
                # SQLite may already have rolled back (e.g. on a full disk): a second ROLLBACK would hide the cause.
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise store_write_error(exc, self.path, f"cannot write the record file {self.path}") from exc
                raise


def _is_damage(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError) \
        or "malformed" in str(exc) or "not a database" in str(exc)


def _check_types(record: DocumentRecord) -> None:
    """Raise `TypeError` unless every field has its type (rows are read from a file that may be damaged)."""
    for name in ("source", "doc_id", "content_hash", "title", "summary", "state", "source_state"):
        if not isinstance(getattr(record, name), str):
            raise TypeError(f"{name} is {type(getattr(record, name)).__name__}, not text")
    for name in ("size", "mtime_ns", "pages"):
        if not isinstance(getattr(record, name), int):
            raise TypeError(f"{name} is {type(getattr(record, name)).__name__}, not an integer")
    if not isinstance(record.chunk_ids, list) or not all(isinstance(c, str) for c in record.chunk_ids):
        raise TypeError("chunk_ids is not a list of ids")
    if record.state not in STATES:
        raise ValueError(f"unknown state {record.state!r}")
