"""Direct chromadb calls for the query hot path, without the LangChain conversion layer.

`langchain_chroma.Chroma` builds a Document per hit and `dense_search` used to copy it to add
scores; at a few milliseconds per query that Python work was about a tenth of the time (see
docs/benchmarks.md). These helpers call the chromadb collection once, request only what a
retriever returns (texts, metadata, distances) and build one Document per hit.

Example:
    >>> import chromadb
    >>> coll = chromadb.EphemeralClient().get_or_create_collection("direct-doc", metadata={"hnsw:space": "cosine"})
    >>> coll.add(ids=["a", "b"], embeddings=[[1.0, 0.0], [0.0, 1.0]], documents=["x", "y"], metadatas=[{"n": 1}, {"n": 2}])
    >>> [(d.page_content, round(dist, 3)) for d, dist in query_collection(coll, [1.0, 0.1], k=1)]
    [('x', 0.005)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from langchain_core.documents import Document

__all__ = ["documents_from_get", "fetch_in_order", "query_collection"]


def query_collection(collection: Any, vector: Sequence[float] | np.ndarray, *, k: int,
                     where: dict[str, Any] | None = None) -> list[tuple[Document, float]]:
    """One ``collection.query`` as (document, cosine distance) pairs, closest first."""
    res = collection.query(query_embeddings=np.asarray(vector, dtype=np.float32).reshape(1, -1), n_results=k,
                           where=where, include=["documents", "metadatas", "distances"])
    return [(Document(page_content=text or "", metadata=dict(md or {}), id=id_), float(dist))
            for id_, text, md, dist in zip(res["ids"][0], res["documents"][0], res["metadatas"][0],
                                           res["distances"][0], strict=True)]


def documents_from_get(res: Mapping[str, Any]) -> list[Document]:
    """Documents from a ``collection.get(..., include=["documents", "metadatas"])`` result."""
    return [Document(page_content=text or "", metadata=dict(md or {}), id=id_)
            for id_, text, md in zip(res["ids"], res["documents"], res["metadatas"], strict=True)]


def fetch_in_order(collection: Any, hits: Sequence[tuple[str, float]]) -> list[tuple[Document, float]]:
    """Texts and metadata for (id, distance) hits in one ``get``, in hit order (ids gone are skipped)."""
    if not hits:
        return []
    found = {doc.id: doc for doc in documents_from_get(
        collection.get(ids=[id_ for id_, _ in hits], include=["documents", "metadatas"]))}
    return [(found[id_], dist) for id_, dist in hits if id_ in found]
