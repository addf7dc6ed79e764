"""`PartitionedChroma`: one Chroma collection per value of a declared key, for fast filtered search.

Chroma applies a metadata `where` by scanning its metadata index and then searching the HNSW
graph with an allow-list; at 1M chunks a filter selecting one document of a thousand takes about
half a second. Single-document search (one filing, one tenant) is the common case, so this store
declares a partition key (``doc_name``, ``tenant``, ...). Every chunk goes to one global Chroma
collection (documents, metadata and the HNSW graph for unfiltered search), and its vector also
goes to the exact-search arrays of its key value (`rag.stores.partition_index.PartitionIndex`:
``.npy`` files next to Chroma's, a bounded LRU of loaded partitions). A query whose filter pins
the key (``{"doc_name": "X"}``, ``{"doc_name": {"$in": [...]}}``, or either inside an ``$and``)
is a matrix-vector product over those partitions' vectors, and the top hits' texts come from one
Chroma ``get`` by id; the rest of the filter is checked on those hits' metadata (more candidates
are fetched, in growing batches, until k match). Other queries are a single HNSW search in the global collection. Partition arrays that
are missing (a store written by another tool or an older version) are rebuilt from the global
collection on first use, or all at once with `PartitionedChroma.index_partitions`.

``keep_global=False`` is the older layout, one collection per key value (docs/retrieval.md).
All collections are in cosine space, so relevance scores mean the same as a plain `new_chroma`
store: ``1 - cosine distance``. Filters use the portable dialect (`rag.base.filters`).

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> store = PartitionedChroma("filings", DeterministicFakeEmbedding(size=8), partition_key="doc_name")
    >>> _ = store.add_texts(["Apple revenue", "Boeing orders"], metadatas=[{"doc_name": "AAPL"}, {"doc_name": "BA"}])
    >>> [d.page_content for d in store.similarity_search("revenue", k=2, filter={"doc_name": "BA"})]
    ['Boeing orders']
"""

from __future__ import annotations

import hashlib
import json
import sys
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from rag.base.errors import ConfigError
from rag.base.filters import matches_canonical, validate_filter
from rag.stores.chroma import (
    NEW_COLLECTION,
    documents_from_get,
    fetch_in_order,
    open_client,
    query_collection,
)
from rag.stores.chroma_where import to_chroma_where
from rag.stores.partition_index import PartitionIndex, split_partition_filter
from rag.stores.partitioned_chunks import PartitionedChunks, PartitionedRetriever

__all__ = ["PartitionedChroma", "PartitionedRetriever"]


