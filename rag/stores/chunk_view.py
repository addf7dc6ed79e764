"""`ChunkStoreView`: a knowledge base's chunk store as a read-only LangChain vector store.

Hybrid search and every other consumer of a `VectorStore` search a knowledge base on another
backend through it; `rag.stores.registry.chunks_of(view)` is the chunk store behind it, so results
carry the chunk ids the knowledge base wrote (not a backend's UUID form of them).
"""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from rag.base.errors import ConfigError

__all__ = ["ChunkStoreView"]


class ChunkStoreView(VectorStore):
    """A read-only LangChain vector store over a `VectorStoreChunks` (ids as the knowledge base wrote them).

    `chunk_store()` is the chunk store behind it (`rag.stores.registry.chunks_of`), so hybrid search and
    every other consumer of a vector store get the knowledge base's chunk ids (not a backend's UUID form).
    """

    def __init__(self, *, chunks: Any, embedding: Embeddings) -> None:
        self.chunks, self._embedding = chunks, embedding

    def chunk_store(self) -> Any:
        """The knowledge base's chunk store behind this view."""
        return self.chunks

    @property
    def embeddings(self) -> Embeddings:
        return self._embedding

    def add_texts(self, texts: Any, metadatas: Any = None, **kwargs: Any) -> list[str]:
        raise ConfigError("a knowledge base's store is written by indexing: use kb.add_documents(...)")

    @classmethod
    def from_texts(cls, texts: Any, embedding: Embeddings, metadatas: Any = None, **kwargs: Any) -> ChunkStoreView:
        raise ConfigError("a ChunkStoreView is made by a knowledge base (kb.chunks.vectorstore(...))")

    def similarity_search_with_score(self, query: str, k: int = 4, filter: dict[str, Any] | None = None,
                                     **kwargs: Any) -> list[tuple[Document, float]]:
        """(chunk, cosine similarity) pairs, best first; `filter` is a portable filter."""
        return self.chunks.search(self._embedding.embed_query(query), k=k, filter=filter)

    def similarity_search(self, query: str, k: int = 4, filter: dict[str, Any] | None = None,
                          **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k=k, filter=filter)]

    def _select_relevance_score_fn(self):
        return lambda score: score   # cosine similarities already
