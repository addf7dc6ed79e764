"""Where `rag ask`, `rag eval`, `rag serve` and `rag mcp` find a knowledge base: `--store`, `--collection`, `--backend`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rag.base.errors import ConfigError, StoreError, short_repr

DEFAULT_STORE = ".rag"


DEFAULT_COLLECTION = "docs"


def store_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--collection", default=DEFAULT_COLLECTION, help="collection name (default: %(default)s)")
    parser.add_argument("--store", default=DEFAULT_STORE, help="store directory (default: %(default)s)")
    parser.add_argument("--backend", default=None, metavar="JSON",
                        help='keep the chunks in another store: its config block as JSON, e.g. '
                             '\'{"kind": "pgvector", "url_env": "RAG_PG_URL"}\' (docs/stores.md); on pgvector, Qdrant '
                             'and Milvus the manifest and records live in that engine too and --store is a local '
                             'cache; on the others they stay in --store (default: Chroma in --store)')


def backend_opener(args: argparse.Namespace, *, create: bool) -> Callable[[Any], Any] | None:
    """The `--backend` block, validated now, as a function opening that store with an embedding model.

    `create`: make the table or collection when it is missing (indexing); asking never creates.
    """
    if not args.backend:
        return None
    from rag.config.knowledge_base import store_config
    from rag.config.yaml_file import load_yaml_text

    # the config's own strict parser (JSON is YAML): a key written twice, deep nesting, aliases refused
    spec = load_yaml_text(args.backend, source="--backend")
    if not isinstance(spec, dict):
        raise ConfigError(f"--backend must be a JSON object such as {{\"kind\": \"pgvector\", \"url_env\": "
                          f"\"RAG_PG_URL\"}}; got {short_repr(args.backend)}")
    return store_config({**spec, "create": create}, args.collection).open


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


def store_rag(args: argparse.Namespace) -> Any:
    """The `RAG` of `rag ask`, `rag eval qa`, `rag mcp --store` and `rag serve --store`: the store's one chain."""
    from rag.compose.generator import RAG
    resource = open_store_resource(args.store, args.collection, search=getattr(args, "search", "hybrid"),
                                   backend=backend_opener(args, create=False))
    return RAG(resources=[resource])
