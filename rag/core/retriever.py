"""`RAGRetriever`: a RAG's aggregated retrieval as a plain LangChain `BaseRetriever`.

Useful wherever LangChain expects a retriever (a `ContextualCompressionRetriever`, an agent
tool, `langchain_tests`). `k` and `filter` apply to every resource; the merged result holds at
most `k` documents.

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

from rag.base.portable import PortableRetriever
from rag.core.resource import validate_search_kwargs

if TYPE_CHECKING:
    pass

__all__ = ["RAGRetriever"]


class RAGRetriever(PortableRetriever):
    """Search all resources of a `RAG` and return the aggregated documents.

    Attributes:
        rag: the RAG whose `resources_retrieval_chain` is used (subclass overrides included).
        k: documents per resource and in total; None keeps each resource's default.
        filter: a portable filter applied to every resource.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)


    rag: Any  # a RAG (typed loosely: the RAG module builds this retriever)
    k: int | None = None
    filter: dict[str, Any] | None = None

    def _settings(self, k: int | None, flt: dict[str, Any] | None) -> tuple[dict[str, Any], int | None]:
        k = k if k is not None else self.k
        search = validate_search_kwargs({key: v for key, v in (("k", k), ("filter", flt or self.filter)) if v})
        return {"configurable": {"retrieval_chain": {name: {"search_kwargs": search}
                                                      for name in self.rag.resource_names}}}, k

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
