"""A Milvus knowledge base's lexical index in its own collection (real engine: Milvus Lite): rag's tokens in a field
analysed by Milvus and written in the same insert as the vector, Milvus' BM25 function and index ranking them by
Okapi BM25, the filter inside the search, and a collection made elsewhere, or by an engine that refuses BM25, served
by an FTS5 index beside the records."""

from __future__ import annotations

import itertools
import logging
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

import rag.stores.milvus_schema as milvus_schema
from rag.compose.knowledge_base import KnowledgeBase
from rag.stores.fts_index import FTSIndex
from rag.stores.milvus import MilvusChunks, open_store
from rag.stores.milvus_lexical import MilvusLexical
from rag.stores.milvus_schema import PLAIN_MAX, SPARSE, TOKENS, has_lexical_field, row_tokens, term
from tests.unit.retrieval.test_retrieval_filter_isolation import filters
from tests.unit.stores.lexical_checks import (assert_filter_inside_the_query, assert_scores_are_okapi_bm25,
                                              assert_the_engine_index_is_searched)

EMB = DeterministicFakeEmbedding(size=16)
_names = (f"mlex{i}" for i in itertools.count())
TENANTS, PAGES = ["acme", "globex"], [0, 1, 2]
WORDS = "revenue costs growth risk margin cash debt income".split()


def _docs(start: int = 0, n: int = 24) -> list[Document]:
    return [Document(page_content=" ".join(WORDS[(i * j) % len(WORDS)] for j in range(1 + i % 7)),
                     metadata={"source": f"s{i}", "tenant": TENANTS[i % 2], "page": PAGES[i % 3],
                               "section": ["Revenue", "Risk"][i % 2]})
            for i in range(start, start + n)]


def _store(tmp, name=None):
    return open_store(name or next(_names), EMB, uri=str(tmp / "milvus.db"), create=True)


def _kb(directory, store) -> KnowledgeBase:
    return KnowledgeBase("mkb", directory, embedding=EMB, store=store)


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    kb = _kb(tmp_path_factory.mktemp("mkb"), _store(tmp_path_factory.mktemp("milvus")))
    kb.add_documents(_docs())
    return kb


def test_the_index_is_milvus_bm25_written_with_the_chunks(kb):
    lexical = assert_the_engine_index_is_searched(kb, MilvusLexical, 24)
    assert sorted(lexical.ids()) == sorted(d.id for d in kb.get_documents())
    store = kb.storage.chunks.inner.store
    assert has_lexical_field(store)
    assert store.client.describe_index(store.collection_name, index_name=SPARSE)["params"] == {
        "bm25_k1": 1.2, "bm25_b": 0.75}   # (rag.stores.in_store_lexical.K1 / B)
    rows = store.client.query(store.collection_name, filter="", limit=100, output_fields=["text", "metadata", TOKENS])
    assert len(rows) == 24 and all(r[TOKENS] == row_tokens(r["text"], r["metadata"]) for r in rows)


def test_scores_are_okapi_bm25_over_the_collection(kb):
    """k1 = 1.2, b = 0.75, idf ln(1 + (N - n + 0.5) / (n + 0.5)) and the mean length, over rag's tokens."""
    assert_scores_are_okapi_bm25(kb.storage.chunks.lexical, kb.get_documents(),
                                 ["revenue", "cash debt", "risk margin income", "revenue revenue"], rel=1e-5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flt=filters, question=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join))
def test_the_filter_runs_inside_the_search(kb, flt, question):
    assert_filter_inside_the_query(kb.storage.chunks.lexical, kb, question, flt)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=st.text(max_size=80))
def test_any_question_is_searched_as_words_never_as_an_expression(kb, question):
    """Quotes, operators, field names, brackets, control characters: only the question's tokens are looked up."""
    lexical = kb.storage.chunks.lexical
    terms = set(lexical.tokens(question))
    for doc, _ in lexical.search(question, k=10):
        assert terms & set(lexical.tokens(doc.page_content, doc.metadata))


