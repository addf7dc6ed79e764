"""Reads and writes on a raw chromadb collection: paged gets, adds, deletes, updates, counts, queries.

`rag.stores.chroma` opens clients and collections; the functions here act on a collection once
opened (`rag.stores.chroma_chunks`, the Chroma backend's `ChunkStore`, and `PartitionedChroma`
call them, through `rag.stores.chroma`, which re-exports them). They call the collection once per
page, request only what a retriever returns (texts, metadata, distances) and build one Document
per hit: `langchain_chroma.Chroma` builds a Document per hit and copying it to add scores was about
a tenth of a query's time (see docs/benchmarks.md).

Example:
    >>> import chromadb
    >>> coll = chromadb.EphemeralClient().get_or_create_collection("direct-doc", metadata={"hnsw:space": "cosine"})
    >>> coll.add(ids=["a", "b"], embeddings=[[1.0, 0.0], [0.0, 1.0]], documents=["x", "y"], metadatas=[{"n": 1}, {"n": 2}])
    >>> [(d.page_content, round(dist, 3)) for d, dist in query_collection(coll, [1.0, 0.1], k=1)]
    [('x', 0.005)]
    >>> [d.metadata for d in get_documents(coll, where={"n": 2})], count(coll)
    ([{'n': 2}], 2)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from langchain_core.documents import Document

__all__ = ["GET_PAGE", "add_chunks", "count", "delete_ids", "documents_from_get", "fetch_in_order", "get_documents",
           "get_ids", "get_metadatas", "get_vectors", "query_collection", "query_counted", "stored_ids",
           "update_metadatas"]


#: records per ``collection.get``: Chroma binds one SQL variable per record it returns, and SQLite
#: refuses a statement with more than 32,766 (a collection of 40,000 chunks could not be read whole)
GET_PAGE = 10_000


def _paged_get(collection: Any, *, where: dict[str, Any] | None, ids: Sequence[str] | None,
               include: list[str]) -> list[dict[str, Any]]:
    """``collection.get`` in pages of at most `GET_PAGE` records (by id slices, or by offset)."""
    if ids is not None:
        ids = list(ids)
        return [collection.get(ids=ids[i:i + GET_PAGE], where=where or None, include=include)
                for i in range(0, len(ids), GET_PAGE)]
    pages, offset = [], 0
    while True:
        page = collection.get(where=where or None, limit=GET_PAGE, offset=offset, include=include)
        pages.append(page)
        if len(page["ids"]) < GET_PAGE:
            return pages
        offset += GET_PAGE


def get_documents(collection: Any, *, where: dict[str, Any] | None = None,
                  ids: Sequence[str] | None = None) -> list[Document]:
    """Chunks (text, metadata, id) matching a Chroma `where` or a list of ids (read in pages, any number)."""
    return [doc for page in _paged_get(collection, where=where, ids=ids, include=["documents", "metadatas"])
            for doc in documents_from_get(page)]


def get_ids(collection: Any, *, where: dict[str, Any] | None = None) -> list[str]:
    """Ids of the records matching a Chroma `where` (all when None), read in pages."""
    return [id_ for page in _paged_get(collection, where=where, ids=None, include=[]) for id_ in page["ids"]]


def stored_ids(collection: Any, ids: Sequence[str], *, batch: int = GET_PAGE) -> list[str]:
    """Which of `ids` the collection holds (a lookup by id, in batches)."""
    ids = list(ids)
    return [id_ for start in range(0, len(ids), batch)
            for id_ in collection.get(ids=ids[start:start + batch], include=[])["ids"]]


def add_chunks(collection: Any, ids: Sequence[str], vectors: Sequence[Sequence[float]], texts: Sequence[str],
               metadatas: Sequence[dict[str, Any]]) -> None:
    """Write new chunks (`add`, not `upsert`: ids not stored, as `stored_ids` checked; upsert's per-id existence
    check grows with the collection)."""
    collection.add(ids=list(ids), embeddings=list(vectors), documents=list(texts), metadatas=list(metadatas))


def delete_ids(collection: Any, ids: Sequence[str], *, batch: int = GET_PAGE) -> None:
    """Delete records by id, in batches."""
    ids = list(ids)
    for start in range(0, len(ids), batch):
        collection.delete(ids=ids[start:start + batch])


def get_metadatas(collection: Any, *, where: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """Ids and metadata of the records matching a Chroma `where`, read in pages."""
    pages = _paged_get(collection, where=where, ids=None, include=["metadatas"])
    return ([i for page in pages for i in page["ids"]],
            [dict(m or {}) for page in pages for m in (page["metadatas"] or [])])


def update_metadatas(collection: Any, ids: Sequence[str], metadatas: Sequence[dict[str, Any]], *,
                     batch: int = 1000) -> None:
    """Replace the metadata of records by id, in batches."""
    ids, metadatas = list(ids), list(metadatas)
    for start in range(0, len(ids), batch):
        collection.update(ids=ids[start:start + batch], metadatas=metadatas[start:start + batch])


def count(collection: Any) -> int:
    """How many records the collection holds."""
    return int(collection.count())


def get_vectors(collection: Any, ids: Sequence[str]) -> dict[str, Any]:
    """Stored embeddings by id (ids not in the collection are absent)."""
    if not ids:
        return {}
    return {id_: vector for page in _paged_get(collection, where=None, ids=ids, include=["embeddings"])
            for id_, vector in zip(page["ids"], page["embeddings"], strict=True)}


def query_collection(collection: Any, vector: Sequence[float] | np.ndarray, *, k: int,
                     where: dict[str, Any] | None = None) -> list[tuple[Document, float]]:
    """One ``collection.query`` as (document, cosine distance) pairs, closest first.

    A record deleted by another process can still be in this process's vector index, and comes
    back without text or metadata: such a phantom is dropped (a source of nothing is no source).
    """
    return query_counted(collection, vector, k=k, where=where)[0]


def query_counted(collection: Any, vector: Sequence[float] | np.ndarray, *, k: int, where: dict[str, Any] | None = None,
                  ids_only: bool = False) -> tuple[list[Any], int]:
    """`query_collection`, and how many records Chroma returned (phantoms included: fewer than `k`, it holds no
    more that `where` allows); with `ids_only`, (id, distance) pairs, no text or metadata read (far cheaper)."""
    res = collection.query(query_embeddings=np.asarray(vector, dtype=np.float32).reshape(1, -1), n_results=k,
                           where=where, include=["distances"] if ids_only else ["documents", "metadatas", "distances"])
    if ids_only:
        return list(zip(res["ids"][0], map(float, res["distances"][0]), strict=True)), len(res["ids"][0])
    return ([(Document(page_content=text or "", metadata=dict(md or {}), id=id_), float(dist))
             for id_, text, md, dist in zip(res["ids"][0], res["documents"][0], res["metadatas"][0],
                                            res["distances"][0], strict=True) if not _phantom(text, md)],
            len(res["ids"][0]))


def _phantom(text: Any, metadata: Any) -> bool:
    """A record that is gone: no text and no metadata (what Chroma returns for an id it no longer holds)."""
    return text is None and not metadata


def documents_from_get(res: Mapping[str, Any]) -> list[Document]:
    """Documents from a ``collection.get(..., include=["documents", "metadatas"])`` result (phantoms dropped)."""
    return [Document(page_content=text or "", metadata=dict(md or {}), id=id_)
            for id_, text, md in zip(res["ids"], res["documents"], res["metadatas"], strict=True)
            if not _phantom(text, md)]


def fetch_in_order(collection: Any, hits: Sequence[tuple[str, float]]) -> list[tuple[Document, float]]:
    """Texts and metadata for (id, distance) hits in one ``get``, in hit order (ids gone are skipped)."""
    if not hits:
        return []
    found = {doc.id: doc for doc in documents_from_get(
        collection.get(ids=[id_ for id_, _ in hits], include=["documents", "metadatas"]))}
    return [(found[id_], dist) for id_, dist in hits if id_ in found]
