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

from typing import Annotated, Any

from langchain_core.embeddings import Embeddings
from pydantic import SkipValidation

from rag.base.portable import ChunkSource, PortableRetriever, Scored
from rag.stores.chunk_store import ChunkStore

__all__ = ["KnowledgeBaseRetriever"]


class KnowledgeBaseRetriever(PortableRetriever):
    """Nearest chunks of a knowledge base's store by cosine similarity of the query embedding.

    Attributes:
        chunks: the knowledge base's `ChunkStore` (a Chroma collection in cosine space, or another
            backend of `rag.stores.chunk_store`).
        embedding: embeds the query (the knowledge base's model).
        k: how many chunks to return.
        filter: a default portable filter, ANDed with a call's `filter=`.
        score_threshold: drop chunks with a lower cosine similarity.
    """

    search_options = ("score_threshold",)

    chunks: Annotated[ChunkStore, SkipValidation]
    embedding: Embeddings
    score_threshold: float | None = None

    @property
    def chunk_source(self) -> ChunkSource | None:
        """The knowledge base's chunk store, read by filter."""
        store: ChunkStore = self.chunks
        return store

    def _search(self, query: str, *, k: int, filter: dict[str, Any] | None, run_manager: Any,
                score_threshold: float | None = None) -> Scored:
        threshold = score_threshold if score_threshold is not None else self.score_threshold
        hits = self.chunks.search(self.embedding.embed_query(query), k=k, filter=filter)
        return [(doc, similarity) for doc, similarity in hits if threshold is None or similarity >= threshold]
