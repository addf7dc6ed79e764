"""`RAGRetriever`: a RAG's aggregated retrieval as a plain LangChain `BaseRetriever`.

Useful wherever LangChain expects a retriever (a `ContextualCompressionRetriever`, an agent
tool, `langchain_tests`). `k` and `filter` are the chain's per-request settings (the context
holds at most `k` documents; the filter applies to every resource).

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from rag import RAG, Resource
    >>> emb = DeterministicFakeEmbedding(size=8)
    >>> rag = RAG(resources=[Resource.from_texts("a", ["x", "y"], embedding=emb),
    ...                      Resource.from_texts("b", ["z"], embedding=emb)])
    >>> len(RAGRetriever(rag=rag, k=2).invoke("q"))
    2
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from pydantic import ConfigDict

from rag.base.errors import ConfigError
from rag.base.filters import and_filters, validate_filter
from rag.base.portable import PortableRetriever

if TYPE_CHECKING:
    pass

__all__ = ["RAGRetriever"]


class RAGRetriever(PortableRetriever):
    """Search all resources of a `RAG` and return the aggregated documents.

    Attributes:
        rag: the RAG whose `resources_retrieval_chain` is used (subclass overrides included).
        k: documents in the context; None keeps the RAG's.
        filter: a portable filter applied to every resource (ANDed with the RAG's own).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)


    rag: Any  # a RAG (typed loosely: the RAG module builds this retriever)
    k: int | None = None
    filter: dict[str, Any] | None = None

    def _settings(self, k: int | None, flt: dict[str, Any] | None) -> tuple[dict[str, Any], int | None]:
        k = k if k is not None else self.k
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ConfigError(f"k must be a positive integer, got {k!r}")
        flt = and_filters(validate_filter(self.filter), validate_filter(flt))
        return {"configurable": {key: value for key, value in (("k", k), ("filter", flt)) if value}}, k

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: int | None = None, filter: dict[str, Any] | None = None) -> list[Document]:
        config, k = self._settings(k, filter)
        docs = self.rag.resources_retrieval_chain.invoke(query, {**config, "callbacks": run_manager.get_child()})
        return docs[:k] if k else docs

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       k: int | None = None, filter: dict[str, Any] | None = None) -> list[Document]:
        config, k = self._settings(k, filter)
        docs = await self.rag.resources_retrieval_chain.ainvoke(query, {**config, "callbacks": run_manager.get_child()})
        return docs[:k] if k else docs
