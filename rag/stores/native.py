"""Dense search on any store of the registry: `NativeFilterRetriever`, the one dense-search retriever.

Each backend's `ChunkStore` (`rag.stores.registry`) translates the portable filter dialect
(`rag.base.filters`) into its engine's own filter and searches with it, so the engine selects the
matching chunks before it ranks them and `k` matching chunks come back whenever `k` exist. An
operator a backend cannot express raises `FilterError` naming the backend and the operator
(`rag.stores.chunk_store.unsupported`): a filter is never weakened.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> store = InMemoryVectorStore(DeterministicFakeEmbedding(size=8))
    >>> _ = store.add_texts(["a", "b"], metadatas=[{"n": 1}, {"n": 2}], ids=["x", "y"])
    >>> retriever = NativeFilterRetriever.over(store)
    >>> retriever.store.backend
    'inmemory'
    >>> [d.id for d in retriever.invoke("a", filter={"n": 2})]
    ['y']
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from pydantic import Field

from rag.base.errors import ConfigError
from rag.base.filters import validate_filter
from rag.base.portable import ChunkSource, PortableRetriever
from rag.stores.chunk_store import scored, unsupported
from rag.stores.registry import chunks_of

__all__ = ["NativeFilterRetriever", "scored", "unsupported"]


class NativeFilterRetriever(PortableRetriever):
    """Dense search through a store's `ChunkStore.search`, the portable filter translated by the backend.

    Attributes:
        store: the chunk store (`rag.stores.registry.chunks_of(vectorstore)`).
        embedding: embeds the query.
        vectorstore: the LangChain vector store it was made from (`over`), if any.
        k: how many chunks to return by default.
        filter: a default portable filter (a per-call `filter=` wins).
    """

    store: Any
    embedding: Embeddings
    vectorstore: Any = None
    k: int = Field(default=4, ge=1)
    filter: dict[str, Any] | None = None

    @classmethod
    def over(cls, vectorstore: Any, **fields: Any) -> NativeFilterRetriever | None:
        """A retriever over a LangChain vector store the registry serves (None: none serves it); ids as stored."""
        chunks = chunks_of(vectorstore, hex_ids=False)
        if chunks is None:
            return None
        return cls(store=chunks, embedding=vectorstore.embeddings, vectorstore=vectorstore, **fields)

    @property
    def chunk_source(self) -> ChunkSource | None:
        """The chunk store (reads chunks back by filter)."""
        return self.store

    def _settings(self, k: int | None, filter: dict[str, Any] | None, kwargs: dict[str, Any]) -> tuple[int, Any]:
        unknown = sorted(set(kwargs) - {"fetch_k", "score_threshold"})
        if unknown:
            raise ConfigError(f"unknown search setting(s) {unknown} for {self.store.backend}; "
                              "valid: k, filter, score_threshold")
        return (self.k if k is None else k), validate_filter(filter if filter is not None else self.filter)

    def search(self, query: str, *, k: int | None = None, filter: dict[str, Any] | None = None,
               **kwargs: Any) -> list[Document]:
        """The search itself, without a retriever run (what `Resource.retrieve` calls: plain similarity goes
        straight to the store, as LangChain's `similarity_search` does); scores in `metadata["score"]`."""
        k, flt = self._settings(k, filter, kwargs)
        vector = self.embedding.embed_query(query)
        return _kept(self.store.search(vector, k=k, filter=flt), kwargs.get("score_threshold"))

    async def asearch(self, query: str, *, k: int | None = None, filter: dict[str, Any] | None = None,
                      **kwargs: Any) -> list[Document]:
        """Async `search`."""
        k, flt = self._settings(k, filter, kwargs)
        vector = await self.embedding.aembed_query(query)
        asearch = getattr(self.store, "asearch", None)
        if asearch is not None:
            hits = await asearch(vector, k=k, filter=flt)
        else:
            hits = await asyncio.to_thread(self.store.search, vector, k=k, filter=flt)
        return _kept(hits, kwargs.get("score_threshold"))

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: int | None = None, filter: dict[str, Any] | None = None,
                                **kwargs: Any) -> list[Document]:
        return self.search(query, k=k, filter=filter, **kwargs)

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       k: int | None = None, filter: dict[str, Any] | None = None,
                                       **kwargs: Any) -> list[Document]:
        return await self.asearch(query, k=k, filter=filter, **kwargs)


def _kept(hits: list[tuple[Document, float]], threshold: float | None) -> list[Document]:
    return [scored(doc, score) for doc, score in hits if threshold is None or score >= threshold]
