"""A knowledge base on the embedded default searches its lexical side in SQLite FTS5, written with its chunks.

No rebuild after a change, nothing read whole to search, another process sees a write at its next
query; a knowledge base built before (``bm25-*`` and ``records.sqlite``, no ``lexical.sqlite``) is
migrated once, with a message, and loses nothing.
"""

from __future__ import annotations

import logging
import shutil

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.kb_parts import LEXICAL_FILE
from rag.retrieval.bm25_cache import BM25_POINTER, knowledge_base_bm25
from rag.retrieval.hybrid import HybridRetriever
from rag.retrieval.kb_search import knowledge_base_lexical
from rag.retrieval.lexical import BM25Index
from rag.stores.fts_index import FTSIndex

SETTINGS = {"metadata_fields": ["title", "section"]}


def _kb(directory) -> KnowledgeBase:
    return KnowledgeBase("notes", directory, embedding=DeterministicFakeEmbedding(size=16))


def _doc(text: str, source: str) -> Document:
    return Document(page_content=text, metadata={"source": source})


def _texts(retriever, question: str) -> list[str]:
    return [d.page_content for d in retriever.invoke(question, k=3)]


def test_a_retriever_sees_every_later_write_without_a_rebuild(tmp_path):
    kb = _kb(tmp_path)
    kb.add_documents([_doc("Rome is in Italy.", "it"), _doc("Paris is in France.", "fr")])
    bm25 = kb.as_resource(search="bm25").retriever
    hybrid = kb.as_resource(search="hybrid").retriever
    assert isinstance(bm25.index, FTSIndex) and isinstance(hybrid, HybridRetriever)
    kb.add_documents([_doc("Lisbon is in Portugal.", "pt")])
    assert _texts(bm25, "Lisbon") == ["Lisbon is in Portugal."]
    assert "Lisbon is in Portugal." in _texts(hybrid, "Lisbon")
    kb.update_document("pt", [Document(page_content="Porto is in Portugal.")])
    assert _texts(bm25, "Lisbon") == [] and _texts(bm25, "Porto") == ["Porto is in Portugal."]
    kb.delete_document("it")
    assert _texts(bm25, "Rome") == []
    assert not list(kb.home.glob("bm25*"))                        # no in-process index was built or saved
    assert kb.storage.chunks.lexical.count() == kb.count() == 2


def test_another_process_sees_a_write_at_its_next_query(tmp_path):
    writer, reader = _kb(tmp_path), _kb(tmp_path)   # two objects, as two processes open one folder
    writer.add_documents([_doc("Rome is in Italy.", "it")])
    retriever = reader.as_resource(search="bm25").retriever
    writer.add_documents([_doc("Lisbon is in Portugal.", "pt")])
    assert _texts(retriever, "Lisbon") == ["Lisbon is in Portugal."]


def test_the_filter_runs_inside_the_lexical_query(tmp_path):
    kb = _kb(tmp_path)
    kb.add_documents([Document(page_content=f"revenue report {i}", metadata={"source": f"s{i}", "tenant": t})
                      for i, t in enumerate(["a"] * 30 + ["b"])])
    found = kb.as_resource(search="bm25").retriever.invoke("revenue", k=1, filter={"tenant": "b"})
    assert [d.metadata["tenant"] for d in found] == ["b"]   # k matching chunks, though 30 others rank as high


def test_other_bm25_settings_get_the_in_process_index(tmp_path):
    kb = _kb(tmp_path)
    kb.add_documents([_doc("Rome is in Italy.", "it")])
    assert isinstance(knowledge_base_lexical(kb, {"metadata_fields": ["title"]}), BM25Index)
    assert isinstance(knowledge_base_lexical(kb, {**SETTINGS, "k1": 2.0}), BM25Index)
    assert isinstance(knowledge_base_lexical(kb, {**SETTINGS, "k1": 1.5, "stem": True}), FTSIndex)


def _old_knowledge_base(tmp_path) -> KnowledgeBase:
    """A knowledge base as the version before this index left it: records, chunks, bm25.json and bm25-*."""
    kb = _kb(tmp_path)
    kb.add_documents([_doc("Rome is in Italy.", "it"), _doc("Paris is in France.", "fr"),
                      _doc("Lisbon is in Portugal.", "pt")])
    kb.close()
    (kb.home / LEXICAL_FILE).unlink()
    for suffix in ("-wal", "-shm"):
        (kb.home / f"{LEXICAL_FILE}{suffix}").unlink(missing_ok=True)
    knowledge_base_bm25(_kb(tmp_path), SETTINGS)   # the old code path saves its index
    assert (kb.home / BM25_POINTER).exists() and list(kb.home.glob("bm25-*"))
    return kb


