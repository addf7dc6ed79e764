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

from numbers import Real
from typing import Annotated, Any, Protocol, runtime_checkable

from langchain_core.documents import Document
from langchain_core.runnables import Runnable
from pydantic import SkipValidation

from rag.base.portable import PortableRetriever, Scored

__all__ = ["RAGRetriever", "SearchesResources"]


@runtime_checkable
class SearchesResources(Protocol):
    """What `RAGRetriever` needs of a `RAG`: its aggregated retrieval over every resource."""

    @property
    def resources_retrieval_chain(self) -> Runnable[str, list[Document]]: ...


class RAGRetriever(PortableRetriever):
    """Search all resources of a `RAG` and return the aggregated documents.

    Attributes:
        rag: the RAG whose `resources_retrieval_chain` is used (subclass overrides included).
        k: documents in the context; None keeps the RAG's (a call's `k=` wins, checked by `PortableRetriever`).
        filter: a portable filter applied to every resource (ANDed with a call's and the RAG's own).
    """

    rag: Annotated[SearchesResources, SkipValidation]  # a RAG (which builds this retriever: `RAG.as_retriever`)
    k: int | None = None

    def _config(self, k: int | None, flt: dict[str, Any] | None, callbacks: Any) -> dict[str, Any]:
        settings = {key: value for key, value in (("k", k), ("filter", flt)) if value}
        return {"configurable": settings, "callbacks": callbacks}

    def _search(self, query: str, *, k: int | None, filter: dict[str, Any] | None, run_manager: Any) -> Scored:
        docs = self.rag.resources_retrieval_chain.invoke(query, self._config(k, filter, run_manager.get_child()))
        return _with_scores(docs[:k] if k else docs)

    async def _asearch(self, query: str, *, k: int | None, filter: dict[str, Any] | None,
                       run_manager: Any) -> Scored:
        docs = await self.rag.resources_retrieval_chain.ainvoke(query, self._config(k, filter,
                                                                                    run_manager.get_child()))
        return _with_scores(docs[:k] if k else docs)


def _with_scores(docs: list[Document]) -> Scored:
    # the chain's documents carry their fused score already (None: an RSE segment's own, kept as is)
    scores = [doc.metadata.get("score") for doc in docs]
    return [(doc, score if isinstance(score, Real) and not isinstance(score, bool) else None)
            for doc, score in zip(docs, scores, strict=True)]
