"""`ExactVectorStore`: an in-memory vector store with exact cosine search and portable filters.

Vectors live in numpy arrays and every search is a dot product over the chunks the filter allows,
so the neighbours are the true nearest ones (an HNSW store such as Chroma returns them up to its
approximation). That suits stores of up to a few hundred thousand chunks held in memory, tests,
and benchmarks that must not depend on an index's randomness. An equality or ``$in`` clause of
the portable filter (`rag.base.filters`) selects its chunks from a per-key value index, so a
one-document filter costs a search over that document only.

**Several vectors per chunk.** A store may keep more than one vector for each chunk, one per
*view*: for example the chunk text alone (``"text"``) and the chunk with its AutoContext header
(``"context"``, `rag.indexing.autocontext.AutoContext.embedding_texts`). A search scores each chunk
by ``sum(weight[view] * cosine(query, vector[view]))``; `with_weights` returns a store over the
same chunks and vectors with other weights (no copy), so one set of arrays serves a text-only, a
header-only and a mixed search. The default is one view, ``"text"``.

`ExactVectorStore.as_retriever()` gives an `ExactRetriever`, a `PortableRetriever` (``k`` and a
portable ``filter`` per call) whose documents carry ``metadata["score"]`` and
``metadata["scores"]["dense"]`` (the weighted cosine). `rag.retrieval.hybrid.HybridRetriever`
accepts the store as its dense side.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> store = ExactVectorStore(DeterministicFakeEmbedding(size=16))
    >>> ids = store.add_texts(["Paris is in France.", "Rome is in Italy."], metadatas=[{"c": "fr"}, {"c": "it"}])
    >>> [d.page_content for d in store.similarity_search("Rome is in Italy.", k=1)]
    ['Rome is in Italy.']
    >>> [d.page_content for d in store.as_retriever().invoke("Paris", filter={"c": "it"})]
    ['Rome is in Italy.']
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from rag.base.errors import ConfigError
from rag.base.filters import matches_canonical, validate_filter
from rag.stores.chunk_store import Capability
from rag.stores.layout_retriever import LayoutRetriever
from rag.stores.vector_store_chunks import VectorStoreChunks
from rag.stores.value_index import ValueIndex

__all__ = ["ExactChunks", "DEFAULT_VIEW", "ExactRetriever", "ExactVectorStore"]

#: The view holding the vectors of the chunk texts themselves.
DEFAULT_VIEW = "text"
_FULL_SORT = 4096   # below this many candidates a full stable sort is as cheap as a partition


@dataclass
class _Chunks:
    """The rows shared by a store and its re-weighted copies."""

    texts: list[str] = field(default_factory=list)
    metadatas: list[dict[str, Any]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)     # view -> (n, d) float32, normalised
    value_index: ValueIndex = field(init=False)

    def __post_init__(self) -> None:
        self.value_index = ValueIndex(lambda: enumerate(self.metadatas))


class ExactVectorStore(VectorStore):
    """An in-memory vector store with exact (brute-force) cosine search; see the module docstring.

    Args:
        embedding: embeds queries, and the texts given to `add_texts`.
        views: view name -> weight of its cosine in a chunk's score; default ``{"text": 1.0}``.
            Every added chunk needs a vector for every view; weights must be >= 0 and not all 0.

    Raises:
        ConfigError: no view, a negative weight or only zero weights.
    """

    def __init__(self, embedding: Embeddings, *, views: Mapping[str, float] | None = None) -> None:
        self._embedding = embedding
        self._weights = _check_weights(dict(views) if views is not None else {DEFAULT_VIEW: 1.0})
        self._chunks = _Chunks(vectors={name: np.zeros((0, 0), dtype=np.float32) for name in self._weights})

    @property
    def embeddings(self) -> Embeddings:
        return self._embedding

    @property
    def views(self) -> dict[str, float]:
        """View name -> weight used by searches of this store."""
        return dict(self._weights)

    def __len__(self) -> int:
        return len(self._chunks.ids)

    def with_weights(self, views: Mapping[str, float]) -> ExactVectorStore:
        """A store over the same chunks and vectors (shared, not copied) with other view weights.

        Raises:
            ConfigError: a view this store does not hold, or weights that are all zero.
        """
        unknown = sorted(set(views) - set(self._chunks.vectors))
        if unknown:
            raise ConfigError(f"unknown view(s) {unknown}; this store holds {sorted(self._chunks.vectors)}")
        clone = ExactVectorStore.__new__(ExactVectorStore)
        clone._embedding, clone._chunks = self._embedding, self._chunks
        clone._weights = _check_weights(dict(views))
        return clone

    # ------------------------------------------------------------------ writing
    def add_texts(self, texts: Iterable[str], metadatas: list[dict] | None = None, *, ids: list[str] | None = None,
                  view_texts: Mapping[str, Sequence[str]] | None = None, **kwargs: Any) -> list[str]:
        """Embed and add texts; a view other than "text" embeds its own texts from `view_texts`.

        Raises:
            ConfigError: a view without texts, or texts of another length.
        """
        texts = list(texts)
        given = dict(view_texts or {})
        vectors = {}
        for view in self._chunks.vectors:
            source = texts if view == DEFAULT_VIEW and view not in given else given.get(view)
            if source is None:
                raise ConfigError(f"view {view!r} needs its texts: add_texts(..., view_texts={{{view!r}: [...]}})")
            if len(source) != len(texts):
                raise ConfigError(f"view {view!r} has {len(source)} texts for {len(texts)} chunks")
            vectors[view] = self._embedding.embed_documents(list(source)) if texts else []
        return self.add_embeddings(texts, vectors, metadatas=metadatas, ids=ids)

    def add_embeddings(self, texts: Sequence[str], vectors: Any, *, metadatas: Sequence[dict] | None = None,
                       ids: Sequence[str] | None = None) -> list[str]:
        """Add chunks with vectors computed elsewhere (an array, or view name -> array for several views).

        Vectors are normalised; ids default to random UUIDs; adding an id that exists is an error.

        Raises:
            ConfigError: a missing view, a shape that does not match, or a duplicate id.
        """
        texts = list(texts)
        by_view = vectors if isinstance(vectors, Mapping) else {DEFAULT_VIEW: vectors}
        missing = sorted(set(self._chunks.vectors) - set(by_view))
        if missing or set(by_view) - set(self._chunks.vectors):
            raise ConfigError(f"vectors must be given for the views {sorted(self._chunks.vectors)}; "
                              f"got {sorted(by_view)}")
        ids = [str(i) for i in ids] if ids is not None else [uuid.uuid4().hex for _ in texts]
        metadatas = [dict(m or {}) for m in metadatas] if metadatas is not None else [{} for _ in texts]
        if not len(ids) == len(metadatas) == len(texts):
            raise ConfigError(f"{len(texts)} texts, {len(metadatas)} metadatas and {len(ids)} ids: give one each")
        known = set(self._chunks.ids)
        repeated = {i for i, n in Counter(ids).items() if n > 1}   # (not ids.count per id: 100,000 ids took minutes)
        duplicates = sorted({i for i in ids if i in known} | repeated)[:5]
        if duplicates:
            raise ConfigError(f"ids already in the store or repeated: {duplicates}; delete them first")
        arrays = {view: _normalised(by_view[view], len(texts), view) for view in self._chunks.vectors}
        for view, array in arrays.items():   # check every view before changing any
            old = self._chunks.vectors[view]
            if len(old) and old.shape[1] != array.shape[1]:
                raise ConfigError(f"view {view!r} holds {old.shape[1]}-d vectors; got {array.shape[1]}-d ones")
        for view, array in arrays.items():
            old = self._chunks.vectors[view]
            self._chunks.vectors[view] = np.concatenate([old, array]) if len(old) else array
        self._chunks.texts += texts
        self._chunks.metadatas += metadatas
        self._chunks.ids += ids
        self._chunks.value_index.clear()
        return ids

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool:
        """Delete chunks by id (all of them when `ids` is None)."""
        drop = set(self._chunks.ids if ids is None else ids)
        keep = np.array([i not in drop for i in self._chunks.ids], dtype=bool)
        chunks = self._chunks
        chunks.texts = [t for t, k in zip(chunks.texts, keep, strict=True) if k]
        chunks.metadatas = [m for m, k in zip(chunks.metadatas, keep, strict=True) if k]
        chunks.ids = [i for i, k in zip(chunks.ids, keep, strict=True) if k]
        chunks.vectors = {view: array[keep] if len(array) else array for view, array in chunks.vectors.items()}
        chunks.value_index.clear()
        return True

    @classmethod
    def from_texts(cls, texts: list[str], embedding: Embeddings, metadatas: list[dict] | None = None, *,
                   ids: list[str] | None = None, views: Mapping[str, float] | None = None,
                   view_texts: Mapping[str, Sequence[str]] | None = None, **kwargs: Any) -> ExactVectorStore:
        """A store holding `texts` (embedded now)."""
        store = cls(embedding, views=views)
        store.add_texts(texts, metadatas, ids=ids, view_texts=view_texts)
        return store

    # ------------------------------------------------------------------ reading
    def document(self, position: int) -> Document:
        """A copy of the chunk at `position`."""
        return Document(page_content=self._chunks.texts[position], metadata=dict(self._chunks.metadatas[position]),
                        id=self._chunks.ids[position])

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        """Every chunk matching the portable filter (all when None), in the order added (a `ChunkSource`)."""
        return [self.document(int(i)) for i in self._positions(validate_filter(filter))]

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The chunks with these ids (unknown ids are skipped)."""
        where = {i: p for p, i in enumerate(self._chunks.ids)}
        return [self.document(where[i]) for i in ids if i in where]

    # ------------------------------------------------------------------ search
    def search_by_vector(self, vector: Sequence[float], *, k: int = 4,
                         filter: dict[str, Any] | None = None) -> list[tuple[Document, float]]:
        """The `k` chunks with the highest weighted cosine to `vector`, best first, as (copy, score)."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"k must be a positive integer, got {k!r}")
        pool = self._positions(validate_filter(filter))
        if not len(pool):
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        query = query / max(float(np.linalg.norm(query)), 1e-12)
        scores = None
        for view, weight in self._weights.items():
            if weight:
                part = self._chunks.vectors[view][pool] @ query
                scores = weight * part if scores is None else scores + weight * part
        if len(pool) <= max(k, _FULL_SORT):
            order = np.argsort(-scores, kind="stable")[:k]
        else:
            top = np.argpartition(-scores, k - 1)[:k]
            order = top[np.lexsort((top, -scores[top]))]
        return [(self.document(int(pool[i])), float(scores[i])) for i in order]

    def similarity_search_with_score(self, query: str, k: int = 4, filter: dict[str, Any] | None = None,
                                     **kwargs: Any) -> list[tuple[Document, float]]:
        """(chunk, weighted cosine) pairs, best first."""
        return self.search_by_vector(self._embedding.embed_query(query), k=k, filter=filter)

    def similarity_search(self, query: str, k: int = 4, filter: dict[str, Any] | None = None,
                          **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k=k, filter=filter)]

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4, filter: dict[str, Any] | None = None,
                                    **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.search_by_vector(embedding, k=k, filter=filter)]

    def _select_relevance_score_fn(self):
        return lambda score: score   # scores are cosine similarities already

    def chunk_store(self) -> ExactChunks:
        """This store as a `ChunkStore` (what `rag.stores.registry.chunks_of` returns for it)."""
        return ExactChunks(self, hex_ids=False)

    def as_retriever(self, **kwargs: Any) -> ExactRetriever:
        """An `ExactRetriever` over this store (`k`, `filter` as defaults)."""
        return ExactRetriever(store=self, **kwargs)

    def _positions(self, flt: dict[str, Any] | None) -> np.ndarray:
        """Positions of the chunks the canonical filter allows, ascending."""
        n = len(self._chunks.ids)
        if flt is None:
            return np.arange(n)
        exact = self._chunks.value_index.exact(flt)
        if exact is not None:   # the index decides the whole filter (a principal's permissions, a document)
            return exact
        pool = self._chunks.value_index.candidates(flt)
        candidates = range(n) if pool is None else pool.tolist()
        metadatas = self._chunks.metadatas
        return np.array([i for i in candidates if matches_canonical(metadatas[i], flt)], dtype=np.int64)


class ExactChunks(VectorStoreChunks):
    """An `ExactVectorStore` as a `ChunkStore` (exact weighted-cosine search; metadata is not updated in place)."""

    backend = "exact"
    capabilities = frozenset({Capability.ASYNC_SEARCH})   # (no update in place)

    def _native_search(self, vector: list[float], *, k: int,
                       flt: dict[str, Any] | None) -> list[tuple[Document, float]]:
        return self.store.search_by_vector(vector, k=k, filter=flt)

    def count(self) -> int:
        return len(self.store)

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        return self.store.get_documents(filter)


class ExactRetriever(LayoutRetriever):
    """Dense search over an `ExactVectorStore`; takes `k` and a portable `filter` per call.

    Attributes:
        store: the store.
        k: how many chunks to return.
        filter: a default portable filter, ANDed with a call's `filter=`.
    """

    store: ExactVectorStore


def _check_weights(views: dict[str, float]) -> dict[str, float]:
    if not views:
        raise ConfigError("a store needs at least one view, e.g. views={'text': 1.0}")
    bad = {name: w for name, w in views.items()
           if not isinstance(name, str) or isinstance(w, bool) or not isinstance(w, int | float) or w < 0}
    if bad:
        raise ConfigError(f"view weights must be numbers >= 0 keyed by view name, got {bad}")
    if not any(views.values()):
        raise ConfigError(f"at least one view weight must be positive, got {views}")
    return {name: float(w) for name, w in views.items()}


def _normalised(vectors: Any, rows: int, view: str) -> np.ndarray:
    array = np.asarray(vectors, dtype=np.float32)
    if rows == 0:
        return array.reshape(0, array.shape[-1] if array.ndim == 2 else 0)
    if array.ndim != 2 or array.shape[0] != rows:
        raise ConfigError(f"view {view!r}: expected {rows} vectors, got an array of shape {array.shape}")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.where(norms == 0, 1.0, norms)
