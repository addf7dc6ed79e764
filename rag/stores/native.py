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
from typing import Annotated, Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from pydantic import SkipValidation

from rag.base.portable import ChunkSource, PortableRetriever, Scored
from rag.stores.chunk_store import Capability, ChunkStore, scored, unsupported
from rag.stores.registry import chunks_of

__all__ = ["NativeFilterRetriever", "scored", "unsupported"]


class NativeFilterRetriever(PortableRetriever):
    """Dense search through a store's `ChunkStore.search`, the portable filter translated by the backend.

    Attributes:
        store: the chunk store (`rag.stores.registry.chunks_of(vectorstore)`).
        embedding: embeds the query.
        vectorstore: the LangChain vector store it was made from (`over`), if any.
        k: how many chunks to return by default.
        filter: a default portable filter, ANDed with a call's `filter=`.
    """

    store: Annotated[ChunkStore, SkipValidation]
    embedding: Embeddings
    vectorstore: Any = None

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

    def _search(self, query: str, *, k: int, filter: dict[str, Any] | None, run_manager: Any) -> Scored:
        return self.store.search(self.embedding.embed_query(query), k=k, filter=filter)

    async def _asearch(self, query: str, *, k: int, filter: dict[str, Any] | None, run_manager: Any) -> Scored:
        vector = await self.embedding.aembed_query(query)
        if Capability.ASYNC_SEARCH in self.store.capabilities:
            return await self.store.asearch(vector, k=k, filter=filter)
        return await asyncio.to_thread(self.store.search, vector, k=k, filter=filter)

    def search(self, query: str, *, k: Any = None, filter: Any = None, **options: Any) -> list[Document]:
        """The search with the base class's checks, without a retriever run (what `Resource.retrieve`
        calls: plain similarity goes straight to the store, as LangChain's `similarity_search` does)."""
        return self._get_relevant_documents(query, run_manager=None, k=k, filter=filter, **options)

    async def asearch(self, query: str, *, k: Any = None, filter: Any = None, **options: Any) -> list[Document]:
        """Async `search`."""
        return await self._aget_relevant_documents(query, run_manager=None, k=k, filter=filter, **options)
