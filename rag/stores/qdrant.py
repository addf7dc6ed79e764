"""Qdrant access: the portable filter as a `qdrant_client.models.Filter`, searched with `query_points`.

`translate(canon, metadata_key)` turns a canonical filter (`rag.base.filters.validate_filter`) into
Qdrant's filter on the payload key that `langchain_qdrant.QdrantVectorStore` keeps metadata under
(``metadata`` by default). Negations are pushed down first (`normal_form`), then:

    $eq string / boolean   match.value              $eq number          range gte = lte = value
    $gt $gte $lt $lte      range                    $in                 should (one $eq per value)
    $ne / $nin             must_not ($eq / $in)     $and / $or          must / should

Qdrant keeps booleans, integers and floats apart (a range never matches a boolean, `match` never
matches a float), and a `must_not` is true when the field is missing, so every comparison means
what the Python matcher means, missing fields included. Numbers beyond +-2**53 cannot be ordered
exactly (Qdrant ranges are doubles): such a filter raises `FilterError`. Field names holding a
double quote cannot be addressed in a Qdrant key and raise `FilterError` too.

Results keep the point id as `Document.id` and the stored metadata as is (LangChain's store adds
``_id`` and ``_collection_name`` to it); the score is Qdrant's (cosine similarity in a cosine
collection).

Example:
    >>> from rag.base.filters import validate_filter
    >>> f = translate(validate_filter({"topic": "billing", "year": {"$ne": 2024}}), "metadata")
    >>> [type(c).__name__ for c in f.must]
    ['FieldCondition', 'Filter']
"""

from __future__ import annotations

import os
import re
import threading
import uuid
import weakref
from typing import Any

from langchain_core.documents import Document

from rag.base.errors import MissingDependencyError, StoreError
from rag.base.filters import Comparison, normal_form
from rag.stores.chunk_store import unsupported
from rag.stores.vector_store_chunks import VectorStoreChunks

__all__ = ["scratch_store", "STORE", "QdrantChunks", "add_points", "get_by_ids", "open_store", "translate", "update_metadatas"]

BACKEND = "qdrant"
#: the sparse vector of BM25 weights a new collection gets, for its lexical search (`rag.stores.qdrant_lexical`)
LEXICAL_VECTOR = "rag-bm25"
_EXACT = 2**53
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_]+")


def translate(canon: dict[str, Any], metadata_key: str = "metadata") -> Any:
    """A `models.Filter` equivalent to the canonical portable filter `canon`.

    Raises:
        FilterError: a number Qdrant cannot compare exactly, or a field name it cannot address.
    """
    from qdrant_client import models

    node = _node(normal_form(canon), metadata_key, models)
    return node if isinstance(node, models.Filter) else models.Filter(must=[node])


def _node(node: Any, metadata_key: str, models: Any) -> Any:
    if isinstance(node, Comparison):
        return _comparison(node, metadata_key, models)
    (op, parts), = node.items()
    children = [_node(part, metadata_key, models) for part in parts]
    return models.Filter(must=children) if op == "$and" else models.Filter(should=children)


def _comparison(cmp: Comparison, metadata_key: str, models: Any) -> Any:
    key = _key(cmp.field, metadata_key, cmp.op)
    if cmp.op == "$eq":
        return _equal(key, cmp.value, models)
    if cmp.op == "$ne":
        return models.Filter(must_not=[_equal(key, cmp.value, models)])
    if cmp.op == "$in":
        return models.Filter(should=[_equal(key, v, models) for v in cmp.value])
    if cmp.op == "$nin":
        return models.Filter(must_not=[_equal(key, v, models) for v in cmp.value])
    _exact(cmp.value, cmp.op)
    return models.FieldCondition(key=key, range=models.Range(**{cmp.op[1:]: cmp.value}))


def _equal(key: str, value: Any, models: Any) -> Any:
    if isinstance(value, bool | str):
        return models.FieldCondition(key=key, match=models.MatchValue(value=value))
    if isinstance(value, int) and abs(value) > _EXACT:
        return models.FieldCondition(key=key, match=models.MatchValue(value=value))  # exact on integers
    return models.FieldCondition(key=key, range=models.Range(gte=value, lte=value))   # ints and floats alike


