"""The record manager of a knowledge base: what was indexed from each source, by content hash.

One SQLite file per knowledge base holds a row per source document: its content hash, file
size and modification time (a cheap first check before hashing), the ids of its chunks
(themselves content hashes) and a state. A write marks the rows `pending` first and `ok`
only after the vector store has the chunks, so after a crash the interrupted documents are
indexed again; deletions are marked `deleting` and finished by the next writer.

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
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rag.base.errors import StoreError

__all__ = ["STATES", "DocumentRecord", "RecordStore"]

STATES = ("ok", "pending", "deleting")
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
    updated_at REAL NOT NULL DEFAULT 0
)
"""
_FIELDS = ("source", "doc_id", "content_hash", "size", "mtime_ns", "chunk_ids", "pages", "title", "summary",
           "state", "updated_at")


@dataclass
class DocumentRecord:
    """What the knowledge base holds for one source document.

    Attributes:
        source: the key: an absolute file path, or the `source` of an added Document.
        doc_id: the `doc_id` metadata of its chunks.
        content_hash: sha256 of the file bytes (or of the documents' text and metadata).
        size, mtime_ns: the file's size and modification time when indexed (-1 if not a file).
        chunk_ids: ids of its chunks in the vector store, in order.
        pages: pages (or documents) loaded; title and summary as used by AutoContext.
        state: "ok", "pending" (being written) or "deleting".
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


class RecordStore:
    """Document records in one SQLite file (WAL mode; one connection behind a lock).

    Args:
        path: the SQLite file, or ":memory:".
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False, isolation_level=None)
            if self.path != ":memory:":
                self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open the record file {self.path}: {exc}") from exc

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()

    @staticmethod
    def _row(row: tuple) -> DocumentRecord:
        values = dict(zip(_FIELDS, row, strict=True))
        values["chunk_ids"] = json.loads(values["chunk_ids"])
        return DocumentRecord(**values)

    def all(self) -> dict[str, DocumentRecord]:
        """Every record, by source."""
        with self._lock:
            rows = self._conn.execute(f"SELECT {', '.join(_FIELDS)} FROM documents ORDER BY source").fetchall()
        return {row[0]: self._row(row) for row in rows}

    def get(self, source: str) -> DocumentRecord | None:
        """The record of `source`, if any."""
        with self._lock:
            row = self._conn.execute(f"SELECT {', '.join(_FIELDS)} FROM documents WHERE source = ?",
                                     (source,)).fetchone()
        return self._row(row) if row else None

    def find(self, key: str) -> DocumentRecord | None:
        """The record whose source or doc_id is `key`."""
        found = self.get(key)
        if found is None:
            with self._lock:
                row = self._conn.execute(f"SELECT {', '.join(_FIELDS)} FROM documents WHERE doc_id = ?",
                                         (key,)).fetchone()
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
        if not rows:
            return
        marks = ", ".join("?" * len(_FIELDS))
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(f"INSERT OR REPLACE INTO documents ({', '.join(_FIELDS)}) VALUES ({marks})",
                                       rows)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def delete(self, *sources: str) -> None:
        """Remove the records of `sources`."""
        with self._lock:
            self._conn.executemany("DELETE FROM documents WHERE source = ?", [(s,) for s in sources])
