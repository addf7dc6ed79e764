"""The retriever contracts: `PortableRetriever` (takes `k` and a portable `filter` per call) and
`ChunkSource` (reads stored chunks by filter, for neighbour expansion and RSE).

`Resource` passes `k` and the portable filter dialect (`rag.base.filters`) to a retriever whose
class says `accepts_portable_filter`. LangChain's default async path calls the sync method without
those keyword arguments, so every such retriever also needs an async method that keeps them; the
work behind them (embedding, Chroma, numpy) is blocking, so it runs in a worker thread.

Example:
    >>> from langchain_core.documents import Document
    >>> class Echo(PortableRetriever):
    ...     def _get_relevant_documents(self, query, *, run_manager, k=None, filter=None, **kwargs):
    ...         return [Document(page_content=f"{query} k={k}")]
    >>> import asyncio
    >>> asyncio.run(Echo().ainvoke("q", k=2))[0].page_content
    'q k=2'

A retriever whose chunks can be read back (a knowledge base, a BM25 index, a Chroma store)
returns them from its `chunk_source` property; a wrapper returns its inner retriever's.
`find_chunk_source(retriever)` asks the retriever, so `retrieve()` never probes attributes:

    >>> class Chunks:
    ...     def get_documents(self, filter=None):
    ...         return [Document(page_content="c")]
    >>> isinstance(Chunks(), ChunkSource)
    True
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar, Protocol, runtime_checkable

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

__all__ = ["ChunkSource", "PortableRetriever", "find_chunk_source"]


@runtime_checkable
class ChunkSource(Protocol):
    """Stored chunks readable by a portable filter (`{"doc_id": ..., "chunk_index": {"$in": [...]}}`)."""

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        """Chunks matching `filter` (all when None), in no particular order."""
        ...


def find_chunk_source(retriever: Any) -> ChunkSource | None:
    """The retriever's `chunk_source` (None when it has none, e.g. a web search retriever)."""
    source = getattr(type(retriever), "chunk_source", None)
    if source is None:
        return _vectorstore_source(retriever)
    found = retriever.chunk_source
    return found if isinstance(found, ChunkSource) else None


def _vectorstore_source(retriever: Any) -> ChunkSource | None:
    # LangChain's VectorStoreRetriever: its store, when the store reads chunks back by filter
    store = getattr(retriever, "vectorstore", None)
    return store if isinstance(store, ChunkSource) else None


class PortableRetriever(BaseRetriever):
    """A `BaseRetriever` taking `k` and a portable `filter` per call, on the sync and the async path."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    accepts_portable_filter: ClassVar[bool] = True

    @property
    def chunk_source(self) -> ChunkSource | None:
        """Where this retriever's chunks can be read back (None: nowhere). Wrappers return their inner one's."""
        return None

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        # the default async path would drop k and filter; the work is CPU / blocking I/O
        return await asyncio.to_thread(self._get_relevant_documents, query, run_manager=run_manager.get_sync(),
                                       **kwargs)