def _exact(value: Any, op: str) -> None:
    if isinstance(value, int) and abs(value) > _EXACT:
        raise unsupported(BACKEND, op, f"{value} is beyond +-2**53, where Qdrant's double ranges are inexact")


def _key(field: str, metadata_key: str, op: str) -> str:
    if _PLAIN_KEY.fullmatch(field):
        return f"{metadata_key}.{field}"
    if '"' in field:
        raise unsupported(BACKEND, op, f"the field name {field!r} holds a double quote, which a Qdrant key "
                                       "cannot quote")
    return f'{metadata_key}."{field}"'


class QdrantChunks(VectorStoreChunks):
    """The `ChunkStore` of `langchain_qdrant.QdrantVectorStore` (dense vectors; ids stored as UUIDs)."""

    backend = BACKEND
    uuid_ids = True
    _size: int | None = None   # the collection's vector size, read at the first search

    def _native_search(self, vector: list[float], *, k: int,
                       flt: dict[str, Any] | None) -> list[tuple[Document, float]]:
        """The `k` points closest to `vector` among those `flt` allows: (document, relevance)."""
        from qdrant_client import models

        store = self.store
        if self._size is None:
            self._size = int(_dense_params(store.client, store.collection_name).size)
        if len(vector) != self._size:
            raise StoreError(f"qdrant: the collection {store.collection_name!r} holds {self._size}-dimensional "
                             f"vectors and the query's embedding has {len(vector)}: search it with the embedding "
                             "model it was built with")
        points = store.client.query_points(
            collection_name=store.collection_name, query=list(vector), using=store.vector_name or None,
            query_filter=None if flt is None else translate(flt, store.metadata_payload_key),
            limit=k, with_payload=True, with_vectors=False).points
        relevance = ((lambda s: s) if store.distance == models.Distance.COSINE
                     else store._select_relevance_score_fn())
        return [(_document(store, p), float(relevance(p.score))) for p in points]

    def count(self) -> int:
        return int(self.store.client.count(collection_name=self.store.collection_name, exact=True).count)

    def _write(self, ids: list[str], vectors: list[list[float]], texts: list[str],
               metadatas: list[dict[str, Any]]) -> None:
        add_points(self.store, ids, vectors, texts, metadatas)

    def upsert(self, ids: Any, vectors: Any, texts: Any, metadatas: Any) -> None:
        self.add(ids, vectors, texts, metadatas)   # points are upserted by id

    def _read(self, ids: list[str]) -> list[Document]:
        return get_by_ids(self.store, ids)

    def _update(self, ids: list[str], metadatas: list[dict[str, Any]]) -> None:
        update_metadatas(self.store, ids, metadatas)

    def stored_id(self, id_: str) -> str:
        return str(uuid.UUID(id_))


def _document(store: Any, point: Any) -> Document:
    """A point as a Document: its text, its stored metadata only, its id."""
    return Document(page_content=(point.payload or {}).get(store.content_payload_key, ""),
                    metadata=dict((point.payload or {}).get(store.metadata_payload_key) or {}), id=str(point.id))


STORE = QdrantChunks


def add_points(store: Any, ids: list[str], vectors: list[list[float]], texts: list[str],
               metadatas: list[dict[str, Any]], *, batch: int = 1000) -> None:
    """Upsert points whose vectors were computed elsewhere, in the payload layout of `QdrantVectorStore`.

    `ids` are 32-hex (or UUID) strings, stored as UUIDs.
    """
    from qdrant_client import models

    for start in range(0, len(ids), batch):
        points = [models.PointStruct(
            id=str(uuid.UUID(id_)), vector={store.vector_name: vec} if store.vector_name else vec,
            payload={store.content_payload_key: text, store.metadata_payload_key: md})
            for id_, vec, text, md in zip(ids[start:start + batch], vectors[start:start + batch],
                                          texts[start:start + batch], metadatas[start:start + batch], strict=True)]
        store.client.upsert(collection_name=store.collection_name, points=points, wait=True)


def get_by_ids(store: Any, ids: list[str]) -> list[Document]:
    """The points with these ids, with their ids (LangChain's `get_by_ids` moves them into the metadata)."""
    points = store.client.retrieve(store.collection_name, ids=ids, with_payload=True, with_vectors=False)
    return [_document(store, p) for p in points]


