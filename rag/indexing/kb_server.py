"""A knowledge base kept whole in its store's server: manifest, records and writer lock beside the chunks.

When a knowledge base's chunks live in a server engine (`rag.stores.kb_side.kb_tables`), its
`IndexTarget` reads and writes its manifest and its records there, and its writer lock is also held
there (`ServerWriterLock`): on pgvector, tables of the same database and an advisory lock
(`rag.stores.pg_tables`, `rag.indexing.pg_records`); on Qdrant and Milvus, a side collection
``<collection>_rag_kb`` and a lease in it (`rag.stores.kb_side`, `rag.indexing.engine_records`,
`rag.stores.lease_lock`). The connection names the knowledge base, and the local folder
(`--store`) only holds what a process may keep for itself (the embedding cache, a copy of the
manifest, the lock file of the writers on this machine, and for a collection made elsewhere its
copy of the lexical index).

A knowledge base indexed into one of them by an earlier version keeps its manifest and records in
its folder; the first process that opens it with its folder copies them into the engine once,
under the writer lock, with a message (`migrate_to_server`). Nothing is removed from the folder.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rag.base.errors import StoreError
from rag.indexing.locking import WriterLock
from rag.indexing.manifest import Manifest
from rag.indexing.engine_records import EngineRecordStore
from rag.indexing.pg_records import PGRecordStore
from rag.indexing.records import RecordStore
from rag.stores.pg_tables import PGTables

__all__ = ["ServerWriterLock", "migrate_to_server", "server_manifest", "server_records"]

logger = logging.getLogger(__name__)


class ServerWriterLock(WriterLock):
    """The folder's writer lock, and with it the server's lock on the knowledge base (a writer on another
    machine waits for it as one on this machine waits for the lock file): `tables` is a `PGTables` (an advisory
    lock) or a `rag.stores.kb_side.SideTables` (a lease)."""

    def __init__(self, directory: str | Path, tables: Any, *, timeout: float = 0.0) -> None:
        super().__init__(directory, timeout=timeout)
        self.tables = tables

    def acquire(self) -> None:
        """Take both locks within `timeout` seconds in all (the server's gets what the folder's left of it)."""
        started = time.monotonic()
        super().acquire()
        if self._depth == 1:
            try:
                self.tables.acquire(max(0.0, self.timeout - (time.monotonic() - started)))
            except BaseException:
                super().release()
                raise

    def release(self) -> None:
        if self._depth == 1:
            try:
                self.tables.release()
            finally:
                super().release()
            return
        super().release()


def server_records(tables: Any) -> RecordStore:
    """The document records kept beside the chunks: in PostgreSQL tables, or in a Qdrant / Milvus side collection."""
    return PGRecordStore(tables) if isinstance(tables, PGTables) else EngineRecordStore(tables)


def server_manifest(tables: Any) -> Manifest | None:
    """The manifest the server holds, or None when the knowledge base was never written there.

    Raises:
        StoreError: the stored manifest does not parse.
    """
    text = tables.manifest()
    if text is None:
        return None
    try:
        return Manifest.model_validate_json(text)
    except (ValidationError, ValueError) as exc:
        raise StoreError(f"the knowledge base manifest in {tables.where} is damaged ({str(exc)[:300]}); restore it "
                         f"or delete {tables.manifest_entry} and index the documents again") from exc


def migrate_to_server(name: str, tables: Any, manifest: Manifest, local_records: Path) -> None:
    """Copy a folder's manifest and records into the server, once (the caller holds the writer lock)."""
    records = server_records(tables)
    if tables.manifest() is not None:
        return
    copied = 0
    if local_records.exists():
        local = RecordStore(local_records)
        try:
            found = list(local.all().values())
        finally:
            local.close()
        records.put_many(found)
        copied = len(found)
    tables.save_manifest(manifest.model_dump_json())
    logger.warning("knowledge base %r: its manifest and %s record(s) moved into %s; it is now opened by its "
                   "connection alone (the folder keeps a copy)", name, f"{copied:,}", tables.where)
