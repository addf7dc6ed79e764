"""A LanceDB knowledge base's lexical index in its own table (real LanceDB): rag's tokens in a column written with
each row, LanceDB's full-text index ranking them by Okapi BM25, the filter inside the query, rows written after the
index searched at once and indexed in batches, and a table made elsewhere served by an FTS5 index beside the records."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

import rag.stores.lance_lexical as lance_lexical
from rag.compose.knowledge_base import KnowledgeBase
from rag.stores.fts_index import FTSIndex
from rag.stores.lance_lexical import LanceLexical
from rag.stores.lancedb import TOKENS, LanceStore, open_store
from tests.unit.retrieval.test_retrieval_filter_isolation import filters
from tests.unit.stores.lexical_checks import (assert_filter_inside_the_query, assert_scores_are_okapi_bm25,
                                              assert_the_engine_index_is_searched, okapi_bm25)

EMB = DeterministicFakeEmbedding(size=16)
_names = (f"llex{i}" for i in itertools.count())
TENANTS, PAGES = ["acme", "globex"], [0, 1, 2]
WORDS = "revenue costs growth risk margin cash debt income".split()


def _docs(start: int = 0, n: int = 24) -> list[Document]:
    return [Document(page_content=" ".join(WORDS[(i * j) % len(WORDS)] for j in range(1 + i % 7)),
                     metadata={"source": f"s{i}", "tenant": TENANTS[i % 2], "page": PAGES[i % 3],
                               "section": ["Revenue", "Risk"][i % 2]})
            for i in range(start, start + n)]


def _kb(directory, uri, store=None) -> KnowledgeBase:
    store = store or open_store(next(_names), EMB, uri=uri, create=True)
    return KnowledgeBase("lkb", directory, embedding=EMB, store=store)


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    kb = _kb(tmp_path_factory.mktemp("lkb"), tmp_path_factory.mktemp("lance"))
    kb.add_documents(_docs())
    return kb



def test_the_index_is_the_tables_full_text_index_written_with_the_chunks(kb):
    lexical = assert_the_engine_index_is_searched(kb, LanceLexical, 24)
    assert sorted(lexical.ids()) == sorted(d.id for d in kb.get_documents())


def test_scores_are_okapi_bm25_over_the_table(kb):
    """k1 = 1.2, b = 0.75, idf ln(1 + (N - n + 0.5) / (n + 0.5)) and the mean length over the indexed rows."""
    kb.storage.chunks.lexical.refresh(force=True)
    assert_scores_are_okapi_bm25(kb.storage.chunks.lexical, kb.get_documents(),
                                 ["revenue", "cash debt", "risk margin income"], rel=1e-4)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flt=filters, question=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join))
def test_the_filter_runs_inside_the_query(kb, flt, question):
    assert_filter_inside_the_query(kb.storage.chunks.lexical, kb, question, flt)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=st.text(max_size=80))
def test_any_question_is_searched_as_words_never_as_query_syntax(kb, question):
    """Quotes, AND/OR/NOT, field:value, +/-, brackets, escape codes: only the question's tokens are looked up."""
    lexical = kb.storage.chunks.lexical
    terms = set(lexical.tokens(question))
    for doc, _ in lexical.search(question, k=10):
        assert terms & set(lexical.tokens(doc.page_content, doc.metadata))


def test_new_rows_are_found_at_once_and_indexed_in_batches(tmp_path, monkeypatch):
    monkeypatch.setattr(lance_lexical, "STALE_ROWS", 5)
    monkeypatch.setattr(lance_lexical, "STALE_SHARE", 0.0)
    kb = _kb(tmp_path / "kb", tmp_path / "lance")
    kb.add_documents(_docs(0, 12))
    lexical = kb.storage.chunks.lexical
    table = lexical.store.table()
    assert table.index_stats(f"{TOKENS}_idx").num_unindexed_rows == 0   # made by the first write
    kb.add_documents([Document(page_content="a note on dividends", metadata={"source": "new"})])
    assert table.index_stats(f"{TOKENS}_idx").num_unindexed_rows == 1   # under STALE_ROWS: not indexed yet ...
    assert [d.metadata["source"] for d, _ in lexical.search("dividends", k=3)] == ["new"]   # ... but found
    kb.add_documents(_docs(12, 6))
    assert table.index_stats(f"{TOKENS}_idx").num_unindexed_rows == 0   # past it: the index was updated
    expected = okapi_bm25(lexical, kb.get_documents(), "cash")
    assert {d.id: s for d, s in lexical.search("cash", k=50)} == pytest.approx(expected, rel=1e-4)
    kb.delete_document("new")
    assert lexical.search("dividends", k=3) == [] and lexical.count() == kb.count() == 18


def test_a_changed_title_moves_the_tokens_without_a_new_embedding(kb):
    chunks = kb.storage.chunks
    doc = kb.get_documents()[0]
    before = chunks.inner.store.search_by_vector([1.0] * 16, k=24)
    chunks.update_metadatas([doc.id], [{**doc.metadata, "section": "Dividends"}])
    assert [d.id for d, _ in chunks.lexical.search("dividends", k=3)] == [doc.id]
    chunks.update_metadatas([doc.id], [doc.metadata])
    assert chunks.lexical.search("dividends", k=3) == []
    assert chunks.inner.store.search_by_vector([1.0] * 16, k=24) == before   # the vectors were not touched


def test_mentions_counts_chunks_per_document(kb):
    counts = kb.storage.chunks.lexical.mentions("cash")
    expected = Counter(d.metadata["doc_id"] for d in kb.get_documents() if "cash" in d.page_content)
    assert counts == expected and sum(counts.values()) > 0


def test_a_table_made_elsewhere_gets_fts5_beside_the_records(tmp_path):
    theirs = LanceStore(EMB, uri=tmp_path / "lance", table="theirs")   # not rag's: no tokens column
    theirs.add_texts(["seed"], ids=["x" * 32])
    theirs.delete(["x" * 32])
    assert not theirs.lexical
    kb = _kb(tmp_path / "kb", tmp_path / "lance", open_store("theirs", EMB, uri=tmp_path / "lance"))
    kb.add_documents(_docs(0, 4))
    assert isinstance(kb.storage.chunks.lexical, FTSIndex) and kb.storage.chunks.lexical.count() == 4
