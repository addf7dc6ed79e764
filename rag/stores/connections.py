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
    >>> from rag.stores.chunk_store import VectorStoreChunks
    >>> connection_spec(VectorStoreChunks(InMemoryVectorStore(DeterministicFakeEmbedding(size=4)))) is None
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag.base.errors import ConfigError
from rag.stores import chroma
from rag.stores.chunk_store import ChromaChunkStore, ChunkStore, VectorStoreChunks

__all__ = ["connection_spec", "open_connection", "upsert_chunks"]

_BATCH = 1000


def connection_spec(chunks: ChunkStore) -> dict[str, Any] | None:
    """How another process opens the same store (None: the store lives in this process or its directory)."""
    if isinstance(chunks, VectorStoreChunks) and chunks.backend == "pgvector":
        from rag.stores.pgvector import connection_of

        return {"backend": "pgvector", **connection_of(chunks.store)}
    if isinstance(chunks, ChromaChunkStore) and chunks.client is not None:
        settings = chunks.client.get_settings()
        if settings.chroma_server_host:   # an HttpClient (a persistent client has no host)
            return {"backend": "chroma", "host": settings.chroma_server_host,
                    "port": int(settings.chroma_server_http_port), "ssl": bool(settings.chroma_server_ssl_enabled),
                    "headers": dict(settings.chroma_server_headers or {}), "tenant": chunks.client.tenant,
                    "database": chunks.client.database, "collection": chunks.collection.name}
    return None


def open_connection(spec: dict[str, Any], embedding: Any) -> ChunkStore:
    """The store a `connection_spec` names, opened in this process (it must exist)."""
    if spec.get("backend") == "pgvector":
        from rag.stores.pgvector import open_store

        return VectorStoreChunks(open_store(spec["url"], spec["table"], embedding, schema=spec["schema"]))
    if spec.get("backend") == "chroma":
        client = chroma.http_client(spec["host"], spec["port"], ssl=spec["ssl"], headers=spec["headers"])
        client.set_tenant(spec["tenant"], spec["database"])
        return ChromaChunkStore(chroma.open_collection(client, spec["collection"], create=False), client=client)
    raise ConfigError(f"no worker connection for a store spec of backend {spec.get('backend')!r}; "
                      "valid: pgvector, chroma (a Chroma server)")


def upsert_chunks(chunks: ChunkStore, ids: Sequence[str], vectors: Sequence[Sequence[float]], texts: Sequence[str],
                  metadatas: Sequence[dict[str, Any]]) -> None:
    """Write chunks that may already be stored (a retried task): an upsert by id, never a duplicate."""
    if isinstance(chunks, ChromaChunkStore):
        for start in range(0, len(ids), _BATCH):
            part = slice(start, start + _BATCH)
            chunks.collection.upsert(ids=list(ids[part]), embeddings=[list(v) for v in vectors[part]],
                                     documents=list(texts[part]), metadatas=list(metadatas[part]))
    elif isinstance(chunks, VectorStoreChunks) and chunks.backend == "pgvector":
        chunks.add(ids, vectors, texts, metadatas)   # PGVectorStore's insert is ON CONFLICT (id) DO UPDATE
    else:
        raise ConfigError(f"{chunks.backend}: workers write only to pgvector and Chroma servers")