def update_metadatas(store: Any, ids: list[str], metadatas: list[dict[str, Any]]) -> None:
    """Replace the metadata payload of points by id, in one batch (vectors and texts are kept)."""
    from qdrant_client import models

    operations = [models.SetPayloadOperation(set_payload=models.SetPayload(
        payload={store.metadata_payload_key: md}, points=[id_])) for id_, md in zip(ids, metadatas, strict=True)]
    if operations:
        store.client.batch_update_points(store.collection_name, update_operations=operations, wait=True)


def open_store(collection: str, embedding: Any, *, path: str | None = None, url: str | None = None,
               api_key: str | None = None, create: bool = False) -> Any:
    """A `QdrantVectorStore` on `collection`: local mode in `path` (":memory:": in memory), or the server at `url`.

    With `create`, a missing collection is created (cosine distance, the embedding's size), with the sparse vector
    its knowledge base's lexical search writes (`LEXICAL_VECTOR`).

    Raises:
        StoreError: the collection is missing and not `create` (the message lists the existing ones).
    """
    try:
        from langchain_qdrant import QdrantVectorStore
        from qdrant_client import QdrantClient, models
    except ImportError as exc:
        raise MissingDependencyError.for_extra(exc.name or "qdrant-client", "stores", "Qdrant") from exc
    if (path is None) == (url is None):
        raise StoreError("qdrant: give a local path (or ':memory:') or a server url, not both nor neither")
    if url is not None:
        client = QdrantClient(url=url, api_key=api_key)
    else:
        client = QdrantClient(location=":memory:") if path == ":memory:" else _local_client(path)
    if not client.collection_exists(collection):
        if not create:
            existing = sorted(c.name for c in client.get_collections().collections)
            raise StoreError(f"qdrant: no collection {collection!r} in {url or path}; existing: "
                             f"{', '.join(existing) or '(none)'}; create: true makes an empty one")
        size = len(embedding.embed_query("dimension"))
        client.create_collection(collection, vectors_config=models.VectorParams(size=size,
                                                                                distance=models.Distance.COSINE),
                                 sparse_vectors_config={LEXICAL_VECTOR: models.SparseVectorParams(
                                     modifier=models.Modifier.IDF)})   # (`rag.stores.qdrant_lexical`)
    # checked here without embedding anything (langchain-qdrant's own check embeds a text to learn the model's
    # size, which loads the document model on every open); the size is checked against each query's vector
    distance = _dense_params(client, collection).distance
    return QdrantVectorStore(client=client, collection_name=collection, embedding=embedding, distance=distance,
                             validate_collection_config=False)


#: the open local-mode clients of this process, by folder: Qdrant's local mode lets one client at a time hold a
#: folder, so stores opened on one folder share its client (a second would fail with "already accessed")
_LOCAL_CLIENTS: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
_LOCAL_LOCK = threading.Lock()


def _local_client(path: str) -> Any:
    """The local-mode client of the folder `path`: the one this process has open, else a new one."""
    from qdrant_client import QdrantClient

    key = os.path.realpath(path)
    with _LOCAL_LOCK:
        client = _LOCAL_CLIENTS.get(key)
        if client is None or getattr(getattr(client, "_client", None), "closed", False):
            client = _LOCAL_CLIENTS[key] = QdrantClient(path=path)
        return client


def _dense_params(client: Any, collection: str) -> Any:
    """The collection's unnamed dense vector parameters; `StoreError` when it has none (named vectors only)."""
    vectors = client.get_collection(collection_name=collection).config.params.vectors
    if isinstance(vectors, dict):
        if "" not in vectors:
            raise StoreError(f"qdrant: the collection {collection!r} has only named dense vectors "
                             f"({', '.join(sorted(vectors)) or 'none'}); rag reads a collection's unnamed vector")
        vectors = vectors[""]
    if vectors is None:
        raise StoreError(f"qdrant: the collection {collection!r} has no dense vectors")
    return vectors


def scratch_store(embedding: Any, workdir: Any, name: str, *, url: str | None = None) -> Any:
    """A new, empty collection in memory (local mode locks a directory per client; for tests and benchmarks)."""
    return open_store(name, embedding, path=":memory:", create=True)
