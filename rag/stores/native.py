"""Native filtered search: which store module serves a vector store, and the retriever over it.

Each backend module (`rag.stores.qdrant`, `rag.stores.pgvector`, `rag.stores.milvus`,
`rag.stores.inmemory`, `rag.stores.faiss`, `rag.stores.lancedb`) translates the portable filter dialect (`rag.base.filters`) into its
engine's own filter and searches with it, so the engine selects the matching chunks before it
ranks them and `k` matching chunks come back whenever `k` exist. The registry below maps a store
class to its module by name, so no backend package is imported until a store of that kind is used.

An operator a backend cannot express raises `FilterError` naming the backend and the operator
(`unsupported`): a filter is never weakened.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> store = InMemoryVectorStore(DeterministicFakeEmbedding(size=8))
    >>> _ = store.add_texts(["a", "b"], metadatas=[{"n": 1}, {"n": 2}], ids=["x", "y"])
    >>> search = native_search_for(store)
    >>> search.backend
    'inmemory'
    >>> [d.id for d in NativeFilterRetriever(store=store, search=search).invoke("a", filter={"n": 2})]
    ['y']
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any, Protocol

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from rag.base.errors import FilterError
from rag.base.portable import PortableRetriever, Scored

__all__ = ["BACKENDS", "NativeFilterRetriever", "NativeSearch", "native_search_for", "scored", "unsupported"]

#: (module prefix of the store class, class name) -> the rag.stores module that searches it natively.
BACKENDS: dict[tuple[str, str], str] = {
    ("langchain_core.vectorstores", "InMemoryVectorStore"): "rag.stores.inmemory",
    ("langchain_qdrant", "QdrantVectorStore"): "rag.stores.qdrant",
    ("langchain_postgres", "PGVectorStore"): "rag.stores.pgvector",
    ("langchain_milvus", "Milvus"): "rag.stores.milvus",
    ("rag.stores.faiss", "FaissStore"): "rag.stores.faiss",
    ("rag.stores.lancedb", "LanceStore"): "rag.stores.lancedb",
    ("rag.stores.chunk_view", "ChunkStoreView"): "rag.stores.chunk_view",   # a knowledge base's store
}


class NativeSearch(Protocol):
    """What a backend module exports as `SEARCH`."""

    backend: str

    def search(self, store: Any, vector: list[float], *, k: int,
               flt: dict[str, Any] | None) -> list[tuple[Document, float]]:
        """The `k` chunks closest to `vector` among those `flt` (canonical) allows: (document, relevance)."""
        ...


def native_search_for(store: Any) -> NativeSearch | None:
    """The native search of `store`'s backend, or None when no module here serves that store type."""
    for cls in type(store).__mro__:
        for (prefix, name), module in BACKENDS.items():
            if cls.__name__ == name and cls.__module__.startswith(prefix):
                return importlib.import_module(module).SEARCH
    return None


def unsupported(backend: str, op: str, why: str) -> FilterError:
    """The error for a filter a backend cannot express (raised, never weakened into another filter)."""
    return FilterError(f"{backend} cannot express {op}: {why}; drop that condition or use a backend that can "
                       "(see docs/stores.md)")


def scored(doc: Document, relevance: float) -> Document:
    """A copy of `doc` with its relevance in `metadata["score"]` (the stored metadata is not changed)."""
    return Document(page_content=doc.page_content, metadata={**doc.metadata, "score": float(relevance)}, id=doc.id)


class NativeFilterRetriever(PortableRetriever):
    """Dense search on a vector store with the portable filter translated to the store's own filter.

    Attributes:
        store: the vector store.
        search: its backend's `NativeSearch` (`native_search_for(store)`).
        k: how many chunks to return by default.
        filter: a default portable filter, ANDed with a call's `filter=`.
    """

    search_options = ("score_threshold",)

    store: VectorStore
    search: Any

    def _search(self, query: str, *, k: int, filter: dict[str, Any] | None, run_manager: Any,
                score_threshold: float | None = None) -> Scored:
        vector = self.store.embeddings.embed_query(query)
        return _kept(self.search.search(self.store, vector, k=k, flt=filter), score_threshold)

    async def _asearch(self, query: str, *, k: int, filter: dict[str, Any] | None, run_manager: Any,
                       score_threshold: float | None = None) -> Scored:
        vector = await self.store.embeddings.aembed_query(query)
        asearch = getattr(self.search, "asearch", None)
        if asearch is not None:
            hits = await asearch(self.store, vector, k=k, flt=filter)
        else:
            hits = await asyncio.to_thread(self.search.search, self.store, vector, k=k, flt=filter)
        return _kept(hits, score_threshold)


def _kept(hits: list[tuple[Document, float]], threshold: float | None) -> Scored:
    return [(doc, score) for doc, score in hits if threshold is None or score >= threshold]
