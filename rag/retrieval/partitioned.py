"""`PartitionedChroma`: one Chroma collection per value of a declared key, for fast filtered search.

Chroma applies a metadata `where` by scanning its metadata index and then searching the HNSW
graph with an allow-list; at 1M chunks a filter selecting one document of a thousand takes about
half a second. Single-document search (one filing, one tenant) is the common case, so this store
declares a partition key (``doc_name``, ``tenant``, ...) and writes each chunk to the collection of
its key value. A query whose filter pins that key (``{"doc_name": "X"}``, ``{"doc_name": {"$in":
[...]}}``, or either inside an ``$and``) searches only those small collections, with the rest of
the filter as a Chroma ``where``. Other queries go to a global collection holding every chunk
(``keep_global=True``, the default), or fan out over all partitions.

All collections are in cosine space, so relevance scores mean the same as a plain `new_chroma`
store: ``1 - cosine distance``. Filters use the portable dialect (`rag.core.filters`).

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> store = PartitionedChroma("filings", DeterministicFakeEmbedding(size=8), partition_key="doc_name")
    >>> _ = store.add_texts(["Apple revenue", "Boeing orders"], metadatas=[{"doc_name": "AAPL"}, {"doc_name": "BA"}])
    >>> [d.page_content for d in store.similarity_search("revenue", k=2, filter={"doc_name": "BA"})]
    ['Boeing orders']
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore
from pydantic import ConfigDict, Field

from rag.core.errors import ConfigError
from rag.core.filters import to_chroma_where, validate_filter

__all__ = ["PartitionedChroma", "PartitionedRetriever", "split_partition_filter"]

_SPACE = {"hnsw:space": "cosine"}


def split_partition_filter(flt: dict[str, Any] | None, key: str) -> tuple[list[Any] | None, dict[str, Any] | None]:
    """Split a portable filter into the partition values it pins and the remaining filter.

    Returns ``(values, rest)``: ``values`` is None when the filter does not restrict `key` to a
    finite set (then every partition may match).

    Example:
        >>> split_partition_filter({"doc_name": "A", "year": {"$gt": 2020}}, "doc_name")
        (['A'], {'year': {'$gt': 2020}})
    """
    canon = validate_filter(flt)
    if canon is None:
        return None, None
    clauses = canon["$and"] if "$and" in canon else [canon]
    values: list[Any] | None = None
    rest = []
    for clause in clauses:
        cond = clause.get(key) if len(clause) == 1 else None
        if cond is not None and set(cond) <= {"$eq", "$in"}:
            allowed = set(cond["$in"]) if "$in" in cond else None
            if "$eq" in cond:
                allowed = {cond["$eq"]} if allowed is None else allowed & {cond["$eq"]}
            values = sorted(allowed, key=str) if values is None else [v for v in values if v in allowed]
        else:
            rest.append(clause)
    remaining = None if not rest else rest[0] if len(rest) == 1 else {"$and": rest}
    return values, remaining


class PartitionedChroma(VectorStore):
    """A Chroma-backed vector store partitioned on one metadata key (see the module docstring).

    Args:
        name: base collection name.
        embedding: the embedding model.
        partition_key: the metadata key that selects a partition; every added chunk must have it.
        persist_directory: where Chroma stores data; None for in-memory (a unique name is used).
        client: an existing chromadb client (wins over `persist_directory`).
        keep_global: also write every chunk to one global collection, so unfiltered queries stay
            a single HNSW search (doubles storage). Without it, unfiltered queries fan out.
    """

    accepts_portable_filter = True

    def __init__(self, name: str, embedding: Embeddings, *, partition_key: str,
                 persist_directory: str | Path | None = None, client: Any = None, keep_global: bool = True) -> None:
        if not partition_key or not isinstance(partition_key, str):
            raise ConfigError(f"partition_key must be a non-empty metadata key, got {partition_key!r}")
        import chromadb

        if client is None:
            if persist_directory is None:
                client = chromadb.EphemeralClient()
                name = f"{name}-{uuid.uuid4().hex[:8]}"
            else:
                client = chromadb.PersistentClient(path=str(persist_directory))
        self._client = client
        self._name = "".join(c if c.isalnum() or c in "._-" else "-" for c in name).strip("._-") or "rag"
        self._embedding = embedding
        self.partition_key = partition_key
        self.keep_global = keep_global
        self._collections: dict[str, Any] = {}

    # ------------------------------------------------------------------ collections
    @property
    def embeddings(self) -> Embeddings:
        return self._embedding

    def partition_name(self, value: Any) -> str:
        """The collection name holding chunks whose partition key equals `value`."""
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
            meta = dict(_SPACE)
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
        """Add precomputed vectors (used by benchmarks and re-indexing)."""
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
        targets = [(name, idx, values[name]) for name, idx in groups.items()]
        if self.keep_global:
            targets.append((self.global_name, list(range(n)), None))
        for name, idx, value in targets:
            coll = self._collection(name, create=True, value=value)
            step = self._client.get_max_batch_size()
            for start in range(0, len(idx), step):
                part = idx[start:start + step]
                coll.upsert(ids=[ids[i] for i in part], embeddings=[list(map(float, embeddings[i])) for i in part],
                            metadatas=[metadatas[i] or None for i in part], documents=[documents[i] for i in part])
        return ids

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

    def _route(self, filter: dict[str, Any] | None) -> tuple[list[str], dict[str, Any] | None]:
        """The collections a filter can match, and what is left of the filter inside them."""
        values, rest = split_partition_filter(filter, self.partition_key)
        if values is not None:
            return [self.partition_name(v) for v in values], rest
        if self.keep_global:
            return [self.global_name], validate_filter(filter)
        return [self.partition_name(v) for v in self.partition_values()], rest

    def search_by_vector(self, vector: Sequence[float], *, k: int = 4,
                         filter: dict[str, Any] | None = None) -> list[tuple[Document, float]]:
        """Nearest chunks to `vector` as (document, cosine distance), routed to the right collections."""
        names, rest = self._route(filter)
        where = to_chroma_where(rest)
        hits: list[tuple[Document, float]] = []
        for name in names:
            coll = self._collection(name, create=False)
            if coll is None:
                continue
            res = coll.query(query_embeddings=[list(map(float, vector))], n_results=k, where=where,
                             include=["documents", "metadatas", "distances"])
            for id_, text, md, dist in zip(res["ids"][0], res["documents"][0], res["metadatas"][0],
                                           res["distances"][0], strict=True):
                hits.append((Document(page_content=text or "", metadata=dict(md or {}), id=id_), float(dist)))
        hits.sort(key=lambda pair: pair[1])
        return hits[:k]

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        """Every chunk matching the portable filter (no vector search), routed like queries."""
        names, rest = self._route(filter)
        out = []
        for name in names:
            coll = self._collection(name, create=False)
            if coll is None:
                continue
            res = coll.get(where=to_chroma_where(rest), include=["documents", "metadatas"])
            out.extend(Document(page_content=t or "", metadata=dict(m or {}), id=i)
                       for i, t, m in zip(res["ids"], res["documents"], res["metadatas"], strict=True))
        return out

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        coll = self._collection(self.global_name, create=False) if self.keep_global else None
        if coll is None:
            return []
        res = coll.get(ids=list(ids), include=["documents", "metadatas"])
        return [Document(page_content=t or "", metadata=dict(m or {}), id=i)
                for i, t, m in zip(res["ids"], res["documents"], res["metadatas"], strict=True)]

    def count(self) -> int:
        """Number of chunks (from the global collection, or summed over partitions)."""
        if self.keep_global:
            coll = self._collection(self.global_name, create=False)
            return 0 if coll is None else coll.count()
        return sum(c.count() for c in (self._collection(self.partition_name(v), create=False)
                                       for v in self.partition_values()) if c is not None)


class PartitionedRetriever(BaseRetriever):
    """Search a `PartitionedChroma`; documents get ``metadata["score"]`` (cosine similarity).

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> store = PartitionedChroma("r", DeterministicFakeEmbedding(size=8), partition_key="tenant")
        >>> _ = store.add_texts(["a", "b"], metadatas=[{"tenant": "x"}, {"tenant": "y"}])
        >>> [d.page_content for d in store.as_retriever().invoke("a", filter={"tenant": "y"})]
        ['b']
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    accepts_portable_filter: ClassVar[bool] = True

    store: PartitionedChroma
    k: int = Field(default=4, ge=1)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: int | None = None, filter: dict[str, Any] | None = None,
                                **kwargs: Any) -> list[Document]:
        hits = self.store.similarity_search_with_score(query, k=k or self.k, filter=filter)
        return [Document(page_content=d.page_content, id=d.id,
                         metadata={**d.metadata, "score": 1.0 - dist, "scores": {"dense": 1.0 - dist}})
                for d, dist in hits]

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       k: int | None = None, filter: dict[str, Any] | None = None,
                                       **kwargs: Any) -> list[Document]:
        # the default async path would drop k and filter; the work is CPU / blocking I/O
        return await asyncio.to_thread(self._get_relevant_documents, query, run_manager=run_manager.get_sync(),
                                       k=k, filter=filter)
