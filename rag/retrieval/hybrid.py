"""Hybrid search: a dense vector store and a BM25 index searched concurrently and fused.

`HybridRetriever` runs the dense search (any store of `rag.stores`, or any other vector store) and the BM25 search (a `LexicalIndex`: the in-process `BM25Index`, or a knowledge base's
index in its engine, `rag.stores.fts_index`) at the same time: a two-thread pool in the sync
path, ``asyncio.gather`` in the async one. It fetches ``fetch_k`` candidates from each and fuses
them with RRF (``k=60``) or a normalised convex combination (``weights``), see `rag.retrieval.fusion`.

Every returned document is a copy with ``metadata["score"]`` (the fused score) and
``metadata["scores"] == {"dense": cosine, "bm25": bm25, "rrf": fused}`` (a retriever that did not
find the chunk has no entry). Dense scores are cosine similarities, ``1 - cosine distance``:
the stores of `rag.stores` are made in cosine space (`rag.stores.registry.new_vectorstore`).

The retriever takes ``k`` and a portable ``filter`` per call (``accepts_portable_filter``): the
filter goes to the dense store's own filter (`rag.stores.registry.chunks_of(store).search`) and to
BM25 before its top k. The lexical index is persisted next to the dense one (``<dir>/bm25``) by
`HybridRetriever.from_documents(..., persist_directory=...)` and reopened with `HybridRetriever.load`.

Example:
    >>> from langchain_core.documents import Document
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> docs = [Document(page_content="Revenue rose 8%.", metadata={"year": 2022}),
    ...         Document(page_content="Margins fell.", metadata={"year": 2023})]
    >>> hybrid = HybridRetriever.from_documents(docs, embedding=DeterministicFakeEmbedding(size=16), k=1)
    >>> top = hybrid.invoke("revenue")[0]
    >>> top.page_content, sorted(top.metadata["scores"])
    ('Revenue rose 8%.', ['bm25', 'dense', 'rrf'])
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from pydantic import ConfigDict, Field, PrivateAttr, field_validator

from rag.base.errors import ConfigError
from rag.base.filters import and_filters
from rag.base.portable import ChunkSource, PortableRetriever, check_k
from rag.indexing.autocontext import AutoContext
from rag.indexing.chunking import PassthroughChunker
from rag.indexing.kb_parts import IndexTarget
from rag.indexing.kb_settings import knowledge_base_name
from rag.indexing.manifest import list_knowledge_bases
from rag.indexing.write_path import index_sources
from rag.models.embeddings import default_embeddings
from rag.retrieval.fusion import FUSION_METHODS, fuse, with_scores
from rag.retrieval.lexical import BM25Index, LexicalIndex
from rag.retrieval.paging import page_filtered
from rag.stores.registry import chunks_of, new_vectorstore

__all__ = ["HybridRetriever", "dense_search"]

Scored = list[tuple[Document, float]]


def dense_search(store: VectorStore, query: str | Sequence[float], *, k: int,
                 filter: Mapping[str, Any] | None = None) -> Scored:
    """Top-k chunks from a vector store as (document copy, relevance), filter applied.

    `query` is a string or an already computed query vector. A store of the registry
    (`rag.stores.registry.chunks_of`: every backend, `PartitionedChroma`, `ExactVectorStore`, a
    knowledge base's view) is searched through its chunk store, the portable filter translated
    natively; any other store (searched by text, scored with its own relevance function) is paged
    and filtered in Python (`rag.retrieval.paging`).
    """

    flt = and_filters(filter)
    chunks = chunks_of(store, hex_ids=False)
    if chunks is not None:
        vector = store.embeddings.embed_query(query) if isinstance(query, str) else query
        return [(with_scores(doc, rel, {"dense": rel}), rel) for doc, rel in chunks.search(vector, k=k, filter=flt)]
    if not isinstance(query, str):
        raise ConfigError(f"a {type(store).__name__} is searched by text; pass the query string")

    def fetch(n: int) -> Scored:   # the store's own relevance function, else its raw score
        try:
            return store.similarity_search_with_relevance_scores(query, k=n)
        except NotImplementedError:
            return store.similarity_search_with_score(query, k=n)

    hits = page_filtered(fetch, flt, k, doc=lambda hit: hit[0])
    return [(with_scores(doc, rel, {"dense": rel}), rel) for doc, rel in hits]


class HybridRetriever(PortableRetriever):
    """Dense + BM25 search, run concurrently and fused (see the module docstring).

    Attributes:
        vectorstore: a cosine-space vector store (Chroma, PartitionedChroma, ...).
        bm25: the lexical index over the same chunks.
        k: number of fused results.
        fetch_k: candidates taken from each retriever before fusion (at least k).
        fusion: "rrf" or "convex".
        rrf_k: the RRF constant.
        weights: per-retriever weights, keys "dense" and "bm25" (convex weights are normalised).
        filter: a default portable filter, combined with $and with the per-call one.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    search_options = ("fetch_k",)

    vectorstore: VectorStore
    bm25: LexicalIndex
    fetch_k: int = Field(default=20, ge=1)
    fusion: str = "rrf"
    rrf_k: int = Field(default=60, ge=0)
    weights: dict[str, float] | None = None
    _pool: ThreadPoolExecutor | None = PrivateAttr(default=None)

    @property
    def chunk_source(self) -> ChunkSource | None:
        """The lexical index: it holds every chunk, readable by filter."""
        return self.bm25

    @field_validator("fusion")
    @classmethod
    def _check_fusion(cls, value: str) -> str:
        if value not in FUSION_METHODS:
            raise ValueError(f"unknown fusion {value!r}; valid: {', '.join(FUSION_METHODS)}")
        return value

    @field_validator("weights")
    @classmethod
    def _check_weights(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        if value is not None and not set(value) <= {"dense", "bm25"}:
            raise ValueError(f"weights keys must be 'dense' and/or 'bm25', got {sorted(value)}")
        return value

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_documents(cls, documents: Sequence[Document], *, embedding: Embeddings | None = None,
                       persist_directory: str | Path | None = None, collection_name: str = "rag",
                       bm25_settings: Mapping[str, Any] | None = None, **settings: Any) -> HybridRetriever:
        """Embed chunks into a cosine store and index them with BM25.

        With `persist_directory` the chunks go through the library's one write path: a knowledge base
        named after `collection_name` in that directory (stored as given: no chunking, no AutoContext;
        chunk ids are content hashes, so a second call with the same chunks embeds and writes nothing;
        chunks of a `source` given again replace its earlier ones), and BM25 indexes every chunk the
        knowledge base holds, saved in ``<persist_directory>/bm25``. Without it the chunks are kept in an
        in-memory Chroma with their own ids.
        """
        if persist_directory is not None:
            kb = _knowledge_base(persist_directory, collection_name, embedding)
            index_sources(kb, list(documents))
            chunks = kb.get_documents()
            bm25 = BM25Index.from_documents(chunks, **dict(bm25_settings or {}))
            bm25.save(Path(persist_directory) / "bm25")
            return cls(vectorstore=kb.chunks.vectorstore(kb.embedding), bm25=bm25, **settings)
        store = new_vectorstore(collection_name, embedding or default_embeddings())
        ids = [doc.id or f"{doc.metadata.get('doc_id', 'doc')}-{doc.metadata.get('chunk_index', i)}-{i}"
               for i, doc in enumerate(documents)]
        docs = [Document(page_content=d.page_content, metadata=d.metadata, id=i) for d, i in zip(documents, ids,
                                                                                               strict=True)]
        if docs:
            store.add_documents(docs, ids=ids)
        return cls(vectorstore=store, bm25=BM25Index.from_documents(docs, **dict(bm25_settings or {})), **settings)

    @classmethod
    def load(cls, persist_directory: str | Path, *, embedding: Embeddings | None = None,
             collection_name: str = "rag", **settings: Any) -> HybridRetriever:
        """Reopen a retriever saved by `from_documents(..., persist_directory=...)` (or by an earlier version
        of it, which kept the chunks in a Chroma collection named `collection_name`)."""
        bm25 = BM25Index.load(Path(persist_directory) / "bm25")
        name = knowledge_base_name(collection_name)
        if name in list_knowledge_bases(persist_directory):
            kb = IndexTarget(name, persist_directory, embedding=embedding)
            return cls(vectorstore=kb.chunks.vectorstore(kb.embedding), bm25=bm25, **settings)
        store = new_vectorstore(collection_name, embedding or default_embeddings(), persist_directory=persist_directory)
        return cls(vectorstore=store, bm25=bm25, **settings)

    # ------------------------------------------------------------------ search
    def _plan(self, k: int | None, filter: Mapping[str, Any] | None,
              fetch_k: int | None = None) -> tuple[int, int, dict[str, Any] | None]:
        k, flt, _ = self._call_settings(k, filter, {})
        fetch = self.fetch_k if fetch_k is None else check_k(fetch_k, name="fetch_k")
        return k, max(fetch, k), flt

    def _dense(self, query: str, fetch: int, flt: dict[str, Any] | None) -> Scored:
        return dense_search(self.vectorstore, query, k=fetch, filter=flt)

    def _lexical(self, query: str, fetch: int, flt: dict[str, Any] | None) -> Scored:
        return self.bm25.search_documents(query, k=fetch, filter=flt)

    def _gather(self, query: str, fetch: int, flt: dict[str, Any] | None) -> dict[str, Scored]:
        if self._pool is None:  # created on first use, reused: starting threads costs milliseconds
            self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="rag-hybrid")
        # (each in this context: what a store reports to the open stage, `rag.base.tracing.note_stage`, reaches it)
        dense = self._pool.submit(contextvars.copy_context().run, self._dense, query, fetch, flt)
        lexical = self._pool.submit(contextvars.copy_context().run, self._lexical, query, fetch, flt)
        return {"dense": dense.result(), "bm25": lexical.result()}

    async def _agather(self, query: str, fetch: int, flt: dict[str, Any] | None) -> dict[str, Scored]:
        dense, lexical = await asyncio.gather(asyncio.to_thread(self._dense, query, fetch, flt),
                                              asyncio.to_thread(self._lexical, query, fetch, flt))
        return {"dense": dense, "bm25": lexical}

    def candidates(self, query: str, *, k: int | None = None, filter: Mapping[str, Any] | None = None,
                   fetch_k: int | None = None) -> dict[str, Scored]:
        """The per-retriever candidate lists {"dense": [...], "bm25": [...]}, searched concurrently."""
        _, fetch, flt = self._plan(k, filter, fetch_k)
        return self._gather(query, fetch, flt)

    async def acandidates(self, query: str, *, k: int | None = None, filter: Mapping[str, Any] | None = None,
                          fetch_k: int | None = None) -> dict[str, Scored]:
        """Async `candidates` (both searches run in worker threads, gathered)."""
        _, fetch, flt = self._plan(k, filter, fetch_k)
        return await self._agather(query, fetch, flt)

    def fuse(self, candidates: Mapping[str, Scored], *, k: int | None = None) -> Scored:
        """Fuse candidate lists with this retriever's method and weights, keeping the best k."""
        top = self.k if k is None else check_k(k)
        return fuse(candidates, method=self.fusion, k=self.rrf_k, weights=self.weights, top_k=top, shared_ties=True)

    def search_with_scores(self, query: str, *, k: int | None = None, filter: Mapping[str, Any] | None = None,
                           fetch_k: int | None = None) -> Scored:
        """Fused top-k (document, fused score)."""
        return self.fuse(self.candidates(query, k=k, filter=filter, fetch_k=fetch_k), k=k)

    def _search(self, query: str, *, k: int, filter: dict[str, Any] | None, run_manager: Any,
                fetch_k: int | None = None) -> Scored:
        _, fetch, _ = self._plan(k, None, fetch_k)
        return self.fuse(self._gather(query, fetch, filter), k=k)

    async def _asearch(self, query: str, *, k: int, filter: dict[str, Any] | None, run_manager: Any,
                       fetch_k: int | None = None) -> Scored:
        _, fetch, _ = self._plan(k, None, fetch_k)
        return self.fuse(await self._agather(query, fetch, filter), k=k)


def _knowledge_base(directory: str | Path, collection_name: str, embedding: Embeddings | None) -> IndexTarget:
    """The storage of the knowledge base a persisted `HybridRetriever` writes: chunks stored as given, no AutoContext."""
    return IndexTarget(knowledge_base_name(collection_name), directory, embedding=embedding,
                       chunker=PassthroughChunker(), autocontext=AutoContext(enabled=False))
