"""The Chroma backend's `ChunkStore`: a Chroma collection, embedded in a directory or on a Chroma server.

It reaches the collection through the functions of `rag.stores.chroma` (the one module that talks
to chromadb). Every read that Chroma fails (a damaged segment, state an interrupted write left)
raises `rag.stores.chroma.DamagedStoreError` naming `where` and the fix; `check` reads the
collection as a search does and `rebuild` replaces it with an empty one (the knowledge base then
indexes its documents again).

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from rag.stores.chroma import new_chroma
    >>> chunks = ChromaChunkStore.of(new_chroma("chunks-doc", DeterministicFakeEmbedding(size=4)))
    >>> chunks.add(["a" * 32], [[1.0, 0.0, 0.0, 0.0]], ["Paris"], [{"doc_id": "d1"}])
    >>> chunks.backend, chunks.count(), [d.id for d, _ in chunks.search([1.0, 0, 0, 0], k=3, filter={"doc_id": "d1"})]
    ('chroma', 1, ['aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'])
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from rag.base.errors import StoreError
from rag.base.filters import validate_filter
from rag.stores import chroma
from rag.stores.chroma_clients import (
    collections,
    holds_store,
    local_client,
    reaches_server,
    server_client,
    store_stamp,
)
from rag.stores.chroma_where import to_chroma_where
from rag.stores.chunk_store import Capability, ChunkStoreBase
from rag.stores.files import refuse_symlinks, store_condition, store_write_error
from rag.stores.chroma_permitted import PermittedVectors
from rag.stores import permission_vectors
from rag.stores.permission_plan import PermissionPlan, note_exact, planned_search

__all__ = ["scratch_store", "STORE", "ChromaChunkStore", "new_vectorstore", "open_local", "open_store", "store_name",
           "knowledge_base_store",
           # the backend's client functions (`rag.stores.chroma_clients`)
           "collections", "holds_store", "local_client", "reaches_server", "server_client", "store_stamp"]

_BATCH = 1000


class ChromaChunkStore(ChunkStoreBase):
    """A Chroma collection (cosine space) as a `ChunkStore`.

    Args:
        collection: the raw chromadb collection.
        client: its client (needed to rebuild it, to open the LangChain view, and for a server's
            connection spec).
        where: how errors name the store.
        marker: the file a read that finds the collection damaged creates (`rag index` repairs).
    """

    backend = "chroma"
    capabilities = frozenset({Capability.ASYNC_SEARCH, Capability.UPDATE_METADATA, Capability.STORED_VECTORS,
                              Capability.WORKER_CONNECTION})

    def __init__(self, collection: Any, *, client: Any = None, where: str = "the Chroma store",
                 marker: Path | None = None, directory: Path | None = None, owns_client: bool = False) -> None:
        self.collection, self.client, self.where, self.marker = collection, client, where, marker
        self.directory = directory   # (where a full disk, a lock or a read-only store is reported)
        self.owns_client = owns_client   # (opened for this store: `close` releases it)
        self._side: PermittedVectors | None | bool = False   # (not looked for yet)

    def permitted(self) -> PermittedVectors | None:
        """The permission keys and vectors kept beside a collection in a directory (`rag.stores.chroma_permitted`)."""
        if self._side is False:
            self._side = PermittedVectors.of(self.collection, self.client, self.directory)
        return self._side

    def _side_before_write(self) -> bool:
        """Whether the file beside the collection holds what it holds, before a write (an empty collection: it
        starts empty, current)."""
        side = self.permitted()
        if side is None:
            return False
        try:
            if side.current():
                return True
            if chroma.count(self.collection) == 0:
                side.start_empty()
                return True
        except (sqlite3.Error, StoreError):   # (a read-only folder, a link: the file stays stale, never read)
            pass
        return False

    def close(self) -> None:
        """Release the client this store opened (Chroma keeps one system per directory, with its database
        connections, index files and threads, until every client of it is closed); a client given is left open."""
        if self.owns_client and self.client is not None and hasattr(self.client, "close"):
            self.client.close()
            self.owns_client = False

    @classmethod
    def of(cls, store: VectorStore, **options: Any) -> ChromaChunkStore:
        """The chunk store over a `langchain_chroma.Chroma` (`rag.stores.registry.chunks_of`)."""
        return cls(chroma.collection_of(store), client=getattr(store, "_client", None))

    @classmethod
    def from_connection(cls, spec: dict[str, Any], embedding: Any) -> ChromaChunkStore:
        """The server collection a `connection_spec` names, opened in this process (it must exist)."""
        client = chroma.http_client(spec["host"], spec["port"], ssl=spec["ssl"], headers=spec["headers"])
        client.set_tenant(spec["tenant"], spec["database"])
        return cls(chroma.open_collection(client, spec["collection"], create=False), client=client)

    def _reading(self) -> Any:
        return chroma.readable(self.collection, self.where, self.marker, self.directory)

    @property
    def name(self) -> str:
        return self.collection.name

    def add(self, ids: Sequence[str], vectors: Sequence[Sequence[float]], texts: Sequence[str],
            metadatas: Sequence[dict[str, Any]]) -> None:
        """Write new chunks. An id the collection already holds (a chunk a write cut short left behind, or a store
        copied from elsewhere: no record lists it) is replaced, not kept: Chroma's `add` would keep the stored
        chunk, its old metadata (another `source`) included."""
        stored = set(chroma.stored_ids(self.collection, ids)) if len(ids) else set()
        if stored:
            def rows(keep: bool) -> list[list[Any]]:
                chosen = [i for i, id_ in enumerate(ids) if (id_ in stored) == keep]
                return [[column[i] for i in chosen] for column in (ids, vectors, texts, metadatas)]

            self.upsert(*rows(True))
            ids, vectors, texts, metadatas = rows(False)
        if len(ids):
            current = self._side_before_write()
            vectors = [np.asarray(v, dtype=np.float32) for v in vectors]   # (what Chroma makes of a list of floats)
            chroma.add_chunks(self.collection, ids, vectors, texts, metadatas)
            if self._side:
                self._side.put(current, ids, vectors, metadatas)

    def upsert(self, ids: Sequence[str], vectors: Sequence[Sequence[float]], texts: Sequence[str],
               metadatas: Sequence[dict[str, Any]]) -> None:
        self.update_metadatas(ids, metadatas)   # (the stored ones first: an upsert merges metadata)
        current = self._side_before_write()
        for start in range(0, len(ids), _BATCH):
            part = slice(start, start + _BATCH)
            self.collection.upsert(ids=list(ids[part]), embeddings=[list(v) for v in vectors[part]],
                                   documents=list(texts[part]), metadatas=list(metadatas[part]))
        if self._side and len(ids):
            self._side.put(current, ids, vectors, metadatas)

    def _dropping(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> tuple[list[str], list[dict]]:
        """For the stored ones of `ids`: their new metadata with every key it drops set to None (Chroma's
        update merges metadata; None deletes a key)."""
        new, found = dict(zip(ids, metadatas, strict=True)), []
        with self._reading():
            for start in range(0, len(ids), _BATCH):
                page = self.collection.get(ids=list(ids[start:start + _BATCH]), include=["metadatas"])
                found += [(i, md or {}) for i, md in zip(page["ids"], page["metadatas"], strict=True)]
        return [i for i, _ in found], [{**dict.fromkeys(old), **new[i]} for i, old in found]

    def delete(self, ids: Sequence[str]) -> None:
        current = self._side_before_write() if len(ids) else False
        chroma.delete_ids(self.collection, ids)
        if self._side and len(ids):
            self._side.drop(current, ids)

    def get_by_ids(self, ids: Sequence[str]) -> list[Document]:
        if not len(ids):
            return []
        with self._reading():
            return chroma.get_documents(self.collection, ids=list(ids))

    def get_ids(self, filter: dict[str, Any]) -> list[str]:
        with self._reading():
            return chroma.get_ids(self.collection, where=_where(filter))

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        with self._reading():
            return chroma.get_documents(self.collection, where=_where(filter))

    def get_metadatas(self, filter: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
        with self._reading():
            return chroma.get_metadatas(self.collection, where=_where(filter))

    def update_metadatas(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """Replace the metadata of chunks by id (keys the new metadata drops are deleted)."""
        ids, metadatas = self._dropping(list(ids), list(metadatas))
        current = self._side_before_write() if ids else False
        chroma.update_metadatas(self.collection, ids, metadatas, batch=5000)
        if self._side and ids:   # (None deletes a key: what the file keeps is the new metadata's own keys)
            self._side.relabel(current, ids, [{k: v for k, v in md.items() if v is not None} for md in metadatas],
                               self.get_vectors)

    def get_vectors(self, ids: Sequence[str]) -> dict[str, Any]:
        """Stored vectors by id (ids not stored are absent)."""
        with self._reading():
            return chroma.get_vectors(self.collection, list(ids))

    def count(self) -> int:
        with self._reading():
            return chroma.count(self.collection)

    def search(self, vector: Sequence[float], *, k: int,
               filter: dict[str, Any] | None) -> list[tuple[Document, float]]:
        """The `k` closest chunks the filter allows. A principal's permission conditions are checked on the hits
        of a search with the request's own conditions, or deeper, or by Chroma (`rag.stores.permission_plan`:
        Chroma's own filter on unindexed booleans costs up to minutes at 100,000 chunks)."""
        flt = validate_filter(filter)
        plan = PermissionPlan.of(flt)
        with self._reading():   # (Chroma returns what it holds when asked for more, and nothing when empty)
            if plan is None:
                hits = chroma.query_collection(self.collection, vector, k=k, where=_where(flt))
            elif (exact := self._exact(plan, vector, k)) is not None:
                hits = exact
            else:
                hits, _ = self._planned(plan, vector, k=k, flt=flt)
        return [(doc, 1.0 - distance) for doc, distance in hits]

    def _exact(self, plan: PermissionPlan, vector: Sequence[float], k: int) -> list[tuple[Document, float]] | None:
        """For a principal whose filter is "one of these keys is true": the search over its chunks or Chroma's list
        checked in the file beside the collection (`rag.stores.chroma_permitted`), whichever costs less; None when
        it does not apply (no file, stale)."""
        keys, side = plan.keys, self.permitted()
        if keys is None or side is None or permission_vectors.FORCE == "lists":
            return None
        start = time.perf_counter()
        rest = _where(plan.rest)
        try:
            if not side.current() and not (side.rebuild(self._pages) and side.current()):
                return None
            found = side.search(vector, k, keys, keep=plan.allows, rest=plan.rest, memo=plan.permission,
                                read=lambda ids: chroma.get_documents(self.collection, ids=ids),
                                nearest=lambda n: chroma.query_counted(self.collection, vector, k=n, where=rest,
                                                                       ids_only=True))
        except (sqlite3.Error, StoreError):   # (the file cannot be read or written, or is a link: the other paths)
            return None
        if found is None:
            return None
        note_exact(found[2], start, path=found[1])
        return found[0]

    def _pages(self) -> Any:
        """Every record with its metadata and embedding, page by page."""
        offset = 0
        while True:
            page = self.collection.get(limit=chroma.GET_PAGE, offset=offset, include=["metadatas", "embeddings"])
            yield page
            if len(page["ids"]) < chroma.GET_PAGE:
                return
            offset += chroma.GET_PAGE

    def _planned(self, plan: PermissionPlan, vector: Sequence[float], *, k: int,
                 flt: dict[str, Any]) -> tuple[list[tuple[Document, float]], str]:
        rest = _where(plan.rest)
        return planned_search(
            plan, k, search=lambda n: chroma.query_counted(self.collection, vector, k=n, where=rest),
            ranked=lambda n: chroma.query_counted(self.collection, vector, k=n, where=rest, ids_only=True)[0],
            read=lambda ids: chroma.get_documents(self.collection, ids=list(ids)),
            native=lambda: chroma.query_collection(self.collection, vector, k=k, where=_where(flt)),
            stored=lambda: chroma.count(self.collection), memo=self)

    async def asearch(self, vector: Sequence[float], *, k: int,
                      filter: dict[str, Any] | None) -> list[tuple[Document, float]]:
        """Async `search` (in a worker thread: chromadb's client is blocking)."""
        return await asyncio.to_thread(self.search, vector, k=k, filter=filter)

    def connection_spec(self) -> dict[str, Any] | None:
        """A Chroma server's collection: host, port, TLS, headers, tenant, database (an embedded one: None)."""
        if self.client is None:
            return None
        settings = self.client.get_settings()
        if not settings.chroma_server_host:   # a persistent client has no host
            return None
        return {"backend": self.backend, "host": settings.chroma_server_host,
                "port": int(settings.chroma_server_http_port), "ssl": bool(settings.chroma_server_ssl_enabled),
                "headers": dict(settings.chroma_server_headers or {}), "tenant": self.client.tenant,
                "database": self.client.database, "collection": self.collection.name}

    def check(self) -> None:
        """Read the collection as a search does; `DamagedStoreError` when Chroma cannot."""
        chroma.check_collection(self.collection, self.where)

    def rebuild(self) -> None:
        """Replace the collection by an empty one of the same name (its chunks are indexed again).

        Raises:
            StoreError: Chroma cannot even drop it (its database file is damaged): what to delete.
        """
        name = self.collection.name
        try:
            with self._reading():
                self.client.delete_collection(name)
            if self.permitted() is not None:
                self.permitted().remove()
            self.collection, self._side = chroma.open_collection(self.client, name), False
        except Exception as exc:
            raise StoreError(f"{self.where}: the damaged Chroma collection {name!r} cannot be replaced "
                             f"({type(exc).__name__}); move the store directory's chroma.sqlite3 and its "
                             "segment folders aside and run rag index again") from None

    def vectorstore(self, embedding: Embeddings) -> VectorStore:
        return chroma.new_chroma(self.collection.name, embedding, client=self.client)


