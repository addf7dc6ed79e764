"""A Qdrant knowledge base's lexical index in its own collection (real Qdrant, local mode): sparse BM25 vectors with
the engine's IDF, written with the chunks, the filter inside the query, a write cut short repaired at the next search,
and a collection made elsewhere (no sparse vector) served by an FTS5 index beside the records instead."""

from __future__ import annotations

import itertools
import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.compose.knowledge_base import KnowledgeBase
from rag.stores.fts_index import FTSIndex
from rag.stores.qdrant import open_store
from rag.stores.qdrant_lexical import AVG_TOKENS, VECTOR, QdrantLexical, term_id
from tests.unit.retrieval.test_retrieval_filter_isolation import filters
from tests.unit.stores.lexical_checks import (assert_filter_inside_the_query, assert_scores_are_okapi_bm25,
                                              assert_the_engine_index_is_searched)

EMB = DeterministicFakeEmbedding(size=16)
_names = (f"qlex{i}" for i in itertools.count())
TENANTS, PAGES = ["acme", "globex"], [0, 1, 2]
WORDS = "revenue costs growth risk margin cash debt income".split()


def _docs() -> list[Document]:
    return [Document(page_content=" ".join(WORDS[(i * j) % len(WORDS)] for j in range(1 + i % 7)),
                     metadata={"source": f"s{i}", "tenant": TENANTS[i % 2], "page": PAGES[i % 3],
                               "section": ["Revenue", "Risk"][i % 2]})
            for i in range(24)]


def _kb(directory, store=None) -> KnowledgeBase:
    store = store or open_store(next(_names), EMB, path=":memory:", create=True)
    return KnowledgeBase("qkb", directory, embedding=EMB, store=store)


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    kb = _kb(tmp_path_factory.mktemp("qkb"))
    kb.add_documents(_docs())
    return kb


def test_the_index_is_the_collections_sparse_vectors_written_with_the_chunks(kb):
    lexical = assert_the_engine_index_is_searched(kb, QdrantLexical, 24)
    assert sorted(lexical.ids()) == sorted(d.id for d in kb.get_documents())


def test_scores_are_okapi_bm25_with_the_engines_idf(kb):
    """k1 = 1.2, b = 0.75, the constant average length, idf ln(1 + (N - n + 0.5) / (n + 0.5)) over the collection."""
    assert_scores_are_okapi_bm25(kb.storage.chunks.lexical, kb.get_documents(),
                                 ["revenue", "cash debt", "risk margin income"], avg=AVG_TOKENS)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flt=filters, question=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join))
def test_the_filter_runs_inside_the_query(kb, flt, question):
    from rag.base.errors import FilterError

    try:
        assert_filter_inside_the_query(kb.storage.chunks.lexical, kb, question, flt)
    except FilterError as exc:   # what Qdrant cannot compare exactly (docs/stores.md)
        assert "qdrant" in str(exc)


def test_a_write_cut_short_is_repaired_at_the_next_search(tmp_path, caplog):
    kb = _kb(tmp_path)
    kb.add_documents(_docs()[:6])
    chunks = kb.storage.chunks
    lost = [chunks.stored_id(i) for i in chunks.lexical.ids()[:2]]
    chunks.store.client.delete_vectors(chunks.store.collection_name, vectors=[VECTOR], points=lost)
    assert chunks.lexical.count() == 4   # what a crash between the points and their sparse vectors leaves
    with caplog.at_level(logging.INFO, logger="rag.indexing.lexical_sync"):
        hits = kb.as_resource(search="bm25").retriever.invoke("revenue", k=20)
    assert chunks.lexical.count() == 6 and hits
    assert {d.metadata["source"] for d in hits} == {d.metadata["source"] for d in _docs()[:6]
                                                    if "revenue" in d.page_content.lower()
                                                    or d.metadata["section"] == "Revenue"}


def test_a_changed_title_moves_the_tokens_without_a_new_embedding(kb):
    lexical = kb.storage.chunks.lexical
    doc = kb.get_documents()[0]
    lexical.update_metadatas([doc.id], [{**doc.metadata, "section": "Dividends"}])
    assert [d.id for d, _ in lexical.search("dividends", k=3)] == [doc.id]
    lexical.update_metadatas([doc.id], [doc.metadata])
    assert lexical.search("dividends", k=3) == []


def test_a_collection_made_elsewhere_gets_fts5_beside_the_records(tmp_path):
    from langchain_qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient, models

    client = QdrantClient(location=":memory:")
    client.create_collection("theirs", vectors_config=models.VectorParams(size=16, distance=models.Distance.COSINE))
    kb = _kb(tmp_path, QdrantVectorStore(client=client, collection_name="theirs", embedding=EMB))
    kb.add_documents(_docs()[:4])
    assert isinstance(kb.storage.chunks.lexical, FTSIndex) and kb.storage.chunks.lexical.count() == 4


def test_term_ids_are_stable_across_processes():
    assert term_id("revenu") == int.from_bytes(__import__("hashlib").blake2b(b"revenu", digest_size=4).digest(), "big")
    assert term_id("revenu") != term_id("cost")
