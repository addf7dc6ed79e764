"""Opening a knowledge base's server store from another process: a connection spec as data.

A Ray worker (`rag.indexing.ray_executor`) writes chunks to the store itself when the store is a
server every worker can reach, each worker with its own connection:

- PostgreSQL + pgvector (`PGVectorStore`): the SQLAlchemy URL, schema and table;
- a Chroma server (`chromadb.HttpClient`): host, port, TLS, headers, tenant, database, collection.

Every other store (Chroma on disk, FAISS, LanceDB, Qdrant's local mode, Milvus Lite, in memory)
lives in the driver's process or directory: `connection_spec` returns None, and the driver writes
what the workers computed. The spec holds the connection's credentials (a URL with its password,
headers): it is passed to the workers in memory, through the Ray cluster, and never written to disk.

Writes from workers are upserts by id (`upsert_chunks`): a retried task writes the same chunks
again, and must neither fail nor duplicate them.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> from rag.stores.registry import chunks_of
    >>> connection_spec(chunks_of(InMemoryVectorStore(DeterministicFakeEmbedding(size=4)))) is None
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag.stores.chunk_store import ChunkStore
from rag.stores.registry import open_connection

__all__ = ["connection_spec", "open_connection", "upsert_chunks"]


def connection_spec(chunks: ChunkStore) -> dict[str, Any] | None:
    """How another process opens the same store (None: the store lives in this process or its directory)."""
    return chunks.connection_spec()


def upsert_chunks(chunks: ChunkStore, ids: Sequence[str], vectors: Sequence[Sequence[float]], texts: Sequence[str],
                  metadatas: Sequence[dict[str, Any]]) -> None:
    """Write chunks that may already be stored (a retried task): an upsert by id, never a duplicate."""
    chunks.upsert(ids, vectors, texts, metadatas)
