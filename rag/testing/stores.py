"""Empty stores of every backend a knowledge base can keep its chunks in, for tests and benchmarks.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> type(empty_store("inmemory", DeterministicFakeEmbedding(size=8), "/tmp", "notes")).__name__
    'InMemoryVectorStore'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

__all__ = ["KB_BACKENDS", "empty_store"]

#: the backends of `rag.stores.chunk_store.VectorStoreChunks` (Chroma is the knowledge base's default)
KB_BACKENDS = ("inmemory", "faiss", "lancedb", "qdrant", "milvus", "pgvector")


def empty_store(backend: str, embedding: Embeddings, workdir: str | Path, name: str, pg_url: str | None = None) -> Any:
    """A new, empty store of `backend` named `name` (files under `workdir`; pgvector in the database at `pg_url`).

    Qdrant runs in memory (its local mode locks a directory per client); Milvus Lite in a file.
    """
    workdir = Path(workdir)
    if backend == "inmemory":
        from langchain_core.vectorstores import InMemoryVectorStore

        return InMemoryVectorStore(embedding)
    if backend == "faiss":
        from rag.stores.faiss import FaissStore

        return FaissStore.open(workdir / f"faiss-{name}", embedding)
    if backend == "lancedb":
        from rag.stores.lancedb import LanceStore

        return LanceStore(embedding, uri=workdir / "lance", table=name)
    if backend == "qdrant":
        from rag.stores.qdrant import open_store

        return open_store(name, embedding, path=":memory:", create=True)
    if backend == "milvus":
        from rag.stores.milvus import open_store

        return open_store(name, embedding, uri=str(workdir / f"milvus-{name}.db"), create=True)
    if backend == "pgvector":
        from rag.stores.pgvector import open_store

        if pg_url is None:
            raise ValueError("the pgvector backend needs pg_url (rag.testing.pg_server.pg_server)")
        return open_store(pg_url, name, embedding, create=True)
    raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(KB_BACKENDS)}")
