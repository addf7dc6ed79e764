"""The one store contract: a small core every backend has, and the optional operations it declares.

Every backend module of `rag.stores` implements `ChunkStore` and is registered once in
`rag.stores.registry`; everything outside `rag.stores` (indexing, retrieval, composition) talks to
a `ChunkStore`, never to a backend's own API or name. `rag.testing.store_conformance.StoreTests`
is the contract as a test suite. The contract has three parts:

- **the core** (`ChunkStore`, `CORE`): what every backend implements with its engine: write, delete,
  read by ids, read by a portable filter, count, search; and two attributes, its `backend` name and
  its `capabilities`;
- **the shared operations** (`ChunkStoreBase`, `SHARED`): upsert, ids or metadata by filter, check,
  rebuild, a LangChain view, a connection spec, written once over the core. A backend inherits
  them and overrides one only where its engine has a faster way to the same result (Chroma's
  paged reads); a caller may use them on every store;
- **the capabilities** (`Capability`, `OPTIONAL`): operations a backend may have, declared in its
  `capabilities` and read there by the pipeline, never looked for with `hasattr`.

`VectorStoreChunks` (`rag.stores.vector_store_chunks`) is the core for the backends that wrap a
LangChain vector store: a backend module subclasses it and fills in its hooks (docs/development.md).

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> from rag.stores.registry import chunks_of
    >>> chunks = chunks_of(InMemoryVectorStore(DeterministicFakeEmbedding(size=4)))
    >>> chunks.add(["a" * 32], [[1.0, 0.0, 0.0, 0.0]], ["Paris"], [{"doc_id": "d1", "chunk_index": 0}])
    >>> chunks.backend, chunks.count(), [d.page_content for d in chunks.get_documents({"doc_id": "d1"})]
    ('inmemory', 1, ['Paris'])
    >>> isinstance(chunks, ChunkStore), Capability.UPDATE_METADATA in chunks.capabilities
    (True, True)
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from rag.base.errors import ConfigError, FilterError, StoreError
from rag.base.portable import ChunkSource
from rag.stores.chunk_view import ChunkStoreView

__all__ = ["CORE", "DAMAGED_MARKER", "OPTIONAL", "SHARED", "Capability", "ChunkStore", "ChunkStoreBase",
           "DamagedStoreError", "content_id", "scored", "unsupported"]

#: the file a knowledge base's folder gets when a read found its store damaged (`rag index` checks and repairs)
DAMAGED_MARKER = "chroma-damaged"


class DamagedStoreError(StoreError):
    """A store cannot read or write its data: a damaged segment, or state an interrupted write left."""


class Capability(StrEnum):
    """An operation a backend may have beyond the core: declared in its `capabilities`, read, never probed.

    - `ASYNC_SEARCH`: `asearch(vector, *, k, filter)`, the engine's own async search (else `search` runs in a
      worker thread);
    - `UPDATE_METADATA`: `update_metadatas(ids, metadatas)` replaces metadata in place, vectors and texts kept
      (else it raises `ConfigError`, and a moved file is indexed again as a new one);
    - `STORED_VECTORS`: `get_vectors(ids) -> {id: vector}`, the stored vectors by id (`EmbeddingReranker(store=...)`
      scores chunks from them instead of embedding them again);
    - `WORKER_CONNECTION`: the class's `from_connection(spec, embedding)` opens, in another process, the store an
      instance's `connection_spec()` names (`rag.stores.registry.open_connection`, Ray workers);
    - `OWN_DIRECTORY`: declared by a backend's *module* (`rag.stores.registry.Backend.capabilities`): it keeps a
      knowledge base's chunks in the knowledge base's own directory or on its server, through the functions of
      `rag.stores.registry.DirectoryBackend`; the registry's default backend has it.
    """

    ASYNC_SEARCH = "async_search"
    UPDATE_METADATA = "update_metadata"
    STORED_VECTORS = "stored_vectors"
    WORKER_CONNECTION = "worker_connection"
    OWN_DIRECTORY = "own_directory"


#: the members every backend's chunk store implements itself (`ChunkStore`)
CORE = ("backend", "capabilities", "add", "delete", "get_by_ids", "get_documents", "count", "search")
#: the operations every chunk store has, written once over the core (`ChunkStoreBase`; a backend may override)
SHARED = ("upsert", "get_ids", "get_metadatas", "update_metadatas", "check", "rebuild", "vectorstore",
          "connection_spec")
#: the operation each capability of a chunk store stands for (`OWN_DIRECTORY` is a module's, not a store's)
OPTIONAL: dict[Capability, str] = {Capability.ASYNC_SEARCH: "asearch", Capability.UPDATE_METADATA: "update_metadatas",
                                   Capability.STORED_VECTORS: "get_vectors",
                                   Capability.WORKER_CONNECTION: "from_connection"}


@runtime_checkable
class ChunkStore(ChunkSource, Protocol):
    """The core of the store contract: what every backend implements with its own engine.

    Its read by filter is `rag.base.portable.ChunkSource`'s, so every chunk store is a chunk source (what
    neighbour expansion and RSE read a document's chunks from).

    `filter` arguments are portable filters (`rag.base.filters`); ids are the chunk ids as written.
    The shared operations (`SHARED`) come from `ChunkStoreBase`; the optional ones (`OPTIONAL`) are
    there when `capabilities` says so.
    """

    #: the backend's registered name (`rag.stores.registry`)
    backend: str
    #: the optional operations this store has (`Capability`): what the pipeline reads instead of probing
    capabilities: frozenset[Capability]

    def add(self, ids: Sequence[str], vectors: Sequence[Sequence[float]], texts: Sequence[str],
            metadatas: Sequence[dict[str, Any]]) -> None:
        """Write new chunks (the ids are not stored yet)."""
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

    def count(self) -> int:
        """How many chunks are stored."""
        ...

    def search(self, vector: Sequence[float], *, k: int,
               filter: dict[str, Any] | None) -> list[tuple[Document, float]]:
        """The `k` chunks closest to `vector` that the filter allows, as (document, relevance), best first;
        `k` whenever `k` match, fewer when fewer are stored (an empty store returns none)."""
        ...


class ChunkStoreBase:
    """The shared operations (`SHARED`), written once over the core; every backend's chunk store inherits them.

    A subclass implements the core (`ChunkStore`) and declares its `capabilities`; it overrides a shared
    operation only where its engine reaches the same result faster.
    """

    backend: str = ""
    capabilities: frozenset[Capability] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if vars(cls).get("can_update") is False:   # (a backend written before `Capability.UPDATE_METADATA`)
            warnings.warn(f"{cls.__name__}: can_update = False is deprecated; leave Capability.UPDATE_METADATA out "
                          "of capabilities instead", DeprecationWarning, stacklevel=2)
            delattr(cls, "can_update")
            cls.capabilities = frozenset(cls.capabilities) - {Capability.UPDATE_METADATA}

    def upsert(self, ids: Sequence[str], vectors: Sequence[Sequence[float]], texts: Sequence[str],
               metadatas: Sequence[dict[str, Any]]) -> None:
        """Write chunks that may already be stored (a retried write): never a duplicate."""
        self.delete(ids)
        self.add(ids, vectors, texts, metadatas)

    def get_ids(self, filter: dict[str, Any]) -> list[str]:
        """Ids of the chunks matching a portable filter."""
        return [doc.id for doc in self.get_documents(filter)]

    def get_metadatas(self, filter: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
        """Ids and metadata of the chunks matching a portable filter."""
        docs = self.get_documents(filter)
        return [d.id for d in docs], [d.metadata for d in docs]

    def update_metadatas(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """Replace the metadata of chunks by id, vectors and texts kept: only with `Capability.UPDATE_METADATA`.

        Raises:
            ConfigError: this store does not declare `update_metadata`.
        """
        raise ConfigError(f"{self.backend}: this store cannot update metadata in place (it does not declare "
                          f"{Capability.UPDATE_METADATA.value!r})")

    @property
    def can_update(self) -> bool:
        """Deprecated: `Capability.UPDATE_METADATA in store.capabilities`."""
        return Capability.UPDATE_METADATA in self.capabilities

    def check(self) -> None:
        """Read the store as a search does; `DamagedStoreError` when the engine cannot (here: count)."""
        self.count()

    def rebuild(self) -> None:
        """Replace a damaged store by an empty one (its chunks are indexed again; here: delete them all)."""
        self.delete([d.id for d in self.get_documents()])

    def vectorstore(self, embedding: Embeddings) -> VectorStore:
        """A LangChain vector store over these chunks (the dense side of hybrid search)."""
        return ChunkStoreView(chunks=self, embedding=embedding)

    def connection_spec(self) -> dict[str, Any] | None:
        """How another process opens the same store (`rag.stores.connections`); None: it lives in this one."""
        return None


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