class PartitionedChroma(VectorStore):
    """A Chroma-backed vector store partitioned on one metadata key (see the module docstring).

    Args:
        name: base collection name.
        embedding: the embedding model.
        partition_key: the metadata key that selects a partition; every added chunk must have it.
        persist_directory: where Chroma stores data; None for in-memory (a unique name is used).
        client: an existing chromadb client (wins over `persist_directory`).
        keep_global: the default layout, a global collection plus exact-search partition arrays
            (stored under ``<persist_directory>/rag-partitions/<name>/``). False: one Chroma
            collection per key value, no global collection; unfiltered queries fan out.
        partition_cache_mb: memory bound for loaded partition arrays (least recently used dropped).
    """

    accepts_portable_filter = True

    def __init__(self, name: str, embedding: Embeddings, *, partition_key: str,
                 persist_directory: str | Path | None = None, client: Any = None, keep_global: bool = True,
                 partition_cache_mb: float = 256) -> None:
        if not partition_key or not isinstance(partition_key, str):
            raise ConfigError(f"partition_key must be a non-empty metadata key, got {partition_key!r}")
        if partition_cache_mb < 0:
            raise ConfigError(f"partition_cache_mb must be >= 0, got {partition_cache_mb}")

        if client is None:
            if persist_directory is None:
                client = open_client(None)
                name = f"{name}-{uuid.uuid4().hex[:8]}"
            else:
                client = open_client(persist_directory)
        self._client = client
        self._name = "".join(c if c.isalnum() or c in "._-" else "-" for c in name).strip("._-") or "rag"
        self._embedding = embedding
        self.partition_key = partition_key
        self.keep_global = keep_global
        self._collections: dict[str, Any] = {}
        settings = client.get_settings()
        directory = (Path(settings.persist_directory) / "rag-partitions" / self._name
                     if getattr(settings, "is_persistent", False) and settings.persist_directory else None)
        self.partitions = PartitionIndex(directory, cache_bytes=int(partition_cache_mb * 2**20))

    # ------------------------------------------------------------------ collections
    @property
    def embeddings(self) -> Embeddings:
        return self._embedding

    def partition_name(self, value: Any) -> str:
        """The name of the partition (collection or arrays) of chunks whose key equals `value`."""
        digest = hashlib.sha256(json.dumps(value).encode()).hexdigest()[:20]
        return f"{self._name}.p.{digest}"

    @property
    def global_name(self) -> str:
        return f"{self._name}.all"

    def _collection(self, name: str, *, create: bool, value: Any = None) -> Any | None:
        coll = self._collections.get(name)
        if coll is not None:
            return coll
        if create:
            meta = dict(NEW_COLLECTION)
            if value is not None:
                meta.update({"rag_partition_key": self.partition_key, "rag_partition_value": json.dumps(value)})
            coll = self._client.get_or_create_collection(name, metadata=meta)
        else:
            try:
                coll = self._client.get_collection(name)
            except Exception:  # noqa: BLE001 - chromadb raises NotFoundError/ValueError by version
                return None
        self._collections[name] = coll
        return coll

    def partition_values(self) -> list[Any]:
        """Every partition value present in the store."""
        if self.keep_global:
            return sorted(self.partitions.values().values(), key=str)
        values = []
        for coll in self._client.list_collections():
            meta = coll.metadata or {}
            if coll.name.startswith(f"{self._name}.p.") and "rag_partition_value" in meta:
                values.append(json.loads(meta["rag_partition_value"]))
        return sorted(values, key=str)

    # ------------------------------------------------------------------ writes
    def add_texts(self, texts: Iterable[str], metadatas: list[dict] | None = None, *,
                  ids: list[str] | None = None, **kwargs: Any) -> list[str]:
        """Embed and add texts; each metadata must contain the partition key."""
        texts = list(texts)
        vectors = self._embedding.embed_documents(texts)
        return self.add_embeddings(vectors, metadatas=metadatas, documents=texts, ids=ids)

    def add_embeddings(self, embeddings: Sequence[Sequence[float]], *, metadatas: Sequence[dict] | None,
                       documents: Sequence[str] | None = None, ids: Sequence[str] | None = None) -> list[str]:
        """Add precomputed vectors (used by benchmarks and re-indexing); existing ids are replaced."""
        n = len(embeddings)
        metadatas = list(metadatas or [{}] * n)
        ids = list(ids) if ids is not None else [uuid.uuid4().hex for _ in range(n)]
        documents = list(documents) if documents is not None else [""] * n
        if not len(metadatas) == len(ids) == len(documents) == n:
            raise ConfigError(f"got {n} embeddings, {len(metadatas)} metadatas, {len(ids)} ids, "
                              f"{len(documents)} documents; they must match")
        groups: dict[str, list[int]] = {}
        values: dict[str, Any] = {}
        for i, md in enumerate(metadatas):
            if self.partition_key not in md:
                raise ConfigError(f"chunk {ids[i]!r} has no {self.partition_key!r} metadata; "
                                  f"every chunk of a PartitionedChroma needs the partition key")
            name = self.partition_name(md[self.partition_key])
            groups.setdefault(name, []).append(i)
            values[name] = md[self.partition_key]
        if self.keep_global:
            self._add_global(np.asarray(embeddings, dtype=np.float32), metadatas, documents, ids, groups, values)
            return ids
        step = self._client.get_max_batch_size()
        for name, idx in groups.items():
            coll = self._collection(name, create=True, value=values[name])
            for start in range(0, len(idx), step):
                part = idx[start:start + step]
                coll.upsert(ids=[ids[i] for i in part], embeddings=[list(map(float, embeddings[i])) for i in part],
                            metadatas=[metadatas[i] or None for i in part], documents=[documents[i] for i in part])
        return ids

    def _add_global(self, vectors: np.ndarray, metadatas: list[dict], documents: list[str], ids: list[str],
                    groups: dict[str, list[int]], values: dict[str, Any]) -> None:
        coll = self._collection(self.global_name, create=True)
        step = self._client.get_max_batch_size()
        # an id re-added under another key value must leave its old partition
        moved: dict[str, list[str]] = {}
        new_value = {id_: md[self.partition_key] for id_, md in zip(ids, metadatas, strict=True)}
        for start in range(0, len(ids), step):
            old = coll.get(ids=ids[start:start + step], include=["metadatas"])
            for id_, md in zip(old["ids"], old["metadatas"], strict=True):
                if md and self.partition_key in md and md[self.partition_key] != new_value[id_]:
                    moved.setdefault(self.partition_name(md[self.partition_key]), []).append(id_)
        for name, value in values.items():
            self._partition_ready(name, value)  # existing chunks first, from Chroma if the arrays are missing
        for start in range(0, len(ids), step):
            coll.upsert(ids=ids[start:start + step], embeddings=vectors[start:start + step],
                        metadatas=[md or None for md in metadatas[start:start + step]],
                        documents=documents[start:start + step])
        for name, old_ids in moved.items():
            self.partitions.remove(name, old_ids)
        for name, idx in groups.items():
            self.partitions.upsert(name, values[name], vectors[idx], [ids[i] for i in idx])

    def _partition_ready(self, name: str, value: Any) -> bool:
        """Make sure the arrays of a partition exist (rebuilt from the global collection if not)."""
        if self.partitions.has(name):
            return True
        coll = self._collection(self.global_name, create=False)
        if coll is None:
            return False
        res = coll.get(where={self.partition_key: value}, include=["embeddings"])
        if not res["ids"]:
            return False
        self.partitions.write(name, value, np.asarray(res["embeddings"], dtype=np.float32), res["ids"])
        return True

    def index_partitions(self, *, page_size: int = 50_000) -> int:
        """(Re)write every partition's arrays from the global collection; returns the partition count.

        For a store written by an older version or another tool; normal adds keep them up to date.
        """
        coll = self._collection(self.global_name, create=False) if self.keep_global else None
        if coll is None:
            return 0
        vectors: dict[str, list[np.ndarray]] = {}
        ids: dict[str, list[str]] = {}
        values: dict[str, Any] = {}
        for offset in range(0, coll.count(), page_size):
            res = coll.get(include=["embeddings", "metadatas"], limit=page_size, offset=offset)
            emb = np.asarray(res["embeddings"], dtype=np.float32)
            rows: dict[str, list[int]] = {}
            for i, md in enumerate(res["metadatas"]):
                if md and self.partition_key in md:
                    name = self.partition_name(md[self.partition_key])
                    rows.setdefault(name, []).append(i)
                    values[name] = md[self.partition_key]
            for name, idx in rows.items():
                vectors.setdefault(name, []).append(emb[idx])
                ids.setdefault(name, []).extend(res["ids"][i] for i in idx)
        for name, value in values.items():
            self.partitions.write(name, value, np.concatenate(vectors[name]), ids[name])
        return len(values)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool:
        """Delete chunks by id from the global collection and their partitions."""
        if not ids:
            return False
        if not self.keep_global:
            for value in self.partition_values():
                coll = self._collection(self.partition_name(value), create=False)
                if coll is not None:
                    coll.delete(ids=list(ids))
            return True
        coll = self._collection(self.global_name, create=False)
        if coll is None:
            return False
        found = coll.get(ids=list(ids), include=["metadatas"])
        by_partition: dict[str, list[str]] = {}
        for id_, md in zip(found["ids"], found["metadatas"], strict=True):
            if md and self.partition_key in md:
                by_partition.setdefault(self.partition_name(md[self.partition_key]), []).append(id_)
        coll.delete(ids=list(ids))
        for name, part_ids in by_partition.items():
            self.partitions.remove(name, part_ids)
        return True

    @classmethod
    def from_texts(cls, texts: list[str], embedding: Embeddings, metadatas: list[dict] | None = None, *,
                   ids: list[str] | None = None, partition_key: str = "doc_name", name: str = "rag",
                   **kwargs: Any) -> PartitionedChroma:
        """Create a store and add texts."""
        store = cls(name, embedding, partition_key=partition_key, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    # ------------------------------------------------------------------ reads
    def similarity_search(self, query: str, k: int = 4, filter: dict[str, Any] | None = None,
                          **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter=filter)]

    def similarity_search_with_score(self, query: str, k: int = 4, filter: dict[str, Any] | None = None,
                                     **kwargs: Any) -> list[tuple[Document, float]]:
        """Documents with cosine distances (lower is closer), like `Chroma`."""
        return self.search_by_vector(self._embedding.embed_query(query), k=k, filter=filter)

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4,
                                    filter: dict[str, Any] | None = None, **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.search_by_vector(embedding, k=k, filter=filter)]

    def as_retriever(self, **kwargs: Any) -> PartitionedRetriever:
        """A retriever taking `k` and a portable `filter` per call (so `Resource` passes filters through)."""
        search_kwargs = kwargs.get("search_kwargs") or {}
        return PartitionedRetriever(store=self, k=search_kwargs.get("k", 4))

    def _select_relevance_score_fn(self):
        return lambda distance: 1.0 - distance

    def chunk_store(self) -> PartitionedChunks:
        """This store as a `ChunkStore` (what `rag.stores.registry.chunks_of` returns for it)."""
        return PartitionedChunks(self, hex_ids=False)

    def _route(self, filter: dict[str, Any] | None) -> tuple[list[str], dict[str, Any] | None]:
        """The partition collections a filter can match (``keep_global=False``), and the rest of it."""
        values, rest = split_partition_filter(filter, self.partition_key)
        if values is not None:
            return [self.partition_name(v) for v in values], rest
        return [self.partition_name(v) for v in self.partition_values()], rest

    def search_by_vector(self, vector: Sequence[float], *, k: int = 4,
                         filter: dict[str, Any] | None = None) -> list[tuple[Document, float]]:
        """Nearest chunks to `vector` as (document, cosine distance), routed to the right collections."""
        if self.keep_global:
            return self._search_global_layout(vector, k=k, filter=filter)
        names, rest = self._route(filter)
        where = to_chroma_where(rest)
        hits: list[tuple[Document, float]] = []
        for name in names:
            coll = self._collection(name, create=False)
            if coll is not None:
                hits.extend(query_collection(coll, vector, k=k, where=where))
        hits.sort(key=lambda pair: pair[1])
        return hits[:k]

    def _search_global_layout(self, vector: Sequence[float], *, k: int,
                              filter: dict[str, Any] | None) -> list[tuple[Document, float]]:
        coll = self._collection(self.global_name, create=False)
        if coll is None:
            return []
        values, rest = split_partition_filter(filter, self.partition_key)
        if values is None:  # one HNSW search over everything
            return query_collection(coll, vector, k=k, where=to_chroma_where(filter))
        names = [self.partition_name(v) for v in values if self._partition_ready(self.partition_name(v), v)]
        if not names:
            return []
        if rest is None:
            return fetch_in_order(coll, self.partitions.search(names, vector, k=k))
        # the rest of the filter: checked on the partition's best candidates, fetched by id in
        # growing batches (a Chroma `where` over the whole collection takes a second at 1M chunks)
        ranked = self.partitions.search(names, vector, k=sys.maxsize)
        out: list[tuple[Document, float]] = []
        start, step = 0, max(4 * k, 64)
        while start < len(ranked) and len(out) < k:
            out.extend((doc, dist) for doc, dist in fetch_in_order(coll, ranked[start:start + step])
                       if matches_canonical(doc.metadata, rest))
            start, step = start + step, step * 4
        return out[:k]

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        """Every chunk matching the portable filter (no vector search)."""
        names, rest = ([self.global_name], validate_filter(filter)) if self.keep_global else self._route(filter)
        out = []
        for name in names:
            coll = self._collection(name, create=False)
            if coll is None:
                continue
            out.extend(documents_from_get(coll.get(where=to_chroma_where(rest), include=["documents", "metadatas"])))
        return out

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        coll = self._collection(self.global_name, create=False) if self.keep_global else None
        if coll is None:
            return []
        return documents_from_get(coll.get(ids=list(ids), include=["documents", "metadatas"]))

    def count(self) -> int:
        """Number of chunks (from the global collection, or summed over partitions)."""
        if self.keep_global:
            coll = self._collection(self.global_name, create=False)
            return 0 if coll is None else coll.count()
        return sum(c.count() for c in (self._collection(self.partition_name(v), create=False)
                                       for v in self.partition_values()) if c is not None)
