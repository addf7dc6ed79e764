"""The file of the embedded default's lexical index (`rag.stores.fts_index`): its tables, its settings, and the
side tables written once into a file of before them; `open_index_file` opens a connection on it.

- **Tables.** ``chunks (n, id, doc_id, chunk_index, text, metadata)`` keeps each chunk (an index on
  ``(doc_id, chunk_index)`` for neighbours), ``terms`` is the FTS5 table of its tokens (row ``n``),
  ``settings`` says what the tokens were made with: a file made with other settings is not this index
  (`DamagedStoreError`).
- **Side tables.** Each chunk's permission keys (`rag.stores.permission_index`) and metadata values
  (`rag.stores.metadata_values`), written by triggers with the chunk; a file written before them gets
  them once at the first open (logged); one that cannot be written (read-only) is searched without them.

Example:
    >>> import tempfile, pathlib
    >>> db = open_index_file(pathlib.Path(tempfile.mkdtemp()) / "lexical.sqlite", {"format": "x"}, "an index")
    >>> count_in(db)
    0
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

from rag.base.errors import StoreError
from rag.stores import metadata_values, permission_index
from rag.stores.chunk_store import DamagedStoreError
from rag.stores.files import refuse_symlinks, store_write_error

__all__ = ["count_in", "open_index_file", "transaction"]

_log = logging.getLogger(__name__)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (n INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, doc_id TEXT,
                                   chunk_index INTEGER, text TEXT NOT NULL, metadata TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS chunks_by_document ON chunks (doc_id, chunk_index);
CREATE VIRTUAL TABLE IF NOT EXISTS terms USING fts5 (tokens, tokenize = "unicode61 remove_diacritics 0 tokenchars '.,'");
"""


def open_index_file(path: Path, settings: dict[str, Any], where: str) -> sqlite3.Connection:
    """A connection on the index file `path` (made with its tables when missing), whose settings must be
    `settings`; its side tables written once when it is older than them. `where`: how messages name it.

    Raises:
        StoreError: the file is a symlink, or cannot be opened or written; `DamagedStoreError`: it is not an
            index, or was built with other settings.
    """
    refuse_symlinks([path])
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(_SCHEMA)
        _check_settings(db, path, settings)
        _side_tables(db, where)
    except sqlite3.OperationalError as exc:   # cannot open or write it (a read-only folder, a full disk)
        db.close()
        raise store_write_error(exc, path, f"cannot open the lexical index {path}") from None
    except sqlite3.DatabaseError as exc:
        db.close()
        raise DamagedStoreError(f"{path} is not a lexical index ({type(exc).__name__}: {exc}); delete it "
                                "and it is built again from the knowledge base's chunks") from None
    except StoreError:
        db.close()
        raise
    return db


def _check_settings(db: sqlite3.Connection, path: Path, settings: dict[str, Any]) -> None:
    wanted = json.dumps(settings, sort_keys=True)
    db.execute("INSERT OR IGNORE INTO settings (key, value) VALUES ('index', ?)", (wanted,))
    found = db.execute("SELECT value FROM settings WHERE key = 'index'").fetchone()[0]
    if found != wanted:
        raise DamagedStoreError(f"{path} was built with other settings ({found[:200]}); this process asks for "
                                f"{wanted}")


def _side_tables(db: sqlite3.Connection, where: str) -> None:
    """Write every chunk's permission keys and metadata values into a file written before them, once (one that
    cannot be written, read-only, is searched without them: the filters on the metadata's JSON)."""
    for name, module in (("permission keys", permission_index), ("metadata values", metadata_values)):
        if module.ready(db):
            continue
        try:
            db.executescript(module.schema("chunks", "metadata"))
            with transaction(db):
                if module.build(db, "chunks", "metadata") and (chunks := count_in(db)):
                    _log.warning("%s: indexed the %s of its %d chunks (once: later writes keep them)",
                                 where, name, chunks)
        except sqlite3.OperationalError as exc:
            _log.warning("%s: cannot index its %s (%s); it is searched without them", where, name, exc)


def count_in(db: sqlite3.Connection) -> int:
    """How many chunks the file holds."""
    return int(db.execute("SELECT count(*) FROM chunks").fetchone()[0])


class transaction:  # noqa: N801 - used as a statement: ``with transaction(db):``
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error) on an autocommit connection."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")
