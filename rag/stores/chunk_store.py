"""Where a knowledge base keeps its chunks: one interface over Chroma and the native-filter backends.

`rag.indexing` (sync, deletion, moves, reads) and the knowledge base's retriever talk to a
`ChunkStore`, never to a store's own API, so a knowledge base runs on any backend that has one:

- `ChromaChunkStore`: a Chroma collection (embedded in the knowledge base's directory, or on a
  Chroma server), through the functions of `rag.stores.chroma`;
- `VectorStoreChunks`: any vector store that `rag.stores.native` searches natively (pgvector's
  `PGVectorStore`, Qdrant, Milvus, `LanceStore`, `FaissStore`, `InMemoryVectorStore`).

What a backend lacks is handled here, the same way for all of them (docs/stores.md, support matrix):

- *get by metadata*: a filtered read is a native filtered search with a fixed probe vector and
  `k` = the number of stored chunks, so the engine selects every matching chunk (the order is
  irrelevant to the callers); a read of everything is a read by id of the chunk ids the knowledge
  base's records hold;
- *delete by filter*: the ids are read as above, then deleted by id;
- *update metadata in place* (a moved file): each backend's own update (a SQL `UPDATE` on
  pgvector's JSON column, Qdrant's `set_payload`, a Milvus upsert of the entity read back, a
  LanceDB `merge_insert`, FAISS and in-memory in place); a pgvector table that keeps metadata in
  typed columns cannot, and there a moved file is indexed again as a new one;
- *ids*: stores with UUID ids (pgvector's default table, Qdrant) take the 32-hex chunk ids as
  UUIDs and return them hyphenated; they are returned here in the form they were given.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> chunks = VectorStoreChunks(InMemoryVectorStore(DeterministicFakeEmbedding(size=4)))
    >>> chunks.add(["a" * 32], [[1.0, 0.0, 0.0, 0.0]], ["Paris"], [{"doc_id": "d1", "chunk_index": 0}])
    >>> chunks.backend, chunks.count(), [d.page_content for d in chunks.get_documents({"doc_id": "d1"})]
    ('inmemory', 1, ['Paris'])
"""

from __future__ import annotations

import importlib
import math
import uuid
from pathlib import Path
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from rag.base.errors import ConfigError, StoreError
from rag.base.filters import matches, to_chroma_where, validate_filter
from rag.stores import chroma
from rag.stores.native import native_search_for

__all__ = ["ChromaChunkStore", "ChunkStore", "VectorStoreChunks"]

#: ids per read or delete call on the other backends (bounded statements and requests)
_BATCH = 1000
#: metadata keys LangChain's Qdrant store adds to what it returns (not stored metadata)
_ADDED_KEYS = ("_id", "_collection_name")


