"""`PortableRetriever`: the base of the project's retrievers that take `k` and a portable `filter` per call.

`Resource` passes `k` and the portable filter dialect (`rag.core.filters`) to a retriever whose
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
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

__all__ = ["PortableRetriever"]


class PortableRetriever(BaseRetriever):
    """A `BaseRetriever` taking `k` and a portable `filter` per call, on the sync and the async path."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    accepts_portable_filter: ClassVar[bool] = True

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        # the default async path would drop k and filter; the work is CPU / blocking I/O
        return await asyncio.to_thread(self._get_relevant_documents, query, run_manager=run_manager.get_sync(),
                                       **kwargs)
