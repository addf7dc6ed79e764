"""`SideTables`: a Qdrant or Milvus knowledge base's manifest, records, change stamp and writer lock, in its engine.

A knowledge base whose chunks live in a server engine keeps the rest of itself there too, so that
its connection alone names it and any process on any machine opens it from an empty folder
(`rag.indexing.kb_server`). On pgvector that is tables of the same database (`rag.stores.pg_tables`);
on Qdrant and Milvus it is a side collection, ``<collection>_rag_kb``, holding entries (key, kind,
doc_id, value): `rag.stores.qdrant_side.QdrantSide` (payload-only points) and
`rag.stores.milvus_side.MilvusSide` (rows with a dummy vector). The entries:

- ``manifest`` (kind ``kb``): the manifest's JSON;
- ``record:<source>`` (kind ``record``): a document's record (`rag.indexing.engine_records`);
- ``stamp`` (kind ``kb``): a random token written with every change of the records, which a
  serving process compares to notice another process's writes (`stamp`);
- ``lock`` (kind ``lock``): the writer lock, a lease (`rag.stores.lease_lock`: a compare-and-set
  on Qdrant, timed mutual exclusion on Milvus; read there what each is worth).

`kb_tables(chunks)` gives a knowledge base's chunk store its side store: `PGTables`, `SideTables`
or None (the embedded default, FAISS, in memory, LanceDB: everything in the folder).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from rag.stores.lease_lock import LEASE_SECONDS, LeaseLock, LockCell
from rag.stores.milvus import MilvusChunks
from rag.stores.pg_tables import server_tables
from rag.stores.qdrant import QdrantChunks

__all__ = ["LITE_SETTLE", "SERVER_SETTLE", "SideStore", "SideTables", "kb_tables"]

#: seconds a Milvus writer waits between writing its claim on the lock and reading it back (`rag.stores.lease_lock`):
#: on a server, longer than any pause of a writer between reading the entry and writing its claim; on Milvus Lite (a
#: file, which one process opens at a time) the writers it has to exclude are threads of that process
SERVER_SETTLE, LITE_SETTLE = 1.0, 0.1


class SideStore(Protocol):
    """An engine's side collection of entries (see the module docstring)."""

    name: str
    where: str
    cell: LockCell

    def get(self, keys: Sequence[str]) -> dict[str, str]: ...

    def put(self, entries: Sequence[tuple[str, str, str, str]]) -> None: ...

    def delete(self, keys: Sequence[str]) -> None: ...

    def scan(self, kind: str, doc_id: str | None = None) -> Iterator[str]: ...


def kb_tables(chunks: Any) -> Any:
    """Where the knowledge base of the chunk store `chunks` keeps its manifest, records and writer lock beside
    them: `PGTables` (pgvector), `SideTables` (Qdrant, Milvus), or None (in its folder)."""
    found = server_tables(chunks)
    if found is not None:
        return found
    inner = getattr(chunks, "inner", chunks)
    if isinstance(inner, QdrantChunks):
        from rag.stores.qdrant_side import QdrantSide

        return SideTables(QdrantSide(inner.store.client, inner.store.collection_name))
    if isinstance(inner, MilvusChunks):
        from rag.stores.milvus_side import MilvusSide

        uri = str((getattr(inner.store, "_connection_args", None) or {}).get("uri", ""))
        return SideTables(MilvusSide(inner.store.client, inner.store.collection_name),
                          settle=LITE_SETTLE if uri.endswith(".db") else SERVER_SETTLE)
    return None


class SideTables:
    """A knowledge base's manifest, change stamp and writer lock in the side collection `side`.

    Args:
        side: the engine's side collection.
        lease, settle: the writer lock's (`LeaseLock`).
    """

    def __init__(self, side: SideStore, *, lease: float = LEASE_SECONDS, settle: float = SERVER_SETTLE) -> None:
        self.side = side
        #: how messages name the knowledge base
        self.where = side.where
        #: what to delete to start the knowledge base's manifest afresh
        self.manifest_entry = f"the entry 'manifest' of the collection {side.name}"
        self.writer = LeaseLock(side.cell, side.where, lease=lease, settle=settle)

    # ------------------------------------------------------------------ the manifest
    def manifest(self) -> str | None:
        """The manifest's JSON, or None when the knowledge base was never created here."""
        return self.side.get(["manifest"]).get("manifest")

    def save_manifest(self, text: str) -> None:
        self.side.put([("manifest", "kb", "", text)])

    # ------------------------------------------------------------------ what serving processes compare
    def stamp(self) -> str | None:
        """A token that changes with every change of the records (None: never written)."""
        return self.side.get(["stamp"]).get("stamp")

    def touch(self) -> None:
        """Write a new `stamp`."""
        self.side.put([("stamp", "kb", "", uuid.uuid4().hex)])

    # ------------------------------------------------------------------ the writer lock
    def acquire(self, timeout: float) -> None:
        """Take the writer lock (`LeaseLock.acquire`)."""
        self.writer.acquire(timeout)

    def release(self) -> None:
        self.writer.release()
