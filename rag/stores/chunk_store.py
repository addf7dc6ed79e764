"""The one store contract: `ChunkStore`, and `VectorStoreChunks`, its shared half for LangChain stores.

Every backend module of `rag.stores` implements `ChunkStore` (search with the portable filter, add,
delete, get by ids / by metadata, update metadata, count) and is registered once in
`rag.stores.registry`; everything outside `rag.stores` (indexing, retrieval, composition) talks to
a `ChunkStore`, never to a backend's own API or name. `rag.testing.store_conformance.StoreTests`
is the contract as a test suite.

`VectorStoreChunks` is what the backends that wrap a LangChain vector store share (each backend
module subclasses it and overrides the hooks its engine does differently; docs/development.md):

- *get by metadata*: a filtered read is a native filtered search with a fixed probe vector and
  `k` = the number of stored chunks, so the engine selects every matching chunk (the order is
  irrelevant to the callers); a read of everything is a read by id of the chunk ids the knowledge
  base's records hold;
- *delete by filter*: the ids are read as above, then deleted by id;
- *update metadata in place* (a moved file): each backend's own update (`_update`); a store that
  cannot (`can_update` False) gets the moved file indexed again as a new one;
- *ids*: stores with UUID ids (pgvector's default table, Qdrant) take the 32-hex chunk ids as
  UUIDs and return them hyphenated; they are returned here in the form they were given.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> from rag.stores.registry import chunks_of
    >>> chunks = chunks_of(InMemoryVectorStore(DeterministicFakeEmbedding(size=4)))
    >>> chunks.add(["a" * 32], [[1.0, 0.0, 0.0, 0.0]], ["Paris"], [{"doc_id": "d1", "chunk_index": 0}])
    >>> chunks.backend, chunks.count(), [d.page_content for d in chunks.get_documents({"doc_id": "d1"})]
    ('inmemory', 1, ['Paris'])
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any, ClassVar, Protocol, runtime_checkable

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from rag.base.errors import ConfigError, FilterError, StoreError
from rag.base.filters import matches, validate_filter
from rag.base.portable import ChunkSource, PortableRetriever, Scored

__all__ = ["DAMAGED_MARKER", "Capability", "ChunkStore", "DamagedStoreError", "LayoutRetriever", "VectorStoreChunks", "content_id", "scored",
           "unsupported"]

#: ids per read or delete call (bounded statements and requests)
BATCH = 1000
#: the file a knowledge base's folder gets when a read found its store damaged (`rag index` checks and repairs)
DAMAGED_MARKER = "chroma-damaged"


class DamagedStoreError(StoreError):
    """A store cannot read or write its data: a damaged segment, or state an interrupted write left."""


class Capability(StrEnum):
    """An operation a backend may have beyond the contract: declared in its `capabilities`, read, never probed.

    - `ASYNC_SEARCH`: `asearch(vector, *, k, filter)`, the engine's own async search (else `search` runs in a
      worker thread);
    - `STORED_VECTORS`: `get_vectors(ids) -> {id: vector}`, the stored vectors by id (`EmbeddingReranker(store=...)`
      scores chunks from them instead of embedding them again);
    - `WORKER_CONNECTION`: the class's `from_connection(spec, embedding)` opens, in another process, the store an
      instance's `connection_spec()` names (`rag.stores.registry.open_connection`, Ray workers).
    """

    ASYNC_SEARCH = "async_search"
    STORED_VECTORS = "stored_vectors"
    WORKER_CONNECTION = "worker_connection"


@runtime_checkable
class ChunkStore(Protocol):
    """The store contract: what a knowledge base, a retriever and a worker need from a backend.

    `filter` arguments are portable filters (`rag.base.filters`); ids are the chunk ids as written.
    """

    #: the backend's registered name (`rag.stores.registry`)
    backend: str
    #: whether `update_metadatas` works (else a moved file is indexed again)
    can_update: bool
    #: the optional operations this backend has (`Capability`): what the pipeline reads instead of probing
    capabilities: frozenset[Capability]

    def add(self, ids: Sequence[str], vectors: Sequence[Sequence[float]], texts: Sequence[str],
            metadatas: Sequence[dict[str, Any]]) -> None:
        """Write new chunks (the ids are not stored yet)."""
        ...

    def upsert(self, ids: Sequence[str], vectors: Sequence[Sequence[float]], texts: Sequence[str],
               metadatas: Sequence[dict[str, Any]]) -> None:
        """Write chunks that may already be stored (a retried write): never a duplicate."""
        ...

    def delete(self, ids: Sequence[str]) -> None:
        """Delete chunks by id (ids not stored are ignored)."""
        ...

    def get_by_ids(self, ids: Sequence[str]) -> list[Document]:
        """The stored chunks with these ids (ids not stored are absent)."""
        ...

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        """Chunks (text, metadata, id) matching a portable filter (all when None)."""
        ...

    def get_ids(self, filter: dict[str, Any]) -> list[str]:
        """Ids of the chunks matching a portable filter."""
        ...

    def get_metadatas(self, filter: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
        """Ids and metadata of the chunks matching a portable filter."""
        ...

    def update_metadatas(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """Replace the metadata of chunks by id, vectors and texts kept (only when `can_update`)."""
        ...

    def count(self) -> int:
        """How many chunks are stored."""
        ...

    def search(self, vector: Sequence[float], *, k: int,
               filter: dict[str, Any] | None) -> list[tuple[Document, float]]:
        """The `k` chunks closest to `vector` that the filter allows, as (document, relevance), best first;
        `k` whenever `k` match, fewer when fewer are stored (an empty store returns none)."""
        ...

    def vectorstore(self, embedding: Embeddings) -> VectorStore:
        """A LangChain vector store over these chunks (the dense side of hybrid search)."""
        ...

    def connection_spec(self) -> dict[str, Any] | None:
        """How another process opens the same store (`rag.stores.connections`); None: it lives in this one."""
        ...

    def check(self) -> None:
        """Read the store as a search does; `DamagedStoreError` when the engine cannot."""
        ...

    def rebuild(self) -> None:
        """Replace a damaged store by an empty one (its chunks are indexed again)."""
        ...


def content_id(doc: Document) -> str:
    """A stable id from a document's text and metadata (re-adding the same chunk never duplicates it)."""
    payload = json.dumps([doc.page_content, doc.metadata], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def unsupported(backend: str, op: str, why: str) -> FilterError:
    """The error for a filter a backend cannot express (raised, never weakened into another filter)."""
    return FilterError(f"{backend} cannot express {op}: {why}; drop that condition or use a backend that can "
                       "(see docs/stores.md)")


def scored(doc: Document, relevance: float) -> Document:
    """A copy of `doc` with its relevance in `metadata["score"]` (the stored metadata is not changed)."""
    return Document(page_content=doc.page_content, metadata={**doc.metadata, "score": float(relevance)}, id=doc.id)


class VectorStoreChunks:
    """A LangChain vector store as a `ChunkStore`: the part every such backend shares.

    A backend module subclasses it, names the backend, and implements `_native_search` (the engine's
    own filtered search) and `count`; it overrides `_write`, `_delete`, `_read`, `_update`,
    `stored_id`, `_flush`, `name` or `can_update` where its engine differs from the defaults.

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
    #: whether metadata can be replaced in place (`update_metadatas`)
    can_update: bool = True
    #: whether the engine keeps ids as UUIDs (a 32-hex id comes back hyphenated unless `hex_ids`)
    uuid_ids: ClassVar[bool] = False
    #: every such store has `asearch` (`_anative_search`, a worker thread unless the backend overrides it)
    capabilities: ClassVar[frozenset[Capability]] = frozenset({Capability.ASYNC_SEARCH})

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
        import asyncio

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

    def connection_spec(self) -> dict[str, Any] | None:
        return None

    def check(self) -> None:
        self.count()

    def rebuild(self) -> None:
        self.delete([d.id for d in self.get_documents()] if self.all_ids is None else self.all_ids())

    # ------------------------------------------------------------------ writing
    def add(self, ids: Sequence[str], vectors: Sequence[Sequence[float]], texts: Sequence[str],
            metadatas: Sequence[dict[str, Any]]) -> None:
        ids, vectors = list(ids), [list(map(float, v)) for v in vectors]
        if ids:
            self._write(ids, vectors, list(texts), [dict(m) for m in metadatas])
            self._flush()

    def upsert(self, ids: Sequence[str], vectors: Sequence[Sequence[float]], texts: Sequence[str],
               metadatas: Sequence[dict[str, Any]]) -> None:
        self.delete(ids)
        self.add(ids, vectors, texts, metadatas)

    def delete(self, ids: Sequence[str]) -> None:
        ids = list(ids)
        for start in range(0, len(ids), BATCH):
            self._delete([self.stored_id(i) for i in ids[start:start + BATCH]])
        if ids:
            self._flush()

    def update_metadatas(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """Replace the metadata of chunks by id (vectors and texts kept), with the backend's own update."""
        if not self.can_update:
            raise ConfigError(f"{self.backend}: this store cannot update metadata in place")
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

    def get_ids(self, filter: dict[str, Any]) -> list[str]:
        return [doc.id for doc in self.get_documents(filter)]

    def get_metadatas(self, filter: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
        docs = self.get_documents(filter)
        return [d.id for d in docs], [d.metadata for d in docs]

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

    def vectorstore(self, embedding: Embeddings) -> VectorStore:
        from rag.stores.chunk_view import ChunkStoreView

        return ChunkStoreView(chunks=self, embedding=embedding)


def _hex_id(id_: str | None) -> str | None:
    """A UUID-form id as the 32-hex chunk id it was written as (other ids unchanged)."""
    if id_ is not None and len(id_) == 36 and id_.count("-") == 4:
        try:
            return uuid.UUID(id_).hex
        except ValueError:
            return id_
    return id_


class LayoutRetriever(PortableRetriever):
    """Dense search over a store layout that embeds queries itself (`store.embeddings`) and serves its chunks
    through its own chunk store (`store.chunk_store()`): `ExactVectorStore`, `PartitionedChroma`.

    Documents get ``metadata["score"]`` (by the base class) and ``metadata["scores"] = {"dense": ...}``.
    """

    store: Any

    @property
    def chunk_source(self) -> ChunkSource | None:
        """The store (reads chunks by filter)."""
        return self.store

    def _search(self, query: str, *, k: int, filter: dict[str, Any] | None, run_manager: Any) -> Scored:
        hits = self.store.chunk_store().search(self.store.embeddings.embed_query(query), k=k, filter=filter)
        for doc, score in hits:   # fresh copies from this call: annotate in place
            doc.metadata["scores"] = {"dense": score}
        return hits
