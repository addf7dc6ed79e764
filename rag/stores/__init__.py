"""Vector-store access: one contract, one module per backend, one registry; nothing else calls a store client.

- `rag.stores.chunk_store`: the store contract: the core every backend implements (`ChunkStore`: add,
  delete, get by ids / by metadata, count, search with the portable filter), the operations shared over
  it (`ChunkStoreBase`) and the optional ones a backend declares (`Capability`), tested by
  `rag.testing.store_conformance.StoreTests`; `vector_store_chunks.VectorStoreChunks`, the core for
  the backends that wrap a LangChain vector store;
- `rag.stores.registry`: every backend, registered once by name and by the vector store class it
  serves, imported on first use (`chunks_of(vectorstore)`, `names()`, `open_store(name, ...)`);
- one module per backend: `chroma_chunks` (over `chroma` and `chroma_collection`, the only modules that call chromadb),
  `pgvector`, `qdrant`, `milvus`, `lancedb` (`LanceStore`), `faiss` (`FaissStore`), `inmemory`;
- store layouts with a chunk store of their own: `partitioned` (`PartitionedChroma`) and `memory`
  (`ExactVectorStore`).

Code outside `rag.stores` names no backend and imports no backend module: it asks the registry,
or takes the store classes from this package (`from rag.stores import ExactVectorStore`), which
imports their module on first use. See docs/stores.md and docs/development.md ("add a backend").
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ExactRetriever", "ExactVectorStore", "FaissStore", "LanceStore", "PartitionIndex", "PartitionedChroma",
           "PartitionedRetriever"]

_LAZY = {"ExactRetriever": "rag.stores.memory", "ExactVectorStore": "rag.stores.memory",
         "FaissStore": "rag.stores.faiss", "LanceStore": "rag.stores.lancedb",
         "PartitionIndex": "rag.stores.partition_index", "PartitionedChroma": "rag.stores.partitioned",
         "PartitionedRetriever": "rag.stores.partitioned_chunks"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rag.stores' has no attribute {name!r}")
