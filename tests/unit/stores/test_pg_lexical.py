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
    bm25 = BM25Index.from_documents(kb.get_documents(), metadata_fields=["title", "section"], k1=1.2)   # (FTS5's)
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


@pytest.fixture(scope="module")
def writes_kb(pg_url, tmp_path_factory):
    kb = _kb(pg_url, tmp_path_factory.mktemp("pgwrites"))
    kb.add_documents([Document(page_content="a seed note on margin", metadata={"source": "seed"})])
    return kb


def _statistics_disagree(lexical) -> list:
    """What the triggers keep and a count from the rows disagree on: [] when every df, n and total agree."""
    kept = lexical._run(f"SELECT n, total FROM {lexical._t('stats')}")[0]
    counted = lexical._run(f"SELECT count(*) AS n, coalesce(sum(rag_length), 0) AS total FROM {lexical.table} "
                           "WHERE rag_tokens IS NOT NULL")[0]
    wrong = lexical._run(f"SELECT t.term, t.df, c.n FROM {lexical._t('terms')} t FULL JOIN (SELECT lexeme, count(*) AS n "
                         f"FROM {lexical.table}, unnest(rag_tokens) GROUP BY lexeme) c ON c.lexeme = t.term "
                         "WHERE c.n IS DISTINCT FROM NULLIF(t.df, 0)")
    return [*([("n/total", dict(kept), dict(counted))] if (kept["n"], kept["total"]) != (counted["n"], counted["total"])
              else []), *map(dict, wrong)]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(st.sampled_from(["add", "retitle", "delete"]), st.integers(0, 5)), min_size=1,
                      max_size=6))
def test_the_kept_statistics_equal_a_count_from_the_rows_after_any_writes(writes_kb, steps):
    """The per-statement triggers (a batch's terms in one grouped upsert) keep df, n and total exact through adds,
    re-adds of changed text, title changes (metadata only: tokens follow the title) and deletes."""
    kb = writes_kb
    for source in {d.metadata["source"] for d in kb.get_documents()} - {"seed"}:   # (one table for every example)
        kb.delete_document(source)
    for op, i in steps:
        if op == "add":
            kb.add_documents([Document(page_content=f"{WORDS[i]} and {WORDS[(i + len(steps)) % 8]} note {i}",
                                       metadata={"source": f"s{i}", "title": f"Report {i}"})])
        elif op == "retitle" and kb.get_documents({"source": f"s{i}"}):
            chunks = kb.storage.chunks
            found = kb.get_documents({"source": f"s{i}"})
            chunks.update_metadatas([d.id for d in found], [{**d.metadata, "title": "Dividends"} for d in found])
        elif op == "delete" and kb.get_documents({"source": f"s{i}"}):
            kb.delete_document(f"s{i}")
        assert _statistics_disagree(kb.storage.chunks.lexical) == [], (op, i)


def test_a_table_with_the_per_row_trigger_of_earlier_versions_gets_the_statement_triggers(pg_url, tmp_path):
    table = next(_tables)
    kb = _kb(pg_url, tmp_path, table)
    kb.add_documents([Document(page_content="Report a revenue.", metadata={"source": "a"})])
    lexical = kb.storage.chunks.lexical
    earlier = [*(f'DROP TRIGGER "{table}_rag_{n}" ON "public"."{table}"' for n in ("ins", "upd", "del")),
               "CREATE OR REPLACE FUNCTION public.rag_noop() RETURNS trigger LANGUAGE plpgsql AS "
               "$b$ BEGIN RETURN NULL; END $b$",
               f'CREATE TRIGGER "{table}_rag_count" AFTER INSERT OR DELETE OR UPDATE OF rag_tokens ON "public"."{table}" '
               "FOR EACH ROW EXECUTE FUNCTION public.rag_noop()"]
    for sql in earlier:   # what a table indexed by an earlier version has (its trigger's body does not matter here)
        lexical._write(sql, [{}])
    reopened = _kb(pg_url, tmp_path, table)
    reopened.add_documents([Document(page_content="Report b revenue and costs.", metadata={"source": "b"})])
    names = {r["tgname"] for r in lexical._run("SELECT tgname FROM pg_trigger WHERE tgrelid = CAST(:t AS regclass)",
                                               {"t": lexical.table})}
    assert {f"{table}_rag_{n}" for n in ("ins", "upd", "del")} <= names and f"{table}_rag_count" not in names
    assert _statistics_disagree(reopened.storage.chunks.lexical) == []


@pytest.fixture(scope="module")
def common_kb(pg_url, tmp_path_factory):
    """Chunks that all hold "report" and most hold "annual" (terms in more than half the rows), and rarer words."""
    rng = __import__("random").Random(4)
    rare = [f"w{i}" for i in range(30)]
    docs = [Document(page_content=" ".join(["report"] * rng.randint(1, 3) + (["annual"] if i % 5 else [])
                                           + rng.sample(rare, rng.randint(0, 4))),
                     metadata={"source": f"c{i}", "tenant": TENANTS[i % 2], "page": PAGES[i % 3]})
            for i in range(120)]
    kb = _kb(pg_url, tmp_path_factory.mktemp("common"))
    kb.add_documents(docs)
    return kb


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.sampled_from(["report", "annual", *(f"w{i}" for i in range(32))]), min_size=1, max_size=5),
       k=st.integers(1, 30), flt=st.sampled_from([None, {"tenant": "acme"}, {"page": {"$gt": 0}}]))
def test_skipping_the_rows_of_only_common_terms_changes_nothing(common_kb, words, k, flt):
    """The search over the rows holding a rare term (kept when its k-th score beats what the common terms can add)
    returns exactly what scoring every row holding any term returns: the same chunks, order and scores."""
    lexical = common_kb.storage.chunks.lexical
    question = " ".join(words)
    pruned = [(d.id, round(s, 9)) for d, s in lexical.search(question, k=k, filter=flt)]
    original = lexical._rare_terms
    lexical._rare_terms = lambda terms: ([], 0.0)
    try:
        full = [(d.id, round(s, 9)) for d, s in lexical.search(question, k=k, filter=flt)]
    finally:
        lexical._rare_terms = original
    assert pruned == full


def test_a_question_with_a_term_in_every_row_skips_those_rows(common_kb):
    lexical = common_kb.storage.chunks.lexical
    rare, bound = lexical._rare_terms(["report", "annual", "w3"])
    assert rare == ["w3"] and 0 < bound < 2.2 * 0.7   # ("report" in every row: idf ~0; "annual" in 80%)
    assert lexical._rare_terms(["report", "annual"]) == ([], 0.0)   # (no rare term: every row is scored)
