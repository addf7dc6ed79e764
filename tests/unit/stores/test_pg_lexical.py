"""pgvector's lexical index in the chunks' own table (real PostgreSQL): BM25 as `BM25Index` scores it, the filter
inside the query, written with the chunks, seen by another process without a restart."""

from __future__ import annotations

import itertools
import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.filters import matches
from rag.compose.knowledge_base import KnowledgeBase
from rag.retrieval.lexical import BM25Index
from rag.stores.pg_lexical import PGLexical
from rag.stores.pgvector import _execute, _inner, open_store
from tests.unit.stores.lexical_checks import assert_filter_inside_the_query
from tests.unit.retrieval.test_retrieval_filter_isolation import filters

EMB = DeterministicFakeEmbedding(size=16)
_tables = (f"lex{i}" for i in itertools.count())
TENANTS, PAGES = ["acme", "globex"], [0, 1, 2]
WORDS = "revenue costs growth risk margin cash debt income".split()


def _kb(pg_url, directory, table: str | None = None) -> KnowledgeBase:
    store = open_store(pg_url, table or next(_tables), EMB, create=True)
    return KnowledgeBase("pgkb", directory, embedding=EMB, store=store)


def _docs() -> list[Document]:
    return [Document(page_content=" ".join(WORDS[(i * j) % len(WORDS)] for j in range(1 + i % 7)),
                     metadata={"source": f"s{i}", "tenant": TENANTS[i % 2], "page": PAGES[i % 3],
                               "section": ["Revenue", "Risk"][i % 2]})
            for i in range(24)]


@pytest.fixture(scope="module")
def kb(pg_url, tmp_path_factory):
    kb = _kb(pg_url, tmp_path_factory.mktemp("pgkb"))
    kb.add_documents(_docs())
    return kb


def test_scores_are_bm25_index_scores(kb):
    index = kb.as_resource(search="bm25").retriever.index
    assert isinstance(index, PGLexical)
    bm25 = BM25Index.from_documents(kb.get_documents(), metadata_fields=["title", "section"])
    for query in ["revenue growth", "cash debt income", "risk", "margins", "Revenue costs costs"]:
        ours = [(d.id, round(s, 4)) for d, s in index.search(query, k=10)]
        theirs = [(d.id, round(s, 4)) for d, s in bm25.search_documents(query, k=10)]
        assert sorted(ours, key=lambda x: (-x[1], x[0])) == sorted(theirs, key=lambda x: (-x[1], x[0])), query
        assert index.mentions(query) == bm25.mentions(query)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flt=filters, question=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join))
def test_the_filter_runs_inside_the_query(kb, flt, question):
    assert_filter_inside_the_query(kb.as_resource(search="bm25").retriever.index, kb, question, flt)


def test_a_write_through_one_process_is_served_by_another(pg_url, tmp_path):
    table = next(_tables)
    writer = _kb(pg_url, tmp_path, table)
    writer.add_documents([Document(page_content="Rome is in Italy.", metadata={"source": "it"})])
    reader = _kb(pg_url, tmp_path, table)   # another process on the same knowledge base
    retriever = reader.as_resource(search="hybrid").retriever
    writer.add_documents([Document(page_content="Lisbon is in Portugal.", metadata={"source": "pt"})])
    assert retriever.invoke("Lisbon", k=1)[0].page_content == "Lisbon is in Portugal."
    writer.delete_document("pt")
    assert "Lisbon is in Portugal." not in [d.page_content for d in retriever.invoke("Lisbon", k=3)]


def test_a_table_indexed_before_gets_its_tokens_once(pg_url, tmp_path, caplog):
    table = next(_tables)
    kb = _kb(pg_url, tmp_path, table)
    kb.add_documents([Document(page_content=f"Report {c} revenue.", metadata={"source": c}) for c in "abc"])
    lexical = kb.storage.chunks.lexical
    vs = _inner(kb.storage.chunks.store)
    kb.storage.chunks.store._engine._run_as_sync(_execute(vs, f'UPDATE "public"."{table}" SET rag_tokens = NULL', [{}]))
    assert lexical.count() == 0   # what a table written before this index looks like
    with caplog.at_level(logging.WARNING, logger="rag.indexing.lexical_sync"):
        retriever = _kb(pg_url, tmp_path, table).as_resource(search="bm25").retriever
    assert "moved into PostgreSQL full-text search" in caplog.text and "3 chunk(s) indexed once" in caplog.text
    assert lexical.count() == 3 and len(retriever.invoke("revenue", k=5)) == 3


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(data=st.data(), flt=filters, search=st.sampled_from(["hybrid", "bm25"]),
       question=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join))
def test_every_stage_over_the_postgresql_lexical_index_keeps_the_filter(kb, data, flt, search, question):
    """The tenant-isolation property (test_retrieval_filter_isolation.py) through the pipeline, on pgvector."""
    from rag import retrieve
    from tests.unit.retrieval.test_retrieval_filter_isolation import pipeline_settings

    chunks = kb.get_documents()
    options = data.draw(pipeline_settings(chunks))
    options.pop("router", None), options.pop("routing", None)
    result = retrieve(question, kb.as_resource(search=search), filter=flt, **options)
    for doc in result.context:
        indices = doc.metadata.get("chunk_indices") or [doc.metadata.get("chunk_index")]
        members = [c for c in chunks if c.metadata.get("doc_id") == doc.metadata.get("doc_id")
                   and c.metadata.get("chunk_index") in indices]
        assert members and all(matches(c.metadata, flt) for c in members), (flt, doc.metadata)