def _where(filter: dict[str, Any] | None) -> dict[str, Any] | None:
    flt = validate_filter(filter)
    return to_chroma_where(flt) if flt else None


STORE = ChromaChunkStore


def new_vectorstore(name: str, embedding: Embeddings, *, persist_directory: str | Path | None = None,
                    client: Any = None) -> VectorStore:
    """A `langchain_chroma.Chroma` in cosine space (`rag.stores.chroma.new_chroma`)."""
    return chroma.new_chroma(name, embedding, persist_directory=persist_directory, client=client)


def open_store(name: str, embedding: Embeddings, *, path: str | Path | None = None, client: Any = None) -> VectorStore:
    """The Chroma collection `name` in the directory `path` (or on `client`), created if missing."""
    return chroma.new_chroma(name, embedding, persist_directory=path, client=client)


def open_local(directory: str | Path, collection: str, *, client: Any = None, where: str,
               marker: Path | None) -> ChromaChunkStore:
    """The collection a knowledge base keeps in `directory` (a persistent client there), or on `client`.

    Raises:
        StoreError: Chroma's database or a segment folder in `directory` is a symlink.
    """
    refuse_symlinks(chroma.store_files(directory))   # database and segment folders
    owns = client is None
    client = client if client is not None else chroma.open_client(directory, where=where)
    try:
        opened = chroma.open_collection(client, collection)
    except Exception as exc:   # (Chroma writes on open: a full disk, a lock, a read-only store)
        if owns:
            client.close()
        if store_condition(exc) is None:
            raise
        raise store_write_error(exc, directory, f"cannot open {where}") from None
    return ChromaChunkStore(opened, client=client, where=where, marker=marker, directory=Path(directory),
                            owns_client=owns)


def scratch_store(embedding: Embeddings, workdir: Any, name: str, *, url: str | None = None) -> VectorStore:
    """A new, empty in-memory collection (for tests and benchmarks)."""
    return chroma.new_chroma(name, embedding)


def store_name(name: str) -> str:
    """A valid Chroma collection name for `name` (cleaned: names differing by what cleaning changes get one)."""
    return chroma.collection_name(name)


def knowledge_base_store(name: str) -> str:
    """The collection of the knowledge base called `name`: distinct names get distinct ones."""
    return chroma.knowledge_base_collection(name)
