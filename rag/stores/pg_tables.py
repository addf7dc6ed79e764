"""`PGTables`: the tables a pgvector knowledge base keeps beside its chunks, and its writer lock, in PostgreSQL.

A knowledge base whose chunks live in a pgvector table (``schema.table``) keeps the rest of itself
in the same database, so that its connection alone names it and any process on any machine opens
it from an empty folder:

- ``<table>_rag_kb``: its manifest (one row, key ``manifest``, the manifest's JSON);
- ``<table>_rag_records``: its document records, one row per source
  (`rag.indexing.pg_records.PGRecordStore`);
- a session-level advisory lock keyed on the table (`advisory_lock`): a writer on another machine
  waits for it (or fails after the lock timeout) as a writer on the same machine waits for the
  folder's lock file.

Statements are SQL text with bound parameters; table names come from the store's own table name
(quoted identifiers), never from user input.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any

from rag.base.errors import StoreError
from rag.stores.pgvector import PGVectorChunks, _ident, _inner, _rows, can_update_metadata

__all__ = ["PGTables", "server_tables"]


def server_tables(chunks: Any) -> PGTables | None:
    """The PostgreSQL tables of a knowledge base whose chunks are `chunks` (None: not a pgvector table that can
    hold them, i.e. one whose metadata is all in its JSON column)."""
    inner = getattr(chunks, "inner", chunks)
    if isinstance(inner, PGVectorChunks) and can_update_metadata(inner.store):
        return PGTables(inner)
    return None


async def _transaction(vs: Any, statements: list[tuple[str, list[dict[str, Any]]]]) -> None:
    from sqlalchemy import text

    async with vs.engine.connect() as conn:
        for sql, rows in statements:
            if rows:
                await conn.execute(text(sql), rows)
        await conn.commit()


class PGTables:
    """The knowledge base's own tables beside the chunks' table of `chunks` (a `PGVectorChunks`)."""

    def __init__(self, chunks: PGVectorChunks) -> None:
        self.chunks, self.vs = chunks, _inner(chunks.store)
        self.where = f"PostgreSQL ({self.vs.schema_name}.{self.vs.table_name})"
        #: what to delete to start the knowledge base's manifest afresh
        self.manifest_entry = f"the row of {self.table('rag_kb')}"
        self._ready = False
        self._lock_connection: Any = None

    def table(self, suffix: str) -> str:
        """``"schema"."<table>_<suffix>"``, quoted."""
        return f"{_ident(self.vs.schema_name)}.{_ident(f'{self.vs.table_name}_{suffix}')}"

    def _sync(self, coroutine: Any) -> Any:
        return self.chunks.store._engine._run_as_sync(coroutine)

    def _ensure(self) -> None:
        if not self._ready:
            self._sync(_transaction(self.vs, [
                (f"CREATE TABLE IF NOT EXISTS {self.table('rag_kb')} (key text PRIMARY KEY, value text NOT NULL)", [{}]),
                (f"CREATE TABLE IF NOT EXISTS {self.table('rag_records')} (source text PRIMARY KEY, doc_id text "
                 "NOT NULL, content_hash text NOT NULL, size bigint NOT NULL, mtime_ns bigint NOT NULL, chunk_ids text "
                 "NOT NULL, pages integer NOT NULL, title text NOT NULL, summary text NOT NULL, state text NOT NULL, "
                 "updated_at double precision NOT NULL, source_state text NOT NULL DEFAULT '')", [{}]),
                (f"ALTER TABLE {self.table('rag_records')} ADD COLUMN IF NOT EXISTS source_state text NOT NULL "
                 "DEFAULT ''", [{}]),
                (f"CREATE INDEX IF NOT EXISTS {_ident(self.vs.table_name + '_rag_records_doc')} ON "
                 f"{self.table('rag_records')} (doc_id)", [{}])]))
            self._ready = True

    def rows(self, sql: str, params: dict[str, Any] | None = None) -> list[Any]:
        """The rows of one query (the tables created first if needed)."""
        self._ensure()
        return self._sync(_rows(self.vs, sql, params or {}))

    def run(self, statements: list[tuple[str, list[dict[str, Any]]]]) -> None:
        """Statements, each with its rows of parameters, in one transaction."""
        self._ensure()
        self._sync(_transaction(self.vs, statements))

    # ------------------------------------------------------------------ the manifest
    def manifest(self) -> str | None:
        """The manifest's JSON, or None when the knowledge base was never created here."""
        found = self.rows(f"SELECT value FROM {self.table('rag_kb')} WHERE key = 'manifest'")
        return found[0]["value"] if found else None

    def save_manifest(self, text: str) -> None:
        self.run([(f"INSERT INTO {self.table('rag_kb')} (key, value) VALUES ('manifest', :value) "
                   "ON CONFLICT (key) DO UPDATE SET value = excluded.value", [{"value": text}])])

    # ------------------------------------------------------------------ the writer lock
    def lock_key(self) -> int:
        """The advisory lock's 64-bit key, from the table's name."""
        digest = hashlib.sha256(f"rag-writer:{self.vs.schema_name}.{self.vs.table_name}".encode()).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    def acquire(self, timeout: float) -> None:
        """Take the advisory lock on a connection held until `release`, waiting up to `timeout` seconds.

        Raises:
            StoreError: another session holds it after `timeout` seconds.
        """
        from sqlalchemy import text

        async def take() -> Any:
            conn = await self.vs.engine.connect()
            deadline = time.monotonic() + timeout
            while True:
                got = (await conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": self.lock_key()})).scalar()
                if got:
                    return conn
                if time.monotonic() >= deadline:
                    await conn.close()
                    return None
                await asyncio.sleep(0.1)

        conn = self._sync(take())
        if conn is None:
            waited = f" after waiting {timeout:g} s" if timeout else ""
            raise StoreError(f"the knowledge base in {self.where} is being written by another process{waited}; "
                             "only one writer at a time. Wait for it to finish, or pass a lock timeout "
                             "(rag index --lock-timeout SECONDS)")
        self._lock_connection = conn

    def release(self) -> None:
        """Release the advisory lock and close its connection."""
        from sqlalchemy import text

        conn, self._lock_connection = self._lock_connection, None
        if conn is None:
            return

        async def give_back() -> None:
            try:
                await conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": self.lock_key()})
            finally:
                await conn.close()

        self._sync(give_back())
