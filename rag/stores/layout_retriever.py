"""`LayoutRetriever`: dense search over a store layout that serves its chunks through a chunk store of its own."""

from __future__ import annotations

from typing import Any

from rag.base.portable import ChunkSource, PortableRetriever, Scored

__all__ = ["LayoutRetriever"]


class LayoutRetriever(PortableRetriever):
    """Dense search over a store layout that embeds queries itself (`store.embeddings`) and serves its chunks
    through its own chunk store (`store.chunk_store()`): `ExactVectorStore`, `PartitionedChroma`.

    Documents get ``metadata["score"]`` (by the base class) and ``metadata["scores"] = {"dense": ...}``.
    """

    store: Any

    @property
    def chunk_source(self) -> ChunkSource | None:
        """The store (reads chunks by filter)."""
        return self.store

    def _search(self, query: str, *, k: int, filter: dict[str, Any] | None, run_manager: Any) -> Scored:
        hits = self.store.chunk_store().search(self.store.embeddings.embed_query(query), k=k, filter=filter)
        for doc, score in hits:   # fresh copies from this call: annotate in place
            doc.metadata["scores"] = {"dense": score}
        return hits
