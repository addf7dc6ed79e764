"""`StoreTests`: the store contract (`rag.stores.chunk_store.ChunkStore`) as a test suite to subclass.

Like Haystack's `DocumentStoreBaseTests`: implement `make_store()` (a new, empty store of your
backend, as `rag.stores.registry.chunks_of(...)` returns it) and pytest runs the checks: add and
count, get by ids, get by metadata with every operator of the portable filter dialect
(`rag.base.filters`), filtered search returning `k` matching chunks whenever `k` match, delete,
update metadata, upsert, and ids that come back as they were written (32-hex ids on a UUID-id
engine included); and that the store has the core and the shared operations, and exactly the
optional ones it declares (`rag.stores.chunk_store.Capability`). Every backend of `rag.stores` runs it (tests/unit/stores/test_store_contract.py):

```python
from rag.stores.registry import chunks_of
from rag.testing.store_conformance import StoreTests

class TestMyBackend(StoreTests):
    def make_store(self):
        return chunks_of(MyVectorStore(embedding=...))
```

The corpus (`store_corpus`) has `DIMENSION`-d vectors of its own (no embedding model is called),
string, integer, float and boolean fields, and chunks missing a field.

Example:
    >>> docs, vectors = store_corpus()
    >>> len(docs), len(vectors[0]), sorted(docs[0].metadata)
    (24, 8, ['flag', 'n', 'topic', 'weight', 'year'])
"""

from __future__ import annotations

import asyncio
import math
import uuid
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import pytest
from langchain_core.documents import Document

from rag.base.errors import ConfigError, FilterError
from rag.base.filters import matches
from rag.stores.chunk_store import CORE, OPTIONAL, SHARED, Capability, ChunkStore

__all__ = ["DIMENSION", "STORE_FILTERS", "StoreTests", "store_corpus"]

DIMENSION = 8
_TOPICS = ("install", "billing", "security")
#: one filter per operator of the dialect (and the nested forms); each selects some chunks and not all
STORE_FILTERS: tuple[dict[str, Any], ...] = (
    {"topic": "billing"},                                   # implicit $eq
    {"topic": {"$eq": "security"}},
    {"year": {"$ne": 2022}},
    {"year": {"$gt": 2022}},
    {"year": {"$gte": 2023}},
    {"n": {"$lt": 5}},
    {"n": {"$lte": 5}},
    {"weight": {"$gt": 0.5}},
    {"topic": {"$in": ["install", "security"]}},
    {"n": {"$nin": [0, 1, 2, 3]}},
    {"flag": True},
    {"$and": [{"year": {"$gt": 2021}}, {"topic": "install"}]},
    {"$or": [{"topic": "security"}, {"n": {"$lte": 1}}]},
    {"$not": {"topic": "install"}},
    {"topic": "billing", "year": {"$lt": 2024}},            # two fields: an implicit $and
    {"missing_field": "x"},                                 # matches nothing
)


def _id(i: int) -> str:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"rag-store-conformance/{i}").hex   # 32 hex, as chunk ids are


def _vector(i: int) -> list[float]:
    return [math.cos(0.7 * i + j) + (1.5 if j == i % DIMENSION else 0.0) for j in range(DIMENSION)]


def store_corpus(n: int = 24) -> tuple[list[Document], list[list[float]]]:
    """`n` chunks (32-hex ids) and their vectors; `year` is missing on every seventh chunk."""
    docs = []
    for i in range(n):
        metadata: dict[str, Any] = {"topic": _TOPICS[i % 3], "n": i, "weight": round(i / n, 3), "flag": i % 4 == 0}
        if i % 7 != 3:
            metadata["year"] = 2021 + i % 4
        docs.append(Document(id=_id(i), page_content=f"chunk {i} about {_TOPICS[i % 3]}", metadata=metadata))
    return docs, [_vector(i) for i in range(n)]


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


