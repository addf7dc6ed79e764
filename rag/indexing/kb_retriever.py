"""`KnowledgeBaseRetriever`: dense search over a knowledge base's Chroma collection.

It applies `k`, the portable `filter` (translated with `rag.base.filters.to_chroma_where`) and
`score_threshold` itself, so `Resource` passes them through (`accepts_portable_filter`).
Each returned chunk has its store id as `Document.id` and its cosine similarity as
`metadata["score"]`.

Example:
    >>> kb = KnowledgeBase("docs", ".rag")                         # doctest: +SKIP
    >>> kb.as_retriever(k=2).invoke("revenue", filter={"page": {"$lt": 3}})   # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from pydantic import Field

from rag.base.errors import ConfigError
from rag.base.filters import to_chroma_where, validate_filter
from rag.base.portable import ChunkSource, PortableRetriever
from rag.stores.chroma import ChromaChunks, count, query_collection

__all__ = ["KnowledgeBaseRetriever"]


class KnowledgeBaseRetriever(PortableRetriever):
    """Nearest chunks of a Chroma collection by cosine similarity of the query embedding.

    Attributes:
        collection: the `chromadb` collection (cosine space).
        embedding: embeds the query (the knowledge base's model).
        k: how many chunks to return.
        filter: a default portable filter (per-call `filter=` wins).
        score_threshold: drop chunks with a lower cosine similarity.
    """

    collection: Any
    embedding: Embeddings
    k: int = Field(default=4, ge=1)
    filter: dict[str, Any] | None = None
    score_threshold: float | None = None

    @property
    def chunk_source(self) -> ChunkSource | None:
        """The knowledge base's collection, read by filter."""
        return ChromaChunks(self.collection)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: int | None = None, filter: dict[str, Any] | None = None,
                                score_threshold: float | None = None, **kwargs: Any) -> list[Document]:
        unknown = sorted(set(kwargs) - {"fetch_k", "lambda_mult"})
        if unknown:
            raise ConfigError(f"unknown search setting(s) {unknown}; valid: k, filter, score_threshold")
        k = self.k if k is None else k
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"k must be a positive integer, got {k!r}")
        flt = validate_filter(filter if filter is not None else self.filter)
        threshold = score_threshold if score_threshold is not None else self.score_threshold
        total = count(self.collection)
        if total == 0:
            return []
        hits = query_collection(self.collection, self.embedding.embed_query(query), k=min(k, total),
                                where=to_chroma_where(flt) if flt else None)
        docs = []
        for doc, distance in hits:  # fresh documents from this call: annotate in place
            doc.metadata["score"] = 1.0 - distance
            if threshold is None or doc.metadata["score"] >= threshold:
                docs.append(doc)
        return docs
