"""`FaissStore`: a FAISS vector store with exact filtered search, persisted without pickle.

Vectors are normalised and kept in a flat inner-product index (`IndexIDMap2(IndexFlatIP)`), so a
score is the cosine similarity and a search is exact. A filtered search selects the chunks the
portable filter matches first (`rag.base.filters`, over the metadata held beside the index) and
hands their ids to FAISS as an `IDSelectorBatch`: FAISS ranks only those, so `k` matching chunks
come back whenever `k` exist (LangChain's FAISS store filters the `fetch_k` nearest afterwards).

`save(directory)` writes the index with `faiss.write_index` and the texts, ids and metadata to a
SQLite file (metadata as JSON); `FaissStore.load(directory, embedding)` reads both back. Nothing
is pickled, so loading a store never runs code from the file (LangChain's `save_local` pickles
its docstore, which is why it is not used here).

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> store = FaissStore(DeterministicFakeEmbedding(size=8))
    >>> store.add_texts(["a", "b", "c"], metadatas=[{"n": 1}, {"n": 2}, {"n": 3}], ids=["x", "y", "z"])
    ['x', 'y', 'z']
    >>> sorted(d.id for d in store.similarity_search("a", k=5, filter={"n": {"$gte": 2}}))
    ['y', 'z']
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from rag.base.errors import ConfigError, MissingDependencyError, StoreError
from rag.base.filters import matches_canonical, validate_filter
from rag.stores.vector_store_chunks import VectorStoreChunks
from rag.stores.value_index import ValueIndex

__all__ = ["open_store", "scratch_store", "STORE", "FaissChunks", "FaissStore"]

_INDEX_FILE = "index.faiss"
_DOCS_FILE = "documents.sqlite"


def _faiss() -> Any:
    try:
        import faiss
    except ImportError as exc:
        raise MissingDependencyError.for_extra("faiss-cpu", "stores", "FaissStore") from exc
    return faiss


class FaissStore(VectorStore):
    """A FAISS flat (exact) cosine index with portable filters; see the module docstring.

    Args:
        embedding: embeds texts and queries.
    """

    def __init__(self, embedding: Embeddings) -> None:
        self._embedding = embedding
        #: where `open` read it from (a knowledge base saves it there after each write); None: in memory
        self.directory: Path | None = None
        self._index: Any = None          # created on the first add, when the dimension is known
        self._rows: dict[int, tuple[str, str, dict[str, Any]]] = {}   # FAISS id -> (id, text, metadata)
        self._by_id: dict[str, int] = {}
        self._next = 0
        self._values = ValueIndex(lambda: ((row, md) for row, (_, _, md) in self._rows.items()))

    @property
    def embeddings(self) -> Embeddings:
        return self._embedding

    def __len__(self) -> int:
        return len(self._rows)

    # ------------------------------------------------------------------ writing
    def add_texts(self, texts: Iterable[str], metadatas: list[dict] | None = None, *,
                  ids: list[str] | None = None, **kwargs: Any) -> list[str]:
        """Embed and add texts; an id already stored is replaced."""
        texts = list(texts)
        return self.add_embeddings(texts, self._embedding.embed_documents(texts) if texts else [],
                                   metadatas=metadatas, ids=ids)

    def add_embeddings(self, texts: Sequence[str], vectors: Any, *, metadatas: Sequence[dict] | None = None,
                       ids: Sequence[str] | None = None) -> list[str]:
        """Add chunks whose vectors were computed elsewhere; an id already stored is replaced.

        Raises:
            ConfigError: lengths that differ, repeated ids or vectors of another dimension.
        """
        texts = list(texts)
        ids = [str(i) for i in ids] if ids is not None else [os.urandom(16).hex() for _ in texts]
        metadatas = [dict(m or {}) for m in metadatas] if metadatas is not None else [{} for _ in texts]
        if not len(ids) == len(metadatas) == len(texts):
            raise ConfigError(f"{len(texts)} texts, {len(metadatas)} metadatas and {len(ids)} ids: give one each")
        if len(set(ids)) != len(ids):
            raise ConfigError("ids repeat within one add; give each chunk its own id")
        if not texts:
            return []
        faiss = _faiss()
        array = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
        if array.ndim != 2 or array.shape[0] != len(texts):
            raise ConfigError(f"expected {len(texts)} vectors, got an array of shape {array.shape}")
        if self._index is None:
            self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(array.shape[1]))
        elif self._index.d != array.shape[1]:
            raise ConfigError(f"this store holds {self._index.d}-d vectors; got {array.shape[1]}-d ones")
        faiss.normalize_L2(array)
        self.delete([i for i in ids if i in self._by_id])
        rows = np.arange(self._next, self._next + len(texts), dtype=np.int64)
        self._index.add_with_ids(array, rows)
        for row, id_, text, md in zip(rows.tolist(), ids, texts, metadatas, strict=True):
            self._rows[row] = (id_, text, md)
            self._by_id[id_] = row
        self._next += len(texts)
        self._values.clear()
        return ids

    def update_metadatas(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """Replace the metadata of chunks by id (vectors and texts kept; unknown ids are ignored)."""
        for id_, md in zip(ids, metadatas, strict=True):
            row = self._by_id.get(id_)
            if row is not None:
                stored_id, text, _ = self._rows[row]
                self._rows[row] = (stored_id, text, dict(md))
        self._values.clear()

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool:
        """Delete chunks by id (all of them when `ids` is None); unknown ids are ignored."""
        rows = list(self._rows) if ids is None else [self._by_id[i] for i in ids if i in self._by_id]
        if rows and self._index is not None:
            self._index.remove_ids(np.asarray(rows, dtype=np.int64))
        for row in rows:
            id_, _, _ = self._rows.pop(row)
            del self._by_id[id_]
        if rows:
            self._values.clear()
        return True

    @classmethod
    def from_texts(cls, texts: list[str], embedding: Embeddings, metadatas: list[dict] | None = None, *,
                   ids: list[str] | None = None, **kwargs: Any) -> FaissStore:
        """A store holding `texts` (embedded now)."""
        store = cls(embedding)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    # ------------------------------------------------------------------ reading
    def _document(self, row: int) -> Document:
        id_, text, md = self._rows[row]
        return Document(page_content=text, metadata=dict(md), id=id_)

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The chunks with these ids (unknown ids are skipped)."""
        return [self._document(self._by_id[i]) for i in ids if i in self._by_id]

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        """Every chunk matching the portable filter (all when None), in the order added."""
        flt = validate_filter(filter)
        return [self._document(row) for row in sorted(self._rows)
                if flt is None or matches_canonical(self._rows[row][2], flt)]

    def search_by_vector(self, vector: Sequence[float], *, k: int = 4,
                         filter: dict[str, Any] | None = None) -> list[tuple[Document, float]]:
        """The `k` chunks most similar to `vector` among those the filter allows: (copy, cosine), best first."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"k must be a positive integer, got {k!r}")
        flt = validate_filter(filter)
        if self._index is None or not self._rows:
            return []
        faiss = _faiss()
        query = np.asarray(vector, dtype=np.float32).reshape(1, -1).copy()
        faiss.normalize_L2(query)
        params = None
        allowed = len(self._rows)
        if flt is not None:
            rows = self._values.exact(flt)   # the index decides the whole filter (a principal's): no per-row check
            if rows is None:
                pool = self._values.candidates(flt)
                rows = np.fromiter((row for row in (self._rows if pool is None else pool.tolist())
                                    if matches_canonical(self._rows[row][2], flt)), dtype=np.int64)
            if not len(rows):
                return []
            params, allowed = faiss.SearchParameters(sel=faiss.IDSelectorBatch(rows)), len(rows)
        scores, found = self._index.search(query, min(k, allowed), params=params)
        return [(self._document(int(row)), float(score)) for row, score in zip(found[0], scores[0], strict=True)
                if row >= 0]

    def similarity_search_with_score(self, query: str, k: int = 4, filter: dict[str, Any] | None = None,
                                     **kwargs: Any) -> list[tuple[Document, float]]:
        """(chunk, cosine similarity) pairs, best first; `filter` is a portable filter."""
        return self.search_by_vector(self._embedding.embed_query(query), k=k, filter=filter)

    def similarity_search(self, query: str, k: int = 4, filter: dict[str, Any] | None = None,
                          **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k=k, filter=filter)]

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4, filter: dict[str, Any] | None = None,
                                    **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.search_by_vector(embedding, k=k, filter=filter)]

    def _select_relevance_score_fn(self):
        return lambda score: score   # cosine similarities already

    # ------------------------------------------------------------------ persistence
    def save(self, directory: str | Path) -> None:
        """Write the index (`faiss.write_index`) and the chunks (SQLite, metadata as JSON) to `directory`."""
        faiss = _faiss()
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        if self._index is not None:
            faiss.write_index(self._index, str(path / f"{_INDEX_FILE}.tmp"))
            os.replace(path / f"{_INDEX_FILE}.tmp", path / _INDEX_FILE)
        tmp = path / f"{_DOCS_FILE}.tmp"
        tmp.unlink(missing_ok=True)
        with sqlite3.connect(tmp) as db:
            db.execute("CREATE TABLE chunks (row INTEGER PRIMARY KEY, id TEXT UNIQUE, text TEXT, metadata TEXT)")
            db.executemany("INSERT INTO chunks VALUES (?, ?, ?, ?)",
                           [(row, id_, text, json.dumps(md)) for row, (id_, text, md) in self._rows.items()])
        db.close()
        os.replace(tmp, path / _DOCS_FILE)

    @classmethod
    def open(cls, directory: str | Path, embedding: Embeddings) -> FaissStore:
        """The store saved in `directory`, or an empty one to be saved there; `directory` is remembered."""
        path = Path(directory)
        store = cls.load(path, embedding) if (path / _DOCS_FILE).is_file() else cls(embedding)
        store.directory = path
        return store

    @classmethod
    def load(cls, directory: str | Path, embedding: Embeddings) -> FaissStore:
        """A store read back from `save(directory)`.

        Raises:
            StoreError: the directory holds no saved store, or its index and chunks disagree.
        """
        path = Path(directory)
        if not (path / _DOCS_FILE).is_file():
            raise StoreError(f"no FAISS store in {path}: {_DOCS_FILE} is missing (write one with FaissStore.save)")
        store = cls(embedding)
        db = sqlite3.connect(f"file:{path / _DOCS_FILE}?mode=ro", uri=True)
        try:
            for row, id_, text, md in db.execute("SELECT row, id, text, metadata FROM chunks ORDER BY row"):
                store._rows[row] = (id_, text, json.loads(md))
                store._by_id[id_] = row
        finally:
            db.close()
        store._next = max(store._rows, default=-1) + 1
        if (path / _INDEX_FILE).is_file():
            store._index = _faiss().read_index(str(path / _INDEX_FILE))
        if (store._index.ntotal if store._index is not None else 0) != len(store._rows):
            raise StoreError(f"{path}: the index holds {store._index.ntotal if store._index else 0} vectors but "
                             f"{_DOCS_FILE} {len(store._rows)} chunks; save the store again")
        return store


class FaissChunks(VectorStoreChunks):
    """The `ChunkStore` of a `FaissStore`: ids selected by the filter, then ranked by FAISS; a store
    opened on a directory is saved after every write."""

    backend = "faiss"

    def _native_search(self, vector: list[float], *, k: int,
                       flt: dict[str, Any] | None) -> list[tuple[Document, float]]:
        """The `k` matching chunks closest to `vector`: (document, cosine similarity)."""
        return self.store.search_by_vector(vector, k=k, filter=flt)

    def count(self) -> int:
        return len(self.store)

    def _flush(self) -> None:
        directory = getattr(self.store, "directory", None)
        if directory is not None:
            self.store.save(directory)


STORE = FaissChunks


def open_store(path: str | Path, embedding: Embeddings, *, create: bool = False) -> FaissStore:
    """The `FaissStore` saved in the directory `path`; with `create`, one saved there after each write."""
    return FaissStore.open(path, embedding) if create else FaissStore.load(path, embedding)


def scratch_store(embedding: Embeddings, workdir: str | Path, name: str, *, url: str | None = None) -> FaissStore:
    """A new, empty `FaissStore` saved under `workdir` (for tests and benchmarks)."""
    return FaissStore.open(Path(workdir) / f"faiss-{name}", embedding)
