"""A pgvector knowledge base is named by its connection alone (real PostgreSQL): manifest, records and the writer
lock live in the database; processes started from different empty folders answer alike and see each other's writes."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import logging

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import StoreError
from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.records import RecordStore
from rag.stores.pgvector import open_store

EMB = DeterministicFakeEmbedding(size=384)
_tables = (f"named{i}" for i in itertools.count())
CITIES = [("it", "Rome is the capital of Italy."), ("fr", "Paris is the capital of France."),
          ("pt", "Lisbon is the capital of Portugal.")]


def _kb(pg_url, folder, table, **kwargs) -> KnowledgeBase:
    return KnowledgeBase("capitals", folder, embedding=EMB, store=open_store(pg_url, table, EMB, create=True), **kwargs)


def _docs(pairs) -> list[Document]:
    return [Document(page_content=text, metadata={"source": source}) for source, text in pairs]


def _context(kb: KnowledgeBase, question: str) -> list[tuple[str, str]]:
    return [(d.metadata["source"], d.page_content) for d in kb.as_resource().retrieve(question)]


def test_two_empty_folders_open_one_knowledge_base_and_see_each_others_writes(pg_url, tmp_path):
    table = next(_tables)
    first = _kb(pg_url, tmp_path / "a", table)
    first.add_documents(_docs(CITIES))
    second = KnowledgeBase.open("capitals", tmp_path / "b", embedding=EMB, store=open_store(pg_url, table, EMB))
    assert not (tmp_path / "b" / "kb").exists()    # nothing of it in the second folder
    assert [r.source for r in second.list_documents()] == [r.source for r in first.list_documents()]
    for question in ("capital of Italy", "Lisbon", "France"):
        assert _context(first, question) == _context(second, question)
    serving = first.as_resource().retriever
    second.add_documents(_docs([("es", "Madrid is the capital of Spain.")]))   # indexed through the other one
    assert serving.invoke("Madrid", k=1)[0].page_content == "Madrid is the capital of Spain."
    assert "es" in {r.source for r in first.list_documents()}
    second.delete_document("it")
    assert "Rome is the capital of Italy." not in [d.page_content for d in serving.invoke("Rome", k=4)]


def test_a_writer_in_another_folder_is_locked_out(pg_url, tmp_path):
    table = next(_tables)
    first = _kb(pg_url, tmp_path / "a", table)
    first.add_documents(_docs(CITIES[:1]))
    second = _kb(pg_url, tmp_path / "b", table)
    with first.lock, pytest.raises(StoreError, match="being written by another process"):
        second.add_documents(_docs(CITIES[1:2]))
    second.add_documents(_docs(CITIES[1:2]))   # once the first writer is done
    assert {r.source for r in first.list_documents()} == {"it", "fr"}


def test_rag_ask_from_an_empty_folder(pg_url, tmp_path, monkeypatch):
    from rag.cli import main

    table = next(_tables)
    monkeypatch.setenv("RAG_TEST_PG_URL", pg_url)
    backend = json.dumps({"kind": "pgvector", "url_env": "RAG_TEST_PG_URL", "table": table})
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "rome.md").write_text("Rome is the capital of Italy.\n")
    assert main(["index", str(corpus), "--store", str(tmp_path / "a"), "--collection", "capitals",
                 "--embedding", "fake", "--backend", backend.replace("}", ', "create": true}')]) == 0

    def ask(folder: str) -> dict:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["ask", "What is the capital of Italy?", "--store", str(tmp_path / folder),
                         "--collection", "capitals", "--backend", backend, "--json"]) == 0
        return json.loads(out.getvalue())

    empty = ask("empty")
    assert [d["page_content"] for d in empty["context"]] == [d["page_content"] for d in ask("a")["context"]]
    assert "Rome is the capital of Italy." in empty["context"][0]["page_content"]


def test_a_knowledge_base_indexed_before_moves_its_records_into_the_server_once(pg_url, tmp_path, caplog):
    table = next(_tables)
    kb = _kb(pg_url, tmp_path / "a", table)
    kb.add_documents(_docs(CITIES))
    sources = [r.source for r in kb.list_documents()]
    local = RecordStore(kb.home / "records.sqlite")   # as an earlier version left it: the records in the folder,
    local.put_many(kb.records.all().values())         # the manifest too (always copied there), none in the server
    local.close()
    kb.storage.tables.run([(f"DELETE FROM {kb.storage.tables.table('rag_records')}", [{}]),
                   (f"DELETE FROM {kb.storage.tables.table('rag_kb')}", [{}])])
    with caplog.at_level(logging.WARNING, logger="rag.indexing.kb_server"):
        again = _kb(pg_url, tmp_path / "a", table)
        assert [r.source for r in again.list_documents()] == sources
    assert "moved into PostgreSQL" in caplog.text
    other = KnowledgeBase.open("capitals", tmp_path / "b", embedding=EMB, store=open_store(pg_url, table, EMB))
    assert [r.source for r in other.list_documents()] == sources
