"""A knowledge base whose chunks live on a server: records kept locally must not claim chunks the server lost."""

from __future__ import annotations

import logging

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.compose.knowledge_base import KnowledgeBase
from rag.stores.chroma import open_client

DOCS = [Document(page_content=f"Note {i} about {topic}.", metadata={"source": f"n{i}"})
        for i, topic in enumerate(["Rome", "Paris", "Lisbon"])]


def _kb(records, server) -> KnowledgeBase:
    # a persistent client on another directory stands in for a Chroma server: the chunks live apart from the records
    return KnowledgeBase("notes", records, embedding=DeterministicFakeEmbedding(size=16), client=open_client(server))


def test_an_empty_collection_on_another_server_is_indexed_again(tmp_path, caplog):
    first = _kb(tmp_path / "records", tmp_path / "server-a")
    assert len(first.add_documents(DOCS).added) == 3
    assert len(first.add_documents(DOCS).unchanged) == 3            # same server: nothing to do
    other = _kb(tmp_path / "records", tmp_path / "server-b")          # the records, but a server without the chunks
    with caplog.at_level(logging.WARNING, logger="rag.indexing.sync"):
        report = other.add_documents(DOCS)
    assert len(report.updated) == 3 and other.count() == 3   # (issue 37: indexed again, and noted)
    assert "lacks chunks of 3 of the 3 document(s)" in caplog.text and len(report.notes) == 3
    assert [d.page_content for d in other.as_resource(search="bm25").retriever.invoke("Lisbon", k=1)] == \
        ["Note 2 about Lisbon."]


def test_an_embedded_knowledge_base_is_not_checked_against_its_collection(tmp_path):
    kb = KnowledgeBase("notes", tmp_path, embedding=DeterministicFakeEmbedding(size=16))
    kb.add_documents(DOCS)
    assert kb.remote_store is False
    assert len(kb.add_documents(DOCS).unchanged) == 3