class StoreTests(ABC):
    """The store contract; subclass and implement `make_store` (see the module docstring)."""

    #: filters your backend documents it cannot express (they must raise `FilterError`, never be weakened)
    unsupported_filters: ClassVar[tuple[dict[str, Any], ...]] = ()

    @abstractmethod
    def make_store(self) -> Any:
        """A new, empty `ChunkStore` of the backend under test (for vectors of `DIMENSION` floats)."""

    @pytest.fixture
    def store(self) -> Any:
        return self.make_store()

    @pytest.fixture
    def filled(self, store: Any) -> tuple[Any, list[Document], list[list[float]]]:
        docs, vectors = store_corpus()
        store.add([d.id for d in docs], vectors, [d.page_content for d in docs], [d.metadata for d in docs])
        return store, docs, vectors

    # ------------------------------------------------------------------ the contract and the declared capabilities
    def test_the_store_keeps_the_contract_and_has_what_it_declares(self, store: Any) -> None:
        """The core (`CORE`) and the shared operations (`SHARED`) are there; each optional operation is there
        if and only if its capability is declared (`OPTIONAL`); a store declares no module capability."""
        assert isinstance(store, ChunkStore)
        assert isinstance(store.backend, str) and store.backend
        missing = [name for name in (*CORE, *SHARED) if not hasattr(store, name)]
        assert missing == [], f"{store.backend}: missing {missing}"
        assert store.capabilities <= set(OPTIONAL), store.capabilities   # (OWN_DIRECTORY is a module's)
        for capability, method in OPTIONAL.items():   # declared, then there; there, then declared
            if capability is not Capability.UPDATE_METADATA:   # (a shared operation: raises unless declared)
                assert (capability in store.capabilities) == callable(getattr(store, method, None)), capability

    def test_the_declared_operations_work(self, filled: Any) -> None:
        """What a store declares does what `Capability` says (an undeclared update is a `ConfigError`)."""
        store, docs, vectors = filled
        declared = store.capabilities
        if Capability.ASYNC_SEARCH in declared:
            hits = asyncio.run(store.asearch(vectors[4], k=3, filter={"topic": docs[4].metadata["topic"]}))
            assert [d.id for d, _ in hits] == [d.id for d, _ in store.search(
                vectors[4], k=3, filter={"topic": docs[4].metadata["topic"]})]
        if Capability.STORED_VECTORS in declared:
            got = store.get_vectors([docs[1].id, docs[6].id, _id(999)])
            assert set(got) == {docs[1].id, docs[6].id}
            assert _cosine([float(x) for x in got[docs[6].id]], vectors[6]) == pytest.approx(1.0, abs=1e-5)
        if Capability.UPDATE_METADATA not in declared:
            with pytest.raises(ConfigError):
                store.update_metadatas([docs[0].id], [{"topic": "moved"}])
            assert store.get_by_ids([docs[0].id])[0].metadata == docs[0].metadata

    # ------------------------------------------------------------------ writing and counting
    def test_an_empty_store_counts_zero_and_finds_nothing(self, store: Any) -> None:
        assert store.count() == 0
        assert store.search(_vector(0), k=3, filter=None) == []
        assert store.get_documents({"topic": "billing"}) == []

    def test_added_chunks_are_counted_and_read_back_by_id(self, filled: Any) -> None:
        store, docs, _ = filled
        assert store.count() == len(docs)
        wanted = [docs[2], docs[5], docs[11]]
        found = {d.id: d for d in store.get_by_ids([d.id for d in wanted] + [_id(999)])}
        assert set(found) == {d.id for d in wanted}   # an id never stored is absent
        for doc in wanted:
            assert found[doc.id].page_content == doc.page_content
            assert found[doc.id].metadata == doc.metadata

    # ------------------------------------------------------------------ reading by metadata
    def test_get_by_metadata_selects_what_the_python_matcher_selects(self, filled: Any) -> None:
        store, docs, _ = filled
        for flt in STORE_FILTERS:   # (one store for all of them: a new one per filter costs seconds on servers)
            if flt in self.unsupported_filters:
                with pytest.raises(FilterError):
                    store.get_documents(flt)
                continue
            expected = {d.id for d in docs if matches(d.metadata, flt)}
            assert {d.id for d in store.get_documents(flt)} == expected, flt
            assert set(store.get_ids(flt)) == expected, flt
            ids, metadatas = store.get_metadatas(flt)
            assert set(ids) == expected and all(matches(m, flt) for m in metadatas), flt

    def test_every_chunk_is_read_without_a_filter(self, filled: Any) -> None:
        store, docs, _ = filled
        assert {d.id: d.page_content for d in store.get_documents()} == {d.id: d.page_content for d in docs}

    # ------------------------------------------------------------------ search
    def test_search_ranks_by_cosine_similarity(self, filled: Any) -> None:
        store, docs, vectors = filled
        hits = store.search(vectors[7], k=5, filter=None)
        assert [d.id for d, _ in hits][0] == docs[7].id
        expected = sorted(range(len(docs)), key=lambda i: -_cosine(vectors[7], vectors[i]))[:5]
        assert [d.id for d, _ in hits] == [docs[i].id for i in expected]
        for (doc, score), i in zip(hits, expected, strict=True):
            assert score == pytest.approx(_cosine(vectors[7], vectors[i]), abs=1e-3)
            assert doc.metadata == docs[i].metadata and doc.page_content == docs[i].page_content

    def test_filtered_search_returns_k_matching_chunks_whenever_k_match(self, filled: Any) -> None:
        store, docs, vectors = filled
        for flt in STORE_FILTERS:
            if flt in self.unsupported_filters:
                with pytest.raises(FilterError):
                    store.search(vectors[0], k=3, filter=flt)
                continue
            matching = {d.id for d in docs if matches(d.metadata, flt)}
            hits = store.search(vectors[0], k=3, filter=flt)
            assert len(hits) == min(3, len(matching)), flt
            assert {d.id for d, _ in hits} <= matching, flt
            scores = [s for _, s in hits]
            assert scores == sorted(scores, reverse=True), flt

    def test_an_invalid_filter_is_a_filter_error(self, filled: Any) -> None:
        store, _, vectors = filled
        with pytest.raises(FilterError):
            store.search(vectors[0], k=3, filter={"n": {"$gtt": 1}})
        with pytest.raises(FilterError):
            store.get_documents({"$or": "n"})

    # ------------------------------------------------------------------ delete, update, upsert
    def test_deleted_chunks_are_gone_everywhere(self, filled: Any) -> None:
        store, docs, vectors = filled
        gone = [docs[1].id, docs[4].id, _id(999)]   # an id never stored is ignored
        store.delete(gone)
        assert store.count() == len(docs) - 2
        assert store.get_by_ids(gone) == []
        assert not {d.id for d in store.get_documents()} & set(gone)
        assert docs[1].id not in {d.id for d, _ in store.search(vectors[1], k=len(docs), filter=None)}

    def test_metadata_is_updated_in_place(self, filled: Any) -> None:
        store, docs, vectors = filled
        if Capability.UPDATE_METADATA not in store.capabilities:
            pytest.skip(f"{store.backend} does not update metadata in place (no update_metadata capability)")
        new = [{**docs[i].metadata, "topic": "moved", "n": 100 + i} for i in (2, 9)]
        store.update_metadatas([docs[2].id, docs[9].id], new)
        assert {d.id: d.metadata for d in store.get_by_ids([docs[2].id, docs[9].id])} == {
            docs[2].id: new[0], docs[9].id: new[1]}
        assert {d.id for d in store.get_documents({"topic": "moved"})} == {docs[2].id, docs[9].id}
        (top, _), = store.search(vectors[9], k=1, filter={"topic": "moved"})   # the vector is kept
        assert top.id == docs[9].id and top.page_content == docs[9].page_content
        assert store.count() == len(docs)

    def test_upsert_replaces_and_never_duplicates(self, filled: Any) -> None:
        store, docs, vectors = filled
        store.upsert([docs[3].id], [vectors[3]], ["replaced"], [{"topic": "new"}])
        store.upsert([docs[3].id], [vectors[3]], ["replaced"], [{"topic": "new"}])
        assert store.count() == len(docs)
        (doc,) = store.get_by_ids([docs[3].id])
        assert (doc.page_content, doc.metadata) == ("replaced", {"topic": "new"})

    # ------------------------------------------------------------------ ids
    def test_ids_come_back_as_they_were_written(self, filled: Any) -> None:
        store, docs, vectors = filled
        written = {d.id for d in docs}
        assert {d.id for d in store.get_documents()} == written
        assert {d.id for d, _ in store.search(vectors[0], k=len(docs), filter=None)} == written
        assert {d.id for d in store.get_by_ids(sorted(written))} == written
        assert set(store.get_ids({"n": {"$gte": 0}})) == written
