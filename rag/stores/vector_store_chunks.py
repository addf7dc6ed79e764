"""`VectorStoreChunks`: the core of the store contract for the backends that wrap a LangChain vector store.

Each such backend module subclasses it and overrides the hooks its engine does differently
(docs/development.md, "Add a backend"):

- *get by metadata*: a filtered read is a native filtered search with a fixed probe vector and
  `k` = the number of stored chunks, so the engine selects every matching chunk (the order is
  irrelevant to the callers); a read of everything is a read by id of the chunk ids the knowledge
  base's records hold;
- *delete by filter*: the ids are read as above, then deleted by id;
- *update metadata in place* (a moved file): each backend's own update (`_update`); a store that
  cannot leaves `Capability.UPDATE_METADATA` out of its `capabilities`, and the moved file is indexed
  again as a new one;
- *ids*: stores with UUID ids (pgvector's default table, Qdrant) take the 32-hex chunk ids as
  UUIDs and return them hyphenated; they are returned here in the form they were given.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> from rag.stores.inmemory import InMemoryChunks
    >>> chunks = InMemoryChunks.of(InMemoryVectorStore(DeterministicFakeEmbedding(size=4)))
    >>> chunks.add(["b" * 32], [[0.0, 1.0, 0.0, 0.0]], ["Rome"], [{"doc_id": "d2"}])
    >>> [(d.page_content, round(s, 3)) for d, s in chunks.search([0.0, 1.0, 0.0, 0.0], k=1, filter=None)]
    [('Rome', 1.0)]
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from rag.base.errors import ConfigError, StoreError
from rag.base.filters import matches, validate_filter
from rag.stores.chunk_store import Capability, ChunkStoreBase

__all__ = ["BATCH", "VectorStoreChunks"]

#: ids per read or delete call (bounded statements and requests)
BATCH = 1000


class VectorStoreChunks(ChunkStoreBase):
    """A LangChain vector store as a `ChunkStore`: the part every such backend shares.

    A backend module subclasses it, names the backend, and implements `_native_search` (the engine's
    own filtered search) and `count`; it overrides `_write`, `_delete`, `_read`, `_update`,
    `stored_id`, `_flush` or `name` where its engine differs from the defaults, and leaves
    `Capability.UPDATE_METADATA` out of `capabilities` when it cannot update metadata in place.

    Args:
        store: the backend's vector store (e.g. `rag.stores.pgvector.open_store(...)`).
        all_ids: returns the ids of every stored chunk (the knowledge base passes its records'),
            for reads of everything; without it, such reads are a search with `k` = `count()`.
        dimension: returns the vectors' dimension when known (the knowledge base passes its
            manifest's); else the store's embedding model is asked.
        hex_ids: ids are returned in the form they were written: a 32-hex id that a UUID-id engine
            stores as a UUID comes back as 32 hex (False: ids as the engine holds them, for a store
            that was filled elsewhere).
    """

    backend: ClassVar[str] = ""
    #: the most hits one search returns (None: no limit)
    max_k: ClassVar[int | None] = None
    #: whether the engine keeps ids as UUIDs (a 32-hex id comes back hyphenated unless `hex_ids`)
    uuid_ids: ClassVar[bool] = False
    #: every such store has `asearch` (`_anative_search`, a worker thread unless the backend overrides it) and
    #: updates metadata in place (`_update`) unless the backend's class says otherwise
    capabilities: frozenset[Capability] = frozenset({Capability.ASYNC_SEARCH, Capability.UPDATE_METADATA})

    def __init__(self, store: VectorStore, *, all_ids: Callable[[], list[str]] | None = None,
                 dimension: Callable[[], int | None] | None = None, hex_ids: bool = True) -> None:
        self.store, self.all_ids, self.hex_ids = store, all_ids, hex_ids
        self._dimension_known: int | None = None
        self._recorded_dimension = dimension

    @classmethod
    def of(cls, store: VectorStore, **options: Any) -> VectorStoreChunks:
        """The chunk store over a vector store of this backend (what `rag.stores.registry.chunks_of` calls)."""
        return cls(store, **options)

    # ------------------------------------------------------------------ the backend's hooks
    def _native_search(self, vector: list[float], *, k: int,
                       flt: dict[str, Any] | None) -> list[tuple[Document, float]]:
        """The engine's own filtered search (canonical filter): (document as stored, relevance)."""
        raise NotImplementedError

    async def _anative_search(self, vector: list[float], *, k: int,
                              flt: dict[str, Any] | None) -> list[tuple[Document, float]]:
        """Async `_native_search` (default: in a worker thread)."""
        return await asyncio.to_thread(self._native_search, vector, k=k, flt=flt)

    def count(self) -> int:
        """How many chunks are stored."""
        raise NotImplementedError

    def _write(self, ids: list[str], vectors: list[list[float]], texts: list[str],
               metadatas: list[dict[str, Any]]) -> None:
        """Write chunks with precomputed vectors (default: the store's `add_embeddings`, in batches)."""
        for start in range(0, len(ids), BATCH):
            part = slice(start, start + BATCH)
            self.store.add_embeddings(texts[part], vectors[part], metadatas=metadatas[part], ids=ids[part])

    def _delete(self, ids: list[str]) -> None:
        self.store.delete(ids=ids)

    def _read(self, ids: list[str]) -> list[Document]:
        return self.store.get_by_ids(ids)

    def _update(self, ids: list[str], metadatas: list[dict[str, Any]]) -> None:
        self.store.update_metadatas(ids, metadatas)

    def stored_id(self, id_: str) -> str:
        """The id as the engine stores it (UUID-id engines: the UUID form)."""
        return id_

    def _flush(self) -> None:
        """Persist what a store keeps in memory until saved (default: nothing to do)."""

    @property
    def name(self) -> str | None:
        """The table or collection holding the chunks (None for stores that have no name)."""
        return getattr(self.store, "collection_name", None) or getattr(self.store, "table_name", None)

    def rebuild(self) -> None:
        """Delete every chunk (the ids the knowledge base's records hold, when known)."""
        self.delete([d.id for d in self.get_documents()] if self.all_ids is None else self.all_ids())

    # ------------------------------------------------------------------ writing
    def add(self, ids: Sequence[str], vectors: Sequence[Sequence[float]], texts: Sequence[str],
            metadatas: Sequence[dict[str, Any]]) -> None:
        ids, vectors = list(ids), [list(map(float, v)) for v in vectors]
        if ids:
            self._write(ids, vectors, list(texts), [dict(m) for m in metadatas])
            self._flush()

    def delete(self, ids: Sequence[str]) -> None:
        ids = list(ids)
        for start in range(0, len(ids), BATCH):
            self._delete([self.stored_id(i) for i in ids[start:start + BATCH]])
        if ids:
            self._flush()

    def update_metadatas(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """Replace the metadata of chunks by id (vectors and texts kept), with the backend's own update."""
        if Capability.UPDATE_METADATA not in self.capabilities:
            super().update_metadatas(ids, metadatas)   # (raises: not declared)
        ids, metadatas = list(ids), [dict(m) for m in metadatas]
        for start in range(0, len(ids), BATCH):
            self._update([self.stored_id(i) for i in ids[start:start + BATCH]], metadatas[start:start + BATCH])
        self._flush()

    # ------------------------------------------------------------------ reading
    def _ours(self, doc: Document) -> Document:
        """A store's document with the chunk id as written and the stored metadata only."""
        return Document(page_content=doc.page_content, metadata=dict(doc.metadata),
                        id=_hex_id(doc.id) if self.hex_ids and self.uuid_ids else doc.id)

    def get_by_ids(self, ids: Sequence[str]) -> list[Document]:
        ids, found = list(ids), []
        for start in range(0, len(ids), BATCH):
            found += [self._ours(d) for d in self._read([self.stored_id(i) for i in ids[start:start + BATCH]])]
        return found

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        flt = validate_filter(filter)
        total = self.count()
        if total == 0:
            return []
        limit = self.max_k
        if self.all_ids is not None and (flt is None or (limit is not None and total > limit)):
            return [doc for doc in self.get_by_ids(self.all_ids()) if flt is None or matches(doc.metadata, flt)]
        if limit is not None and total > limit:
            raise StoreError(f"{self.backend}: a filtered read of {total:,} chunks needs the chunk ids (a search "
                             f"returns at most {limit:,}); open it through its knowledge base")
        return [doc for doc, _ in self.search(self._probe(), k=total, filter=flt)]

    def _probe(self) -> list[float]:
        """A fixed query vector for a filtered read (every matching chunk is returned, in any order)."""
        dimension = self._dimension()
        return [1.0] + [0.0] * (dimension - 1)

    def _dimension(self) -> int:
        if self._dimension_known is None and self._recorded_dimension is not None:
            self._dimension_known = self._recorded_dimension()
        if self._dimension_known is None:
            embeddings = getattr(self.store, "embeddings", None)
            if embeddings is None:
                raise StoreError(f"{self.backend}: the store has no embedding model, so its dimension is unknown")
            self._dimension_known = len(embeddings.embed_query("dimension"))
        return self._dimension_known

    def _query_vector(self, vector: Sequence[float]) -> list[float]:
        vector = [float(x) for x in vector]
        if any(not math.isfinite(x) for x in vector):
            raise ConfigError("the query vector holds NaN or infinite values")
        return vector

    def search(self, vector: Sequence[float], *, k: int,
               filter: dict[str, Any] | None) -> list[tuple[Document, float]]:
        flt, vector = validate_filter(filter), self._query_vector(vector)
        return [(self._ours(doc), score) for doc, score in self._native_search(vector, k=k, flt=flt)]

    async def asearch(self, vector: Sequence[float], *, k: int,
                      filter: dict[str, Any] | None) -> list[tuple[Document, float]]:
        """Async `search`."""
        flt, vector = validate_filter(filter), self._query_vector(vector)
        return [(self._ours(doc), score) for doc, score in await self._anative_search(vector, k=k, flt=flt)]


def _hex_id(id_: str | None) -> str | None:
    """A UUID-form id as the 32-hex chunk id it was written as (other ids unchanged)."""
    if id_ is not None and len(id_) == 36 and id_.count("-") == 4:
        try:
            return uuid.UUID(id_).hex
        except ValueError:
            return id_
    return id_
