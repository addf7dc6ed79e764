"""`KnowledgeBaseRetriever`: dense search over a knowledge base's chunk store.

The store is a `rag.stores.chunk_store.ChunkStore` (a Chroma collection, or another backend that
translates the portable filter natively). The retriever applies `k`, the portable `filter` and
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
from rag.base.filters import validate_filter
from rag.base.portable import ChunkSource, PortableRetriever
from rag.stores.chunk_store import ChunkStore

__all__ = ["KnowledgeBaseRetriever"]


class KnowledgeBaseRetriever(PortableRetriever):
    """Nearest chunks of a knowledge base's store by cosine similarity of the query embedding.

    Attributes:
        chunks: the knowledge base's `ChunkStore` (a Chroma collection in cosine space, or another
            backend of `rag.stores.chunk_store`).
        embedding: embeds the query (the knowledge base's model).
        k: how many chunks to return.
        filter: a default portable filter (per-call `filter=` wins).
        score_threshold: drop chunks with a lower cosine similarity.
    """

    chunks: Any
    embedding: Embeddings
    k: int = Field(default=4, ge=1)
    filter: dict[str, Any] | None = None
    score_threshold: float | None = None

    @property
    def chunk_source(self) -> ChunkSource | None:
        """The knowledge base's chunk store, read by filter."""
        store: ChunkStore = self.chunks
        return store

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
        hits = self.chunks.search(self.embedding.embed_query(query), k=k, filter=flt)
        docs = []
        for doc, similarity in hits:  # fresh documents from this call: annotate in place
            doc.metadata["score"] = similarity
            if threshold is None or doc.metadata["score"] >= threshold:
                docs.append(doc)
        return docs
