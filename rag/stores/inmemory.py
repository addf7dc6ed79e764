"""Exact filtered search on LangChain's `InMemoryVectorStore`.

The store keeps every chunk in a dict (`store.store`: id -> vector, text, metadata). A filtered
search selects the chunks the portable filter matches first (the Python matcher, the dialect's
reference semantics), then scores only those by cosine similarity: exact, and `k` results
whenever `k` chunks match. LangChain's own `filter=` takes a Python callable; this module never
passes one.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> store = InMemoryVectorStore(DeterministicFakeEmbedding(size=8))
    >>> _ = store.add_texts(["a", "b", "c"], metadatas=[{"n": 1}, {"n": 2}, {}], ids=["x", "y", "z"])
    >>> vector = store.embeddings.embed_query("a")
    >>> sorted(d.id for d, _ in InMemoryChunks(store).search(vector, k=5, filter={"n": {"$ne": 1}}))
    ['y', 'z']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from langchain_core.documents import Document

from rag.base.filters import matches_canonical
from rag.stores.chunk_store import Capability
from rag.stores.vector_store_chunks import VectorStoreChunks

__all__ = ["open_store", "scratch_store", "STORE", "InMemoryChunks"]


class InMemoryChunks(VectorStoreChunks):
    """The `ChunkStore` of `langchain_core.vectorstores.InMemoryVectorStore` (its documented dict:
    ``store.store`` = {id: {id, vector, text, metadata}})."""

    backend = "inmemory"
    capabilities = VectorStoreChunks.capabilities | {Capability.STORED_VECTORS}

    def get_vectors(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """Stored vectors by id (ids not stored are absent)."""
        rows = self.store.store
        return {id_: list(rows[id_]["vector"]) for id_ in ids if id_ in rows}

    def _native_search(self, vector: list[float], *, k: int,
                       flt: dict[str, Any] | None) -> list[tuple[Document, float]]:
        """The `k` matching chunks of highest cosine similarity to `vector`, best first."""
        rows = [row for row in self.store.store.values() if flt is None or matches_canonical(row["metadata"], flt)]
        if not rows:
            return []
        matrix = np.asarray([row["vector"] for row in rows], dtype=np.float32)
        query = np.asarray(vector, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(query)), 1e-12)
        scores = matrix @ query / np.where(norms == 0, 1.0, norms)
        order = np.argsort(-scores, kind="stable")[:k]
        return [(Document(page_content=rows[i]["text"], metadata=dict(rows[i]["metadata"]), id=rows[i]["id"]),
                 float(scores[i])) for i in order]

    def count(self) -> int:
        return len(self.store.store)

    def _write(self, ids: list[str], vectors: list[list[float]], texts: list[str],
               metadatas: list[dict[str, Any]]) -> None:
        for id_, vector, text, md in zip(ids, vectors, texts, metadatas, strict=True):
            self.store.store[id_] = {"id": id_, "vector": vector, "text": text, "metadata": dict(md)}

    def _delete(self, ids: list[str]) -> None:
        for id_ in ids:
            self.store.store.pop(id_, None)

    def _update(self, ids: list[str], metadatas: list[dict[str, Any]]) -> None:
        for id_, md in zip(ids, metadatas, strict=True):
            if id_ in self.store.store:
                self.store.store[id_]["metadata"] = md


STORE = InMemoryChunks


def open_store(embedding: Any) -> Any:
    """A new, empty `InMemoryVectorStore` (it lives in this process only)."""
    from langchain_core.vectorstores import InMemoryVectorStore

    return InMemoryVectorStore(embedding)


def scratch_store(embedding: Any, workdir: Any, name: str, *, url: str | None = None) -> Any:
    """A new, empty `InMemoryVectorStore` (for tests and benchmarks)."""
    return open_store(embedding)
