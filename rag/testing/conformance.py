"""`PortableRetrieverTests`: the contract of a retriever that takes `k` and a portable `filter` per call.

Like `langchain_tests`, a test class to subclass: implement `make_retriever(documents)` and pytest
runs the checks on your retriever (k honoured, a bad `k` rejected with a `ValueError` whatever it
is: 0, negative, a bool, a float, a string, above `MAX_K`; filters honoured exactly or rejected
with `FilterError`, bad filters rejected, sync / async parity, ids and metadata kept, scores in
`metadata["score"]`). A retriever built on `rag.base.portable.PortableRetriever` passes the `k`,
filter and score checks by construction. Needs pytest and Hypothesis (`pip install 'rag-runnables[dev]'`). Every retriever
this library exports runs it (tests/unit/test_conformance.py); run it on your own:

```python
from rag.testing.conformance import PortableRetrieverTests

class TestMyRetriever(PortableRetrieverTests):
    def make_retriever(self, documents):
        return MyRetriever.from_documents(documents)
```

Class flags say what a retriever promises: `supports_filters` (False: every filter must raise
`FilterError`, never be ignored), `returns_chunks` (False for retrievers that return merged
segments rather than the stored chunks, e.g. RSE), `exhaustive` (True: with `k` at least the
corpus size, the results are exactly the documents the filter matches).

Example:
    >>> sorted(CORPUS_TOPICS)
    ['billing', 'install', 'security']
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from rag.base.errors import FilterError
from rag.base.filters import matches
from rag.base.portable import MAX_K

__all__ = ["BAD_K", "CORPUS_TOPICS", "FILTERS", "PortableRetrieverTests", "conformance_corpus"]

CORPUS_TOPICS = ("install", "billing", "security")
QUERY = "report on install billing security"
#: Filters every conforming retriever applies exactly (portable dialect, nested forms included).
FILTERS: tuple[dict[str, Any], ...] = (
    {"topic": "billing"},
    {"year": {"$gte": 2023}},
    {"topic": {"$in": ["install", "security"]}, "year": {"$lt": 2024}},
    {"$or": [{"topic": "security"}, {"n": {"$lte": 1}}]},
    {"$not": {"topic": "install"}},
    {"topic": {"$ne": "billing"}, "n": {"$nin": [0, 5]}},
    {"$and": [{"year": {"$gt": 2021}}, {"year": {"$lte": 2023}}]},
)

#: Values of `k` every conforming retriever rejects with a `ValueError` (never read as "the default").
BAD_K = st.one_of(st.integers(max_value=0), st.integers(min_value=MAX_K + 1), st.booleans(), st.floats(),
                  st.text(max_size=3), st.lists(st.integers(1, 3), max_size=2))
# the retriever fixture is built once per test and only read, so sharing it across examples is safe;
# each subclass runs the inherited test on its own retriever (the "differing executors")
_FIXTURE_OK = [HealthCheck.function_scoped_fixture, HealthCheck.differing_executors]


def conformance_corpus() -> list[Document]:
    """Twelve chunks with ids and metadata (topic, year, n, source); every one matches `QUERY`'s words."""
    docs = []
    for n in range(12):
        topic = CORPUS_TOPICS[n % 3]
        year = 2021 + n % 4
        docs.append(Document(id=f"chunk-{n}", page_content=f"Report {n} on {topic}: the {topic} notes of {year}.",
                             metadata={"topic": topic, "year": year, "n": n, "source": f"{topic}.md",
                                       "doc_id": f"doc-{topic}", "chunk_index": n // 3}))
    return docs


class PortableRetrieverTests(ABC):
    """Subclass, implement `make_retriever`, and pytest checks the portable-retriever contract."""

    supports_filters: ClassVar[bool] = True
    returns_chunks: ClassVar[bool] = True
    exhaustive: ClassVar[bool] = True

    @abstractmethod
    def make_retriever(self, documents: list[Document]) -> BaseRetriever:
        """A retriever over `documents` (the conformance corpus)."""

    @pytest.fixture
    def corpus(self) -> list[Document]:
        return conformance_corpus()

    @pytest.fixture
    def retriever(self, corpus: list[Document]) -> BaseRetriever:
        return self.make_retriever(corpus)

    @pytest.mark.parametrize("k", [1, 3, 5])
    def test_k_is_honoured(self, retriever: BaseRetriever, k: int) -> None:
        docs = retriever.invoke(QUERY, k=k)
        assert 1 <= len(docs) <= k
        if self.returns_chunks:
            assert len(docs) == k

    @settings(max_examples=15, deadline=None, suppress_health_check=_FIXTURE_OK)
    @given(k=st.one_of(st.integers(1, 30), st.integers(30, MAX_K)))
    def test_any_positive_k_is_honoured(self, retriever: BaseRetriever, corpus: list[Document], k: int) -> None:
        docs = retriever.invoke(QUERY, k=k)
        assert 1 <= len(docs) <= min(k, len(corpus))
        if self.returns_chunks and self.exhaustive:
            assert len(docs) == min(k, len(corpus))

    @settings(max_examples=40, deadline=None, suppress_health_check=_FIXTURE_OK)
    @given(k=BAD_K)
    def test_a_bad_k_is_rejected_on_both_paths(self, retriever: BaseRetriever, k: Any) -> None:
        with pytest.raises(ValueError, match="k"):
            retriever.invoke(QUERY, k=k)
        with pytest.raises(ValueError, match="k"):
            asyncio.run(retriever.ainvoke(QUERY, k=k))

    def test_k_zero_is_an_error_not_the_default(self, retriever: BaseRetriever) -> None:
        with pytest.raises(ValueError, match="positive integer"):
            retriever.invoke(QUERY, k=0)

    def test_an_unknown_search_setting_is_rejected(self, retriever: BaseRetriever) -> None:
        with pytest.raises(ValueError, match="kk"):
            retriever.invoke(QUERY, kk=3)

    def test_no_k_means_the_default(self, retriever: BaseRetriever) -> None:
        assert retriever.invoke(QUERY, k=None) == retriever.invoke(QUERY) != []

    def test_scores_are_numbers_in_metadata(self, retriever: BaseRetriever) -> None:
        docs = retriever.invoke(QUERY, k=5)
        assert docs and all(isinstance(d.metadata.get("score"), float) for d in docs), \
            [d.metadata.get("score") for d in docs]

    @pytest.mark.parametrize("flt", FILTERS, ids=[str(i) for i in range(len(FILTERS))])
    def test_filter_is_honoured_or_rejected(self, retriever: BaseRetriever, corpus: list[Document],
                                            flt: dict[str, Any]) -> None:
        if not self.supports_filters:
            with pytest.raises(FilterError):
                retriever.invoke(QUERY, k=len(corpus), filter=flt)
            return
        docs = retriever.invoke(QUERY, k=len(corpus), filter=flt)
        expected = {d.id for d in corpus if matches(d.metadata, flt)}
        assert docs, f"no result although {len(expected)} chunks match {flt}"
        assert all(matches(d.metadata, flt) for d in docs), f"a result does not match {flt}"
        if self.exhaustive and self.returns_chunks:
            assert {d.id for d in docs} == expected

    def test_invalid_filter_is_rejected_with_a_filter_error(self, retriever: BaseRetriever) -> None:
        with pytest.raises(FilterError):
            retriever.invoke(QUERY, k=3, filter={"year": {"$gtt": 2022}})

    def test_async_matches_sync(self, retriever: BaseRetriever) -> None:
        sync = retriever.invoke(QUERY, k=4, filter={"topic": {"$ne": "billing"}} if self.supports_filters else None)
        async_ = asyncio.run(retriever.ainvoke(QUERY, k=4, filter={"topic": {"$ne": "billing"}}
                                               if self.supports_filters else None))
        assert [(d.id, d.page_content) for d in async_] == [(d.id, d.page_content) for d in sync]

    def test_ids_and_metadata_are_kept(self, retriever: BaseRetriever, corpus: list[Document]) -> None:
        if not self.returns_chunks:
            pytest.skip("this retriever returns merged segments, not the stored chunks")
        by_id = {d.id: d for d in corpus}
        docs = retriever.invoke(QUERY, k=len(corpus))
        assert docs and all(d.id in by_id for d in docs), "a result lost its id"
        for doc in docs:
            original = by_id[doc.id]
            assert doc.page_content.endswith(original.page_content)
            assert {k: doc.metadata.get(k) for k in original.metadata} == original.metadata
