"""`KnowledgeBase`: a persistent, incrementally updated knowledge base you can search.

The storage side (ingest, records, manifest, reads, dense search) is
`rag.indexing.knowledge_base.KnowledgeStore`; this class adds the retrievers built on other
layers: hybrid search (`as_hybrid_retriever`) and a `Resource` for `RAG` (`as_resource`).

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.documents import Document
    >>> import tempfile
    >>> kb = KnowledgeBase("notes", tempfile.mkdtemp(), embedding=DeterministicFakeEmbedding(size=16))
    >>> kb.add_documents([Document(page_content="Paris is in France.", metadata={"source": "geo"})]).added
    ['geo']
    >>> res = kb.as_resource()
    >>> [d.page_content for d in res.retrieve("Paris")]
    ['Paris is in France.']
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from rag.compose.resource import Resource
from rag.indexing.knowledge_base import KnowledgeStore
from rag.retrieval.kb_search import (
    knowledge_base_retriever,
    knowledge_base_router,
    knowledge_base_sections,
)

__all__ = ["KnowledgeBase"]

logger = logging.getLogger(__name__)


class KnowledgeBase(KnowledgeStore):
    """A persistent knowledge base: add, update, delete, search documents, and use it as a `Resource`.

    Takes the arguments of `KnowledgeStore` (name, directory, embedding, chunker, autocontext,
    tagger, description, cache, lock_timeout); ``directory=None`` keeps it in memory.
    """

    def as_hybrid_retriever(self, *, k: int = 4, fusion: str = "rrf", weights: dict[str, float] | None = None,
                            fetch_k: int = 20, rrf_k: int = 60, bm25_settings: dict[str, Any] | None = None,
                            chunks: Sequence[Document] | None = None) -> BaseRetriever:
        """A `HybridRetriever`: dense search over this knowledge base's collection and BM25 over its chunks, fused.

        The BM25 index is built now, in memory, from the chunks stored at this moment (title and
        section indexed with the text by default); build the retriever again after the knowledge
        base changes. `chunks`: the stored chunks, when the caller has read them already.

        Raises:
            ConfigError: the knowledge base is empty, or a fusion setting is invalid.
        """
        return knowledge_base_retriever(self, search="hybrid", k=k, fusion=fusion, weights=weights, fetch_k=fetch_k,
                                        rrf_k=rrf_k, bm25_settings=bm25_settings, chunks=chunks)

    def as_resource(self, *, name: str | None = None, search: str = "hybrid", routing: str | bool = "auto",
                    search_kwargs: dict[str, Any] | None = None, description: str | None = None,
                    hybrid: dict[str, Any] | None = None, sections: dict[str, Any] | None = None) -> Resource:
        """A `Resource` searching this knowledge base (for `RAG(resources=[...])`).

        Args:
            name: the resource name (default: the knowledge base's name).
            search: ``"hybrid"`` (default: dense + BM25 fused), ``"dense"`` or ``"bm25"``
                (`rag.retrieval.kb_search`).
            routing: ``"auto"`` (default: once the knowledge base holds at least 8 documents, a
                question that names documents, by a capitalised word, an acronym or letters with
                digits matching their title or file name, searches only them), ``"on"`` or ``"off"``.
                The resource carries the `DocumentRouter`; the pipeline's routing stage applies it.
            search_kwargs: default search settings (`k`, `filter`, ...).
            description: what it holds (default: the manifest's description).
            hybrid: fusion settings for hybrid search (``fusion``, ``weights``, ``fetch_k``,
                ``rrf_k``, ``bm25_settings``).
            sections: promote the sections a question names (the pipeline's named-section stage):
                ``at`` and the `SectionRouter` settings; ``{}`` for the defaults; None (default): off.

        BM25 and sections read the stored chunks now: build the resource again after the
        knowledge base changes.
        """
        if search != "dense" and hybrid is None and sections is None and self.count() == 0:
            # nothing to build BM25 from yet: dense until the resource is built again after indexing
            logger.info("knowledge base %r is empty: searching it dense until it is rebuilt", self.name)
            search = "dense"
        chunks = self.get_documents() if sections is not None and search != "dense" else None
        retriever = knowledge_base_retriever(self, search=search, chunks=chunks, **(hybrid or {}))
        return Resource(name=name or self.name, retriever=retriever,
                        description=self.manifest.description if description is None else description,
                        search_kwargs=search_kwargs or {}, router=knowledge_base_router(self, routing),
                        sections=knowledge_base_sections(self, sections, chunks))