class ChunkStore(Protocol):
    """The operations a knowledge base needs from the store that holds its chunks."""

    backend: str
    #: whether a moved file's chunks can be re-pointed in place (else the file is indexed again)
    can_update: bool

    def add(self, ids: Sequence[str], vectors: Sequence[Sequence[float]], texts: Sequence[str],
            metadatas: Sequence[dict[str, Any]]) -> None:
        """Write new chunks (the ids are not stored yet)."""
        ...

    def delete(self, ids: Sequence[str]) -> None:
        """Delete chunks by id (ids not stored are ignored)."""
        ...

    def get_ids(self, filter: dict[str, Any]) -> list[str]:
        """Ids of the chunks matching a portable filter."""
        ...

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        """Chunks (text, metadata, id) matching a portable filter (all when None)."""
        ...

    def count(self) -> int:
        """How many chunks are stored."""
        ...

    def get_metadatas(self, filter: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
        """Ids and metadata of the chunks matching a portable filter."""
        ...

    def update_metadatas(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """Replace the metadata of chunks by id, vectors and texts kept (only when `can_update`)."""
        ...

    def search(self, vector: Sequence[float], *, k: int,
               filter: dict[str, Any] | None) -> list[tuple[Document, float]]:
        """The `k` chunks closest to `vector` that the filter allows, as (document, cosine similarity);
        fewer when fewer are stored (an empty store returns none)."""
        ...

    def vectorstore(self, embedding: Embeddings) -> VectorStore:
        """The LangChain vector store over these chunks (the dense side of hybrid search)."""
        ...


class ChromaChunkStore:
    """A Chroma collection (cosine space) as a knowledge base's chunk store.

    Every read that Chroma fails (a damaged segment, state an interrupted write left) raises
    `rag.stores.chroma.DamagedStoreError` naming `where` and the fix; `check` reads the collection
    as a search does and `rebuild` replaces it with an empty one (the knowledge base then indexes
    its documents again).
    """

    backend = "chroma"
    can_update = True

    def __init__(self, collection: Any, *, client: Any = None, where: str = "the Chroma store",
                 marker: Path | None = None) -> None:
        self.collection, self.client, self.where, self.marker = collection, client, where, marker

    def _reading(self) -> Any:
        return chroma.readable(self.collection, self.where, self.marker)

    def add(self, ids: Sequence[str], vectors: Sequence[Sequence[float]], texts: Sequence[str],
            metadatas: Sequence[dict[str, Any]]) -> None:
        chroma.add_chunks(self.collection, ids, vectors, texts, metadatas)   # (write errors: store_write_error)

    def delete(self, ids: Sequence[str]) -> None:
        chroma.delete_ids(self.collection, ids)

    def get_ids(self, filter: dict[str, Any]) -> list[str]:
        with self._reading():
            return chroma.get_ids(self.collection, where=to_chroma_where(validate_filter(filter)))

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        with self._reading():
            return chroma.ChromaChunks(self.collection).get_documents(filter)

    def get_metadatas(self, filter: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
        """Ids and metadata of the chunks matching a portable filter."""
        with self._reading():
            return chroma.get_metadatas(self.collection, where=to_chroma_where(validate_filter(filter)))

    def update_metadatas(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """Replace the metadata of chunks by id."""
        chroma.update_metadatas(self.collection, ids, metadatas, batch=5000)

    def count(self) -> int:
        with self._reading():
            return chroma.count(self.collection)

    def search(self, vector: Sequence[float], *, k: int,
               filter: dict[str, Any] | None) -> list[tuple[Document, float]]:
        flt = validate_filter(filter)
        total = self.count()   # (Chroma warns when asked for more results than it holds)
        if total == 0:
            return []
        with self._reading():
            hits = chroma.query_collection(self.collection, vector, k=min(k, total),
                                           where=to_chroma_where(flt) if flt else None)
        return [(doc, 1.0 - distance) for doc, distance in hits]

    def check(self) -> None:
        """Read the collection as a search does; `DamagedStoreError` when Chroma cannot."""
        chroma.check_collection(self.collection, self.where)

    def rebuild(self) -> None:
        """Replace the collection by an empty one of the same name (its chunks are indexed again).

        Raises:
            StoreError: Chroma cannot even drop it (its database file is damaged): what to delete.
        """
        name = self.collection.name
        try:
            with self._reading():
                self.client.delete_collection(name)
            self.collection = chroma.open_collection(self.client, name)
        except Exception as exc:
            raise StoreError(f"{self.where}: the damaged Chroma collection {name!r} cannot be replaced "
                             f"({type(exc).__name__}); move the store directory's chroma.sqlite3 and its "
                             "segment folders aside and run rag index again") from None

    def vectorstore(self, embedding: Embeddings) -> VectorStore:
        return chroma.new_chroma(self.collection.name, embedding, client=self.client)


class VectorStoreChunks:
    """A vector store that `rag.stores.native` searches natively, as a knowledge base's chunk store.

    Args:
        store: e.g. `rag.stores.pgvector.open_store(...)`, a `FaissStore`, a `QdrantVectorStore`.
        all_ids: returns the ids of every stored chunk (the knowledge base passes its records'),
            for reads of everything; without it, such reads are a search with `k` = `count()`.
        dimension: returns the vectors' dimension when known (the knowledge base passes its
            manifest's); else the store's embedding model is asked.

    Raises:
        ConfigError: no module here searches that store type natively.
    """

    def __init__(self, store: VectorStore, *, all_ids: Callable[[], list[str]] | None = None,
                 dimension: Callable[[], int | None] | None = None) -> None:
        search = native_search_for(store)
        if search is None:
            raise ConfigError(f"a knowledge base cannot keep its chunks in a {type(store).__name__}: use Chroma "
                              "(the default) or a store rag filters natively (PGVectorStore, QdrantVectorStore, "
                              "Milvus, LanceStore, FaissStore, InMemoryVectorStore; see docs/stores.md)")
        self.store, self.native, self.backend, self.all_ids = store, search, search.backend, all_ids
        self._dimension_known: int | None = None
        self._recorded_dimension = dimension

    # ------------------------------------------------------------------ ids
    def _ours(self, doc: Document) -> Document:
        """A store's document with the chunk id as written and the stored metadata only."""
        metadata = {k: v for k, v in doc.metadata.items() if k not in _ADDED_KEYS}
        return Document(page_content=doc.page_content, metadata=metadata, id=_hex_id(doc.id))

    # ------------------------------------------------------------------ writing
    def add(self, ids: Sequence[str], vectors: Sequence[Sequence[float]], texts: Sequence[str],
            metadatas: Sequence[dict[str, Any]]) -> None:
        ids, vectors, texts, metadatas = list(ids), [list(map(float, v)) for v in vectors], list(texts), list(metadatas)
        if not ids:
            return
        store = self.store
        if self.backend == "inmemory":   # its documented dict: {id: {id, vector, text, metadata}}
            for id_, vector, text, md in zip(ids, vectors, texts, metadatas, strict=True):
                store.store[id_] = {"id": id_, "vector": vector, "text": text, "metadata": dict(md)}
        elif self.backend == "qdrant":
            importlib.import_module("rag.stores.qdrant").add_points(store, ids, vectors, texts, metadatas)
        elif hasattr(store, "add_embeddings"):   # PGVectorStore, Milvus, LanceStore, FaissStore
            for start in range(0, len(ids), _BATCH):
                part = slice(start, start + _BATCH)
                store.add_embeddings(texts[part], vectors[part], metadatas=metadatas[part], ids=ids[part])
        else:  # pragma: no cover - every backend of rag.stores.native is handled above
            raise ConfigError(f"{self.backend}: cannot write precomputed vectors to a {type(store).__name__}")
        self._flush()

    def delete(self, ids: Sequence[str]) -> None:
        ids = list(ids)
        for start in range(0, len(ids), _BATCH):
            part = ids[start:start + _BATCH]
            if self.backend == "inmemory":
                for id_ in part:
                    self.store.store.pop(id_, None)
            else:
                self.store.delete(ids=[self._stored_id(i) for i in part])
        if ids:
            self._flush()

    @property
    def name(self) -> str | None:
        """The table or collection holding the chunks (None for stores that have no name: FAISS, in memory)."""
        if self.backend == "pgvector":
            from rag.stores.pgvector import table_of

            return table_of(self.store)
        return getattr(self.store, "collection_name", None) or getattr(self.store, "table_name", None)

    @property
    def can_update(self) -> bool:
        """Whether metadata can be replaced in place (`update_metadatas`)."""
        if self.backend == "pgvector":
            from rag.stores.pgvector import can_update_metadata

            return can_update_metadata(self.store)
        return self.backend in ("inmemory", "faiss", "lancedb", "qdrant", "milvus")

    def get_metadatas(self, filter: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
        """Ids and metadata of the chunks matching a portable filter."""
        docs = self.get_documents(filter)
        return [d.id for d in docs], [d.metadata for d in docs]

    def update_metadatas(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """Replace the metadata of chunks by id (vectors and texts kept), with the backend's own update."""
        if not self.can_update:
            raise ConfigError(f"{self.backend}: this store cannot update metadata in place")
        ids, metadatas = list(ids), [dict(m) for m in metadatas]
        for start in range(0, len(ids), _BATCH):
            part, mds = [self._stored_id(i) for i in ids[start:start + _BATCH]], metadatas[start:start + _BATCH]
            if self.backend == "inmemory":
                for id_, md in zip(part, mds, strict=True):
                    if id_ in self.store.store:
                        self.store.store[id_]["metadata"] = md
            elif self.backend in ("faiss", "lancedb"):
                self.store.update_metadatas(part, mds)
            else:   # pgvector, qdrant, milvus: functions of their store modules
                importlib.import_module(f"rag.stores.{self.backend}").update_metadatas(self.store, part, mds)
        self._flush()

    def _stored_id(self, id_: str) -> str:
        return str(uuid.UUID(id_)) if self.backend == "qdrant" else id_

    def _flush(self) -> None:
        """Persist a store that lives in memory until saved (`FaissStore` opened on a directory)."""
        directory = getattr(self.store, "directory", None)
        if self.backend == "faiss" and directory is not None:
            self.store.save(directory)

    # ------------------------------------------------------------------ reading
    def get_by_ids(self, ids: Sequence[str]) -> list[Document]:
        """The stored chunks with these ids (ids not stored are absent)."""
        ids, found = list(ids), []
        read = self.store.get_by_ids
        if self.backend in ("qdrant", "milvus"):   # (LangChain's Milvus has no get_by_ids; Qdrant's drops ids)
            module = importlib.import_module(f"rag.stores.{self.backend}")
            read = lambda part: module.get_by_ids(self.store, part)  # noqa: E731
        for start in range(0, len(ids), _BATCH):
            found += [self._ours(d) for d in read([self._stored_id(i) for i in ids[start:start + _BATCH]])]
        return found

    def get_ids(self, filter: dict[str, Any]) -> list[str]:
        return [doc.id for doc in self.get_documents(filter)]

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        flt = validate_filter(filter)
        total = self.count()
        if total == 0:
            return []
        limit = getattr(self.native, "max_k", None)   # Milvus returns at most 16,384 hits per search
        if self.all_ids is not None and (flt is None or (limit is not None and total > limit)):
            return [doc for doc in self.get_by_ids(self.all_ids()) if flt is None or matches(doc.metadata, flt)]
        if limit is not None and total > limit:
            raise StoreError(f"{self.backend}: a filtered read of {total:,} chunks needs the chunk ids (a search "
                             f"returns at most {limit:,}); open it through its knowledge base")
        return [doc for doc, _ in self.search(self._probe(), k=total, filter=flt)]

    def _probe(self) -> list[float]:
        """A fixed query vector for a filtered read (every matching chunk is returned, in any order)."""
        dimension = self._dimension()
        return [1.0] + [0.0] * (dimension - 1)

    def _dimension(self) -> int:
        if self._dimension_known is None and self._recorded_dimension is not None:
            self._dimension_known = self._recorded_dimension()
        if self._dimension_known is None:
            embeddings = getattr(self.store, "embeddings", None)
            if embeddings is None:
                raise StoreError(f"{self.backend}: the store has no embedding model, so its dimension is unknown")
            self._dimension_known = len(embeddings.embed_query("dimension"))
        return self._dimension_known

    def count(self) -> int:
        store, backend = self.store, self.backend
        if backend == "inmemory":
            return len(store.store)
        if backend == "faiss":
            return len(store)
        if backend == "lancedb":
            return store.count()
        if backend == "qdrant":
            return int(store.client.count(collection_name=store.collection_name, exact=True).count)
        if backend == "milvus":
            if store.col is None:   # created on the first write
                return 0
            return int(store.client.query(collection_name=store.collection_name, filter="",
                                          output_fields=["count(*)"])[0]["count(*)"])
        if backend == "pgvector":
            from rag.stores.pgvector import count_rows

            return count_rows(store)
        raise ConfigError(f"{backend}: cannot count the chunks of a {type(store).__name__}")  # pragma: no cover

    def search(self, vector: Sequence[float], *, k: int,
               filter: dict[str, Any] | None) -> list[tuple[Document, float]]:
        flt = validate_filter(filter)
        vector = [float(x) for x in vector]
        if any(not math.isfinite(x) for x in vector):
            raise ConfigError("the query vector holds NaN or infinite values")
        return [(self._ours(doc), score) for doc, score in self.native.search(self.store, vector, k=k, flt=flt)]

    def vectorstore(self, embedding: Embeddings) -> VectorStore:
        from rag.stores.chunk_view import ChunkStoreView

        return ChunkStoreView(chunks=self, embedding=embedding)


def _hex_id(id_: str | None) -> str | None:
    """A UUID-form id as the 32-hex chunk id it was written as (other ids unchanged)."""
    if id_ is not None and len(id_) == 36 and id_.count("-") == 4:
        try:
            return uuid.UUID(id_).hex
        except ValueError:
            return id_
    return id_

