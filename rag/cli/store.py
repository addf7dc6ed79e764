"""How `rag ask`, `rag eval`, `rag serve` and `rag mcp` open their knowledge base and build its one chain.

The options saying where it is (`--store`, `--collection`, `--backend`) are declared and resolved in
`rag.cli.request` (a `StoreRequest`); they are re-exported here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rag.base.errors import StoreError
from rag.cli.request import DEFAULT_COLLECTION, DEFAULT_STORE, StoreRequest, backend_opener, store_args

__all__ = ["DEFAULT_COLLECTION", "DEFAULT_STORE", "backend_opener", "open_store_resource", "store_args", "store_rag"]


def open_store_resource(store: str, collection: str, *, search: str = "hybrid",
                        backend: Callable[[Any], Any] | None = None) -> Any:
    """A `Resource` over an existing knowledge base or persistent collection; a clear error when missing.

    `backend` (from `backend_opener`) opens the store a knowledge base keeps its chunks in, when not Chroma.
    """
    from rag.compose.knowledge_base import KnowledgeBase
    from rag.compose.resource import Resource
    from rag.indexing.manifest import list_knowledge_bases
    from rag.models.embeddings import default_embeddings
    from rag.stores.registry import collections, holds_store, local_client, new_vectorstore, store_name

    if backend is not None:   # its chunks elsewhere; manifest and records in that engine (pgvector, Qdrant, Milvus) or `store`
        return KnowledgeBase.open(collection, store, store=backend(default_embeddings())).as_resource(search=search)
    if collection in list_knowledge_bases(store):   # (one on another backend says how to open it)
        return KnowledgeBase.open(collection, store).as_resource(search=search)
    # Asking never creates: no directory, or a directory without a store, is an error (not an empty store).
    if not Path(store).is_dir() or not holds_store(store):
        what = "no such directory" if not Path(store).is_dir() else "the directory holds no rag store"
        raise StoreError(f"no store at {store!r} ({what}); create one with: rag index PATH --store {store}")
    client = local_client(store)
    names = collections(client)
    if store_name(collection) not in names:
        raise StoreError(f"no collection {collection!r} in {store!r}; available: {', '.join(names) or '(none)'}")
    return Resource.from_vectorstore(collection, new_vectorstore(collection, default_embeddings(), client=client))


def store_rag(where: StoreRequest | argparse.Namespace) -> Any:
    """The `RAG` of `rag ask`, `rag eval qa`, `rag mcp --store` and `rag serve --store`: the store's one chain.

    `where`: the command's `StoreRequest` (resolved once at the door), or parsed arguments holding the store
    options (resolved here).
    """
    from rag.compose.generator import RAG

    if not isinstance(where, StoreRequest):
        where = StoreRequest.from_args(where)
    resource = open_store_resource(where.store, where.collection, search=where.search, backend=where.backend)
    return RAG(resources=[resource])
