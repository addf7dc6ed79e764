"""A knowledge base kept whole in its store's server: manifest, records and writer lock beside the chunks.

When a knowledge base's chunks live in a pgvector table (`rag.stores.pg_tables.server_tables`), its
`IndexTarget` reads and writes its manifest and its records in that database, and its writer lock
is also an advisory lock there (`ServerWriterLock`): the connection names the knowledge base, and
the local folder (`--store`) only holds what a process may keep for itself (the embedding cache, a
copy of the manifest, the lock file of the writers on this machine).

A knowledge base indexed into pgvector by an earlier version keeps its manifest and records in its
folder; the first process that opens it with its folder copies them into the database once, under
the writer lock, with a message (`migrate_to_server`). Nothing is removed from the folder.
"""

from __future__ import annotations

import logging
from pathlib import Path
from pydantic import ValidationError

from rag.base.errors import StoreError
from rag.indexing.locking import WriterLock
from rag.indexing.manifest import Manifest
from rag.indexing.pg_records import PGRecordStore
from rag.indexing.records import RecordStore
from rag.stores.pg_tables import PGTables

__all__ = ["ServerWriterLock", "migrate_to_server", "server_manifest"]

logger = logging.getLogger(__name__)


class ServerWriterLock(WriterLock):
    """The folder's writer lock, and with it the server's advisory lock on the knowledge base (a writer on
    another machine waits for it as one on this machine waits for the lock file)."""

    def __init__(self, directory: str | Path, tables: PGTables, *, timeout: float = 0.0) -> None:
        super().__init__(directory, timeout=timeout)
        self.tables = tables

    def acquire(self) -> None:
        super().acquire()
        if self._depth == 1:
            try:
                self.tables.acquire(self.timeout)
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


def server_manifest(tables: PGTables) -> Manifest | None:
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
                         f"or delete the row of {tables.table('rag_kb')} and index the documents again") from exc


def migrate_to_server(name: str, tables: PGTables, manifest: Manifest, local_records: Path) -> None:
    """Copy a folder's manifest and records into the server, once (the caller holds the writer lock)."""
    records = PGRecordStore(tables)
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
