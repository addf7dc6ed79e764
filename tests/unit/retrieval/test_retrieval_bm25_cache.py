"""A persistent knowledge base's in-process BM25 index is saved once per state and loaded by later searches.

A knowledge base on the embedded default searches its engine's index (SQLite FTS5:
test_retrieval_engine_lexical.py) with the default BM25 settings; other settings, and the backends
without an engine index, get this in-process index: these tests ask for ``metadata_fields=["title"]``.
"""

from __future__ import annotations

import json
import logging

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.compose.knowledge_base import KnowledgeBase
from rag.retrieval.bm25_cache import BM25_POINTER, knowledge_base_bm25, records_fingerprint

SETTINGS = {"metadata_fields": ["title"]}   # not the engine index's settings: the in-process index


def _kb(directory) -> KnowledgeBase:
    return KnowledgeBase("notes", directory, embedding=DeterministicFakeEmbedding(size=16))


def _doc(text: str, source: str) -> Document:
    return Document(page_content=text, metadata={"source": source})


def _bm25_texts(kb: KnowledgeBase, question: str) -> list[str]:
    retriever = kb.as_resource(search="bm25", hybrid={"bm25_settings": SETTINGS}).retriever
    return [d.page_content for d in retriever.invoke(question, k=3)]


def test_the_index_is_saved_then_loaded_while_the_knowledge_base_is_unchanged(tmp_path):
    kb = _kb(tmp_path)
    kb.add_documents([_doc("Rome is in Italy.", "it"), _doc("Paris is in France.", "fr")])
    first = _bm25_texts(kb, "Rome")
    pointer = json.loads((kb.home / BM25_POINTER).read_text())
    assert pointer["fingerprint"] == records_fingerprint(kb, SETTINGS)
    saved = kb.home / pointer["directory"]
    mtime = (saved / "index.json").stat().st_mtime_ns
    again = _kb(tmp_path)                                     # another process would open it the same way
    assert _bm25_texts(again, "Rome") == first == ["Rome is in Italy."]
    assert (saved / "index.json").stat().st_mtime_ns == mtime    # loaded, not written again
    assert knowledge_base_bm25(again, SETTINGS)._token_lists is None   # read from disk, not tokenised


def test_a_change_to_the_knowledge_base_builds_and_saves_a_new_index(tmp_path):
    kb = _kb(tmp_path)
    kb.add_documents([_doc("Rome is in Italy.", "it")])
    assert _bm25_texts(kb, "Lisbon") == []
    old = json.loads((kb.home / BM25_POINTER).read_text())["directory"]
    kb.add_documents([_doc("Lisbon is in Portugal.", "pt")])
    assert _bm25_texts(kb, "Lisbon") == ["Lisbon is in Portugal."]
    new = json.loads((kb.home / BM25_POINTER).read_text())["directory"]
    assert new != old and not (kb.home / old).exists()           # the replaced index is removed
    kb.delete_document("pt")
    assert _bm25_texts(kb, "Lisbon") == []


@pytest.mark.parametrize("damage", ["garbage", "missing", "pointer"])
def test_a_damaged_saved_index_is_built_again(tmp_path, caplog, damage):
    kb = _kb(tmp_path)
    kb.add_documents([_doc("Rome is in Italy.", "it")])
    _bm25_texts(kb, "Rome")
    saved = kb.home / json.loads((kb.home / BM25_POINTER).read_text())["directory"]
    if damage == "garbage":
        (saved / "index.json").write_bytes(b"\xff\xfe not json")
    elif damage == "missing":
        (saved / "arrays.npz").unlink()
    else:
        (kb.home / BM25_POINTER).write_text('{"fingerprint": 3, "directory": ["x"]}')
    with caplog.at_level(logging.WARNING, logger="rag.retrieval.bm25_cache"):
        assert _bm25_texts(_kb(tmp_path), "Rome") == ["Rome is in Italy."]
    if damage != "pointer":   # a pointer to another state is simply out of date
        assert "cannot be read" in caplog.text


def test_chunks_written_while_the_index_is_built_are_not_saved_as_current(tmp_path):
    kb = _kb(tmp_path)
    kb.add_documents([_doc("Rome is in Italy.", "it")])
    read = kb.get_documents

    def read_while_a_writer_adds(*args, **kwargs):
        docs = read(*args, **kwargs)
        kb.add_documents([_doc("Lisbon is in Portugal.", "pt")])   # lands after the chunks were read
        return docs

    kb.get_documents = read_while_a_writer_adds
    assert len(knowledge_base_bm25(kb, SETTINGS)) == 1
    assert not (kb.home / BM25_POINTER).exists()                  # that index is not the current state
    kb.get_documents = read
    assert len(knowledge_base_bm25(kb, SETTINGS)) == 2


def test_a_knowledge_base_that_cannot_be_written_is_searched_and_left_as_it_was(tmp_path, monkeypatch):
    kb = _kb(tmp_path)
    kb.add_documents([_doc("Rome is in Italy.", "it")])
    before = sorted(p.name for p in kb.home.iterdir())

    def refuse(*args, **kwargs):
        raise PermissionError("read-only file system")

    monkeypatch.setattr("rag.retrieval.bm25_cache.os.replace", refuse)
    assert len(knowledge_base_bm25(kb, SETTINGS)) == 1
    assert sorted(p.name for p in kb.home.iterdir()) == before


def test_settings_are_part_of_the_state(tmp_path):
    kb = _kb(tmp_path)
    kb.add_documents([_doc("Rome is in Italy.", "it")])
    assert records_fingerprint(kb, SETTINGS) != records_fingerprint(kb, {"metadata_fields": []})
    assert knowledge_base_bm25(kb, {"metadata_fields": [], "stem": False}).stem is False
