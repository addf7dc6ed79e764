"""A `PartitionedChroma` as a `ChunkStore`, and `PartitionedRetriever`, its retriever.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from rag.stores.partitioned import PartitionedChroma
    >>> store = PartitionedChroma("r", DeterministicFakeEmbedding(size=8), partition_key="tenant")
    >>> _ = store.add_texts(["a", "b"], metadatas=[{"tenant": "x"}, {"tenant": "y"}])
    >>> [d.page_content for d in store.as_retriever().invoke("a", filter={"tenant": "y"})]
    ['b']
    >>> store.chunk_store().count()
    2
"""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document

from rag.stores.chunk_store import Capability
from rag.stores.layout_retriever import LayoutRetriever
from rag.stores.vector_store_chunks import VectorStoreChunks

__all__ = ["PartitionedChunks", "PartitionedRetriever"]


class PartitionedChunks(VectorStoreChunks):
    """A `PartitionedChroma` as a `ChunkStore` (relevance = 1 - cosine distance; no update in place)."""

    backend = "chroma-partitioned"
    capabilities = frozenset({Capability.ASYNC_SEARCH})   # (no update in place)

    def _native_search(self, vector: list[float], *, k: int,
                       flt: dict[str, Any] | None) -> list[tuple[Document, float]]:
        return [(doc, 1.0 - dist) for doc, dist in self.store.search_by_vector(vector, k=k, filter=flt)]

    def count(self) -> int:
        return self.store.count()

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        return self.store.get_documents(filter)

    def _write(self, ids: list[str], vectors: list[list[float]], texts: list[str],
               metadatas: list[dict[str, Any]]) -> None:
        self.store.add_embeddings(vectors, metadatas=metadatas, documents=texts, ids=ids)


class PartitionedRetriever(LayoutRetriever):
    """Search a `PartitionedChroma`; documents get ``metadata["score"]`` (cosine similarity).

    Attributes:
        store: the `PartitionedChroma`.
        k: how many chunks to return by default.
        filter: a default portable filter, ANDed with a call's `filter=`.
    """
