"""A damaged Chroma collection is a StoreError that says what to do, and `rag index` repairs it.

Damage is written into the store's own database (what an interrupted write or a damaged segment
leaves: a missing segment, mangled queued vectors, mangled metadata); asking never dies with a raw
`chromadb` error, and indexing the folder again rebuilds the collection from the documents, the
embedding cache making it cheap (nothing embedded again).
"""

from __future__ import annotations

import sqlite3

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag import cli
from rag.base.errors import StoreError
from rag.compose.knowledge_base import KnowledgeBase

DAMAGE = {
    "missing segments": "DELETE FROM segments",
    "missing metadata segment": "DELETE FROM segments WHERE scope = 'METADATA'",
    "missing vector segment": "DELETE FROM segments WHERE scope = 'VECTOR'",
    "mangled queued vectors": "UPDATE embeddings_queue SET vector = x'00'",
    "mangled segment type": "UPDATE segments SET type = 'urn:chroma:segment/unknown'",
}


#: damage Chroma cannot even delete the collection through (it fails on the unknown segment type)
UNREPAIRABLE = {"mangled segment type"}


def _kb(store) -> KnowledgeBase:
    return KnowledgeBase("docs", store, embedding=DeterministicFakeEmbedding(size=16))


@pytest.fixture
def folder(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, city in enumerate(["Paris", "Rome", "Lisbon"]):
        (corpus / f"f{i}.md").write_text(f"# {city}\n\n{city} is a capital.\n")
    return corpus


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_collection_is_a_store_error_then_indexing_repairs_it(tmp_path, folder, damage):
    store = tmp_path / "store"
    kb = _kb(store)
    kb.add_documents(folder)
    db = sqlite3.connect(store / "chroma.sqlite3")
    db.execute(DAMAGE[damage])
    db.commit()
    db.close()
    damaged = _kb(store)
    try:
        found = damaged.as_retriever(k=3).invoke("capital")
    except StoreError as exc:   # never a raw chromadb error
        assert "knowledge base 'docs'" in str(exc) and "rag index" in str(exc)
    else:
        assert len(found) == 3   # this damage did not reach a read
    if damage in UNREPAIRABLE:   # Chroma cannot even drop the collection: the error says what to move aside
        with pytest.raises(StoreError, match="move the store directory's chroma.sqlite3"):
            _kb(store).add_documents(folder)
        return
    report = _kb(store).add_documents(folder)
    assert report.embedded == 0 and len(report.added) + len(report.unchanged) == 3   # the embedding cache served
    assert sorted(d.page_content.split("\n")[-1] for d in _kb(store).as_retriever(k=3).invoke("capital")) == [
        "Lisbon is a capital.", "Paris is a capital.", "Rome is a capital."]


def test_rag_ask_says_what_to_do_and_rag_index_repairs(tmp_path, folder, capsys, monkeypatch):
    store = str(tmp_path / "store")
    monkeypatch.setattr("rag.models.embeddings.default_embeddings", lambda *a, **k: DeterministicFakeEmbedding(size=16))
    _kb(store).add_documents(folder)
    db = sqlite3.connect(tmp_path / "store" / "chroma.sqlite3")
    db.execute(DAMAGE["missing segments"])
    db.commit()
    db.close()
    assert cli.main(["ask", "capital", "--store", store]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "damaged" in err and "rag index" in err and "Traceback" not in err
    assert cli.main(["index", str(folder), "--store", store]) == 0
    assert cli.main(["ask", "capital", "--store", store]) == 0
    assert "Sources cited:" in capsys.readouterr().out