@settings(max_examples=60, deadline=None)
@given(token=st.text(min_size=1, max_size=60))
def test_every_token_is_one_term_that_milvus_analyzer_keeps_whole(token):
    """A term is lower-case ASCII letters and digits, at most 32 of them (what any Milvus analyzer keeps as one
    word); a plain token stays itself, any other becomes 32 characters, so the two never meet."""
    written = term(token)
    assert written.isascii() and written.isalnum() and written == written.lower() and len(written) <= 32
    plain = token.isascii() and token.isalnum() and token == token.lower() and len(token) <= PLAIN_MAX
    assert (written == token) if plain else len(written) == 32


def test_tokens_the_analyzer_would_split_are_found_whole(tmp_path):
    """'1,234.5', accented and long words are rag's tokens: found by themselves, not by their pieces."""
    chunks = MilvusChunks(_store(tmp_path))
    texts = ["sales of 1,234.5 units", "sales of 1 unit and 234 more", "café résumé", "a supercalifragilistic" * 3]
    ids = [f"{i:032x}" for i in range(4)]
    chunks.add(ids, [[1.0] + [0.0] * 15] * 4, texts, [{"doc_id": f"d{i}"} for i in range(4)])
    lexical = MilvusLexical(chunks)
    assert [d.page_content for d, _ in lexical.search("1,234.5")] == [texts[0]]
    assert [d.page_content for d, _ in lexical.search("résumé")] == [texts[2]]
    assert [d.page_content for d, _ in lexical.search("cafe")] == []   # (rag keeps accents: as FTS5 does)
    assert [d.page_content for d, _ in lexical.search("supercalifragilisticasupercalifragilistic")] == []
    docs = chunks.get_by_ids(ids)
    assert_scores_are_okapi_bm25(lexical, docs, ["sales 1,234.5", "unit", "résumé café"], rel=1e-5)


def test_a_chunk_of_more_tokens_than_a_field_holds_keeps_the_first(tmp_path):
    chunks = MilvusChunks(_store(tmp_path))
    text = " ".join(f"é{i}" for i in range(9000))   # 9,000 hashed terms: 297,000 bytes of tokens
    chunks.add(["a" * 32], [[1.0] + [0.0] * 15], [text], [{"doc_id": "d"}])
    written = row_tokens(text)
    assert len(written) <= 65_535 and written.count(" ") + 1 == 65_536 // 33
    lexical = MilvusLexical(chunks)
    assert len(lexical.search("é0")) == 1 and lexical.search("é8999") == []


def test_a_changed_title_moves_the_tokens_without_a_new_embedding(kb):
    chunks = kb.storage.chunks
    doc = kb.get_documents()[0]
    before = chunks.inner.search([1.0] * 16, k=24, filter=None)
    chunks.update_metadatas([doc.id], [{**doc.metadata, "section": "Dividends"}])
    assert [d.id for d, _ in chunks.lexical.search("dividends", k=3)] == [doc.id]
    chunks.update_metadatas([doc.id], [doc.metadata])
    assert chunks.lexical.search("dividends", k=3) == []
    assert chunks.inner.search([1.0] * 16, k=24, filter=None) == before   # the vectors were not touched


def test_mentions_counts_chunks_per_document(kb):
    counts = kb.storage.chunks.lexical.mentions("cash")
    expected = Counter(d.metadata["doc_id"] for d in kb.get_documents() if "cash" in d.page_content)
    assert counts == expected and sum(counts.values()) > 0


def test_a_write_and_a_delete_are_searched_at_once(tmp_path):
    kb = _kb(tmp_path / "kb", _store(tmp_path))
    kb.add_documents(_docs(0, 6))
    kb.add_documents([Document(page_content="a note on dividends", metadata={"source": "new"})])
    retriever = kb.as_resource(search="bm25").retriever
    assert [d.metadata["source"] for d in retriever.invoke("dividends", k=3)] == ["new"]
    kb.delete_document("new")
    assert kb.storage.chunks.lexical.search("dividends", k=3) == [] and kb.storage.chunks.lexical.count() == 6


