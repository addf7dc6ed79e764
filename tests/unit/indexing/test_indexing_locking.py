from __future__ import annotations

import threading

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import StoreError
from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.locking import WriterLock
from rag.indexing.records import DocumentRecord, RecordStore


def test_second_writer_gets_a_clear_error_naming_the_holder(tmp_path):
    with WriterLock(tmp_path):
        with pytest.raises(StoreError, match=r"is being written by process \d+; only one writer at a time"):
            WriterLock(tmp_path).acquire()


def test_waiting_writer_gets_the_lock_when_released(tmp_path):
    held, waiting, order = threading.Event(), threading.Event(), []

    def hold() -> None:
        with WriterLock(tmp_path):
            held.set()
            waiting.wait(10)
            threading.Event().wait(0.2)   # let the second writer poll the held lock a few times
            order.append("first released")

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    waiting.set()
    with WriterLock(tmp_path, timeout=10) as second:
        order.append("second acquired")
        assert second.held
    holder.join(10)
    assert order == ["first released", "second acquired"]


def test_waiting_writer_times_out_with_the_wait_in_the_message(tmp_path):
    with WriterLock(tmp_path), pytest.raises(StoreError, match="after waiting 0.2 s"):
        WriterLock(tmp_path, timeout=0.2).acquire()


def test_lock_is_reentrant_for_its_owner(tmp_path):
    lock = WriterLock(tmp_path)
    with lock, lock:
        assert lock.held
    assert not lock.held
    with WriterLock(tmp_path):  # released completely
        pass


def test_knowledge_base_writes_are_refused_while_another_writer_holds_the_lock(tmp_path):
    emb = DeterministicFakeEmbedding(size=8)
    kb = KnowledgeBase("kb1", tmp_path, embedding=emb)
    doc = Document(page_content="x", metadata={"source": "a"})
    with WriterLock(tmp_path):
        with pytest.raises(StoreError, match="only one writer"):
            kb.add_documents([doc])
    assert kb.add_documents([doc]).added == ["a"]


def test_records_round_trip_and_reject_unknown_states(tmp_path):
    store = RecordStore(tmp_path / "r.sqlite")
    store.put(DocumentRecord(source="/a.txt", doc_id="d", content_hash="h", chunk_ids=["1", "2"], size=3))
    assert RecordStore(tmp_path / "r.sqlite").get("/a.txt").chunk_ids == ["1", "2"]
    assert store.find("d").source == "/a.txt"
    with pytest.raises(StoreError, match="valid: ok, pending, updating, deleting"):
        store.put(DocumentRecord(source="b", doc_id="e", content_hash="h", state="done"))