def test_an_older_knowledge_base_is_migrated_once_with_a_message_and_loses_nothing(tmp_path, caplog):
    old = _old_knowledge_base(tmp_path)
    old = _kb(tmp_path)
    records = sorted((r.source, r.content_hash, tuple(r.chunk_ids)) for r in old.list_documents())
    expected = {q: [d.page_content for d, _ in knowledge_base_bm25(old, SETTINGS).search_documents(q, k=3)]
                for q in ("Rome", "Portugal", "France Italy")}
    kb = _kb(tmp_path)
    with caplog.at_level(logging.WARNING, logger="rag.indexing.lexical_sync"):
        retriever = kb.as_resource(search="bm25").retriever
    assert "moved into SQLite FTS5" in caplog.text and "3 chunk(s) indexed once" in caplog.text
    assert isinstance(retriever.index, FTSIndex) and (kb.home / LEXICAL_FILE).exists()
    assert not (kb.home / BM25_POINTER).exists() and not list(kb.home.glob("bm25-*"))
    assert sorted((r.source, r.content_hash, tuple(r.chunk_ids)) for r in kb.list_documents()) == records
    assert kb.count() == 3
    for question, texts in expected.items():
        assert _texts(retriever, question) == texts
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rag.indexing.lexical_sync"):
        _kb(tmp_path).as_resource(search="bm25")
    assert "moved" not in caplog.text   # once


def test_an_older_knowledge_base_written_to_first_is_completed_at_its_next_search(tmp_path):
    _old_knowledge_base(tmp_path)
    kb = _kb(tmp_path)
    kb.add_documents([_doc("Madrid is in Spain.", "es")])   # the new chunk's rows only
    retriever = kb.as_resource(search="bm25").retriever
    assert _texts(retriever, "Rome") == ["Rome is in Italy."] and _texts(retriever, "Madrid") == ["Madrid is in Spain."]
    assert retriever.index.count() == kb.count() == 4


@pytest.mark.parametrize("cut", ["rows not written", "rows not deleted"])
def test_a_write_cut_short_is_reconciled_at_the_next_search(tmp_path, cut):
    kb = _kb(tmp_path)
    kb.add_documents([_doc("Rome is in Italy.", "it"), _doc("Paris is in France.", "fr")])
    lexical = kb.storage.chunks.lexical
    if cut == "rows not written":
        lexical.delete([lexical.ids()[0]])                    # the vectors written, the rows not
    else:
        lexical.add(["stale"], ["Atlantis is lost."], [{}])    # the vectors deleted, the row not
    retriever = _kb(tmp_path).as_resource(search="bm25").retriever
    assert _texts(retriever, "Atlantis") == [] and len(_texts(retriever, "Rome Paris")) == 2
    assert sorted(lexical.ids()) == sorted(kb.chunks.get_ids({}))


def test_a_damaged_lexical_file_is_built_again(tmp_path, caplog):
    kb = _kb(tmp_path)
    kb.add_documents([_doc("Rome is in Italy.", "it")])
    kb.close()
    for suffix in ("-wal", "-shm"):
        (kb.home / f"{LEXICAL_FILE}{suffix}").unlink(missing_ok=True)
    (kb.home / LEXICAL_FILE).write_bytes(b"not a database" * 100)
    with caplog.at_level(logging.WARNING):
        retriever = _kb(tmp_path).as_resource(search="bm25").retriever
    assert _texts(retriever, "Rome") == ["Rome is in Italy."]
    assert "building it again" in caplog.text


def test_a_copied_knowledge_base_is_searched(tmp_path):
    kb = _kb(tmp_path / "a")
    kb.add_documents([_doc("Rome is in Italy.", "it")])
    kb.close()
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    assert _texts(_kb(tmp_path / "b").as_resource(search="bm25").retriever, "Rome") == ["Rome is in Italy."]


@pytest.mark.parametrize("search", ["bm25", "hybrid"])
def test_document_routing_counts_mentions_in_the_engine_index(tmp_path, search):
    kb = _kb(tmp_path)
    kb.add_documents([Document(page_content=f"The {name} report covers revenue.", metadata={"source": f"{name}.md"})
                      for name in ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark", "Wayne", "Wonka"]])
    resource = kb.as_resource(search=search)
    initech = next(r.doc_id for r in kb.list_documents() if r.source.startswith("Initech"))
    assert resource.router.route("What did Initech report?").values == [initech]