def test_a_collection_made_elsewhere_gets_fts5_beside_the_records(tmp_path):
    from langchain_milvus import Milvus

    theirs = Milvus(EMB, connection_args={"uri": str(tmp_path / "milvus.db")}, collection_name="theirs",
                    metadata_field="metadata", index_params={"metric_type": "COSINE", "index_type": "FLAT"},
                    auto_id=False, primary_field="pk")   # what rag before 2026-11-29 made, on the first write
    theirs.add_texts(["seed"], ids=["x" * 32])   # langchain-milvus' own collection: no tokens, no BM25
    theirs.delete(["x" * 32])
    assert not has_lexical_field(theirs)
    kb = _kb(tmp_path / "kb", open_store("theirs", EMB, uri=str(tmp_path / "milvus.db")))
    kb.add_documents(_docs(0, 4))
    assert isinstance(kb.storage.chunks.lexical, FTSIndex) and kb.storage.chunks.lexical.count() == 4


def test_an_engine_that_refuses_bm25_gets_the_collection_without_it(tmp_path, monkeypatch, caplog):
    """Milvus Lite has no 'whitespace' tokenizer: its real refusal stands for an engine without BM25."""
    monkeypatch.setattr(milvus_schema, "ANALYZER", {"tokenizer": "whitespace"})
    with caplog.at_level(logging.WARNING, logger="rag.stores.milvus_schema"):
        store = _store(tmp_path, "refused")
    assert "made without Milvus' BM25" in caplog.text and "unknown tokenizer type" in caplog.text
    assert not store.client.has_collection("refused")   # langchain-milvus makes it at the first write
    kb = _kb(tmp_path / "kb", store)
    kb.add_documents(_docs(0, 4))
    assert not has_lexical_field(store) and SPARSE not in store.fields
    assert isinstance(kb.storage.chunks.lexical, FTSIndex) and kb.storage.chunks.lexical.count() == 4
    assert kb.as_resource(search="bm25").retriever.invoke("revenue", k=5)


def test_langchain_writes_to_a_collection_rag_created_carry_their_tokens(tmp_path):
    """The store used as a plain LangChain vector store (add_texts, upsert) writes each row's tokens too."""
    store = _store(tmp_path)
    store.add_texts(["Paris is in France.", "Rome is in Italy."], metadatas=[{"title": "Capitals"}, {}],
                    ids=["a" * 32, "b" * 32])
    store.upsert(ids=["b" * 32], documents=[Document(page_content="Rome is in Lazio.", metadata={})])
    lexical = MilvusLexical(MilvusChunks(store))
    assert [d.id for d, _ in lexical.search("capitals")] == ["a" * 32]   # (the title is indexed with the text)
    assert [d.page_content for d, _ in lexical.search("lazio")] == ["Rome is in Lazio."]


def test_a_lite_writer_flushes_its_rows_into_a_segment_every_flush_rows(tmp_path, monkeypatch):
    """Lite scores unflushed rows by brute force at every search (5,000 made a search 292 ms, 11 ms flushed), so a
    process flushes once it has written `FLUSH_ROWS` rows; what it searches is the same before and after."""
    import rag.stores.milvus_lexical as milvus_lexical

    monkeypatch.setattr(milvus_lexical, "FLUSH_ROWS", 10)
    kb = _kb(tmp_path / "kb", _store(tmp_path))
    kb.add_documents(_docs(0, 6))
    lexical = kb.storage.chunks.lexical
    assert isinstance(lexical, MilvusLexical) and lexical.lite
    store, flushed = lexical.store, []
    real_flush = store.client.flush
    monkeypatch.setattr(store.client, "flush", lambda name, **kw: (flushed.append(name), real_flush(name, **kw)))
    before = [d.id for d, _ in lexical.search("revenue costs", k=50)]
    kb.add_documents(_docs(6, 3))                 # 9 rows since the last flush (6 + 3): not yet
    assert flushed == []
    kb.add_documents(_docs(9, 3))                 # 12: flushed once, at the end of the write
    assert flushed == [store.collection_name]
    kb.add_documents(_docs(12, 4))                # 4 since: not again
    assert flushed == [store.collection_name]
    after = [d.id for d, _ in lexical.search("revenue costs", k=50)]
    assert set(before) < set(after) and len(after) == len({d.id for d in kb.get_documents()
                                                             if {"revenue", "costs"} & set(d.page_content.split())})
