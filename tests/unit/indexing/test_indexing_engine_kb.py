"""A Qdrant or Milvus knowledge base is named by its connection alone (Qdrant local mode, Milvus Lite): manifest,
records and writer lock live in the engine's side collection; knowledge bases opened from different empty folders
answer alike, see each other's writes without a restart, and exclude each other's writers."""

from __future__ import annotations

import contextlib
import gc
import io
import itertools
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import StoreError
from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.records import RecordStore
from rag.stores.kb_side import SideTables

EMB = DeterministicFakeEmbedding(size=32)
ENGINES = ("qdrant", "milvus")
_names = (f"caps{i}" for i in itertools.count())
CITIES = [("it", "Rome is the capital of Italy."), ("fr", "Paris is the capital of France."),
          ("pt", "Lisbon is the capital of Portugal.")]


class Engine:
    """One collection of a real engine, opened again for each knowledge base (as another process would)."""

    def __init__(self, kind: str, workdir: Path) -> None:
        self.kind, self.collection = kind, next(_names)
        if kind == "qdrant":   # (local mode: one client per folder, shared by the knowledge bases of this process)
            from rag.stores.qdrant import open_store
            self.first = open_store(self.collection, EMB, path=str(workdir / "qdrant"), create=True)
        else:
            self.uri = str(workdir / "milvus.db")

    def store(self) -> Any:
        if self.kind == "qdrant":
            from langchain_qdrant import QdrantVectorStore
            return QdrantVectorStore(client=self.first.client, collection_name=self.collection, embedding=EMB)
        from rag.stores.milvus import open_store
        return open_store(self.collection, EMB, uri=self.uri, create=True)

    def kb(self, folder: Path, **kwargs: Any) -> KnowledgeBase:
        return KnowledgeBase("capitals", folder, embedding=EMB, store=self.store(), **kwargs)


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    return Engine(request.param, tmp_path)


def _docs(pairs) -> list[Document]:
    return [Document(page_content=text, metadata={"source": source}) for source, text in pairs]


def _context(kb: KnowledgeBase, question: str) -> list[tuple[str, str]]:
    return [(d.metadata["source"], d.page_content) for d in kb.as_resource().retrieve(question)]


def test_two_empty_folders_open_one_knowledge_base_and_see_each_others_writes(engine, tmp_path):
    first = engine.kb(tmp_path / "a")
    first.add_documents(_docs(CITIES))
    second = KnowledgeBase.open("capitals", tmp_path / "b", embedding=EMB, store=engine.store())
    assert second.exists and not (tmp_path / "b" / "kb").exists()   # found by its connection alone
    assert [r.source for r in second.list_documents()] == [r.source for r in first.list_documents()]
    for question in ("capital of Italy", "Lisbon", "France"):
        assert _context(first, question) == _context(second, question)
    serving, lexical = first.as_resource().retriever, first.as_resource(search="bm25").retriever
    second.add_documents(_docs([("es", "Madrid is the capital of Spain.")]))   # indexed through the other one
    assert serving.invoke("Madrid", k=1)[0].page_content == "Madrid is the capital of Spain."
    assert lexical.invoke("Madrid", k=1)[0].page_content == "Madrid is the capital of Spain."
    assert "es" in {r.source for r in first.list_documents()}
    second.delete_document("it")
    assert "Rome is the capital of Italy." not in [d.page_content for d in serving.invoke("Rome", k=4)]
    assert "Rome is the capital of Italy." not in [d.page_content for d in lexical.invoke("Rome", k=4)]


def test_a_writer_in_another_folder_is_locked_out(engine, tmp_path):
    first = engine.kb(tmp_path / "a")
    first.add_documents(_docs(CITIES[:1]))
    second = engine.kb(tmp_path / "b")
    with first.lock, pytest.raises(StoreError, match="being written by .*last heartbeat"):
        second.add_documents(_docs(CITIES[1:2]))
    second.add_documents(_docs(CITIES[1:2]))   # once the first writer is done
    assert {r.source for r in first.list_documents()} == {"it", "fr"}


def test_writers_in_threads_never_overlap_on_the_engine(engine, tmp_path):
    kbs = [engine.kb(tmp_path / f"w{i}", lock_timeout=60) for i in range(3)]
    kbs[0].create()
    inside, overlaps, done = [], [], []

    def write(i: int) -> None:
        for round_ in range(3):
            with kbs[i].lock:
                inside.append(i)
                if len(inside) > 1:
                    overlaps.append(list(inside))
                time.sleep(0.05)
                inside.remove(i)
            kbs[i].add_documents(_docs([(f"t{i}-{round_}", f"Thread {i} wrote round {round_}.")]))
        done.append(i)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(done) == [0, 1, 2] and overlaps == []
    assert len(kbs[0].list_documents()) == 9


def test_a_dead_writers_lock_is_taken_over_and_a_live_one_is_renewed(engine, tmp_path):
    kb = engine.kb(tmp_path / "a")
    kb.add_documents(_docs(CITIES[:1]))
    cell = kb.storage.tables.side.cell
    cell.claim("dead-host:1:x", time.time() - 3600, time.time())   # a writer killed an hour ago
    kb.add_documents(_docs(CITIES[1:2]))
    assert cell.holder() is None   # taken over, then released
    live = SideTables(kb.storage.tables.side, lease=0.6, settle=0.05)
    live.acquire(0)
    time.sleep(1.2)   # two leases: its heartbeat keeps it
    other = SideTables(kb.storage.tables.side, lease=0.6, settle=0.05)
    with pytest.raises(StoreError, match="being written by"):
        other.acquire(0)
    live.release()
    other.acquire(0)
    other.release()


def test_a_knowledge_base_with_its_records_in_its_folder_moves_them_into_the_engine_once(engine, tmp_path, caplog):
    kb = engine.kb(tmp_path / "a")
    kb.add_documents(_docs(CITIES))
    sources = [r.source for r in kb.list_documents()]
    local = RecordStore(kb.home / "records.sqlite")   # as an earlier version left it: the records in the folder,
    local.put_many(kb.records.all().values())         # the manifest too (always copied there), none in the engine
    local.close()
    side = kb.storage.tables.side
    side.delete(["manifest", *(f"record:{s}" for s in sources)])
    with pytest.raises(StoreError, match="open it once from the folder it was indexed from"):   # not yet moved
        engine.kb(tmp_path / "c").add_documents(_docs(CITIES[:1]))
    with caplog.at_level(logging.WARNING, logger="rag.indexing.kb_server"):
        again = engine.kb(tmp_path / "a")
        assert [r.source for r in again.list_documents()] == sources
        assert [r.source for r in engine.kb(tmp_path / "a").list_documents()] == sources
    assert caplog.text.count("moved into") == 1 and "3 record(s)" in caplog.text
    other = KnowledgeBase.open("capitals", tmp_path / "b", embedding=EMB, store=engine.store())
    assert [r.source for r in other.list_documents()] == sources
    assert _context(other, "Lisbon") == _context(kb, "Lisbon")


def test_long_records_and_damaged_entries(engine, tmp_path):
    kb = engine.kb(tmp_path / "a")
    kb.add_documents(_docs(CITIES[:1]))
    record = kb.records.get("it")
    record.chunk_ids = [f"{i:032x}" for i in range(5000)]   # 180,000 characters of ids
    kb.records.put(record)
    assert kb.records.get("it").chunk_ids == record.chunk_ids
    record.chunk_ids = record.chunk_ids[:1]
    kb.records.put(record)   # shorter again: the parts of the longer value are gone
    assert kb.records.all()["it"].chunk_ids == record.chunk_ids
    assert kb.records.find(record.doc_id).source == "it"
    kb.storage.tables.side.put([("record:zz", "record", "d", '{"source": 1}')])
    with pytest.raises(StoreError, match="records in .* are damaged .*index the documents again"):
        kb.list_documents()


@pytest.mark.parametrize("kind", ENGINES)
def test_rag_ask_from_an_empty_folder(kind, tmp_path):
    from rag.cli import main

    where = {"path": str(tmp_path / "qdrant")} if kind == "qdrant" else {"path": str(tmp_path / "milvus.db")}
    backend = json.dumps({"kind": kind, **where, "collection": "capitals"})
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "rome.md").write_text("Rome is the capital of Italy.\n")
    assert main(["index", str(corpus), "--store", str(tmp_path / "a"), "--collection", "capitals",
                 "--embedding", "fake", "--backend", backend.replace("}", ', "create": true}')]) == 0
    gc.collect()   # (Qdrant's local mode: the indexing command's client lets go of the folder)

    def ask(folder: str) -> dict:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["ask", "What is the capital of Italy?", "--store", str(tmp_path / folder),
                         "--collection", "capitals", "--backend", backend, "--json"]) == 0
        gc.collect()
        return json.loads(out.getvalue())

    empty = ask("empty")
    assert [d["page_content"] for d in empty["context"]] == [d["page_content"] for d in ask("a")["context"]]
    assert "Rome is the capital of Italy." in empty["context"][0]["page_content"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=4), max_leaves=12)
       | st.text(max_size=40))
def test_an_entry_that_is_not_a_record_is_a_store_error(value, qdrant_records):
    """Entries are read as untrusted: anything but a record's fields of the right types is a `StoreError`."""
    text = value if isinstance(value, str) else json.dumps(value)
    try:
        record = qdrant_records._parse(text)
    except StoreError as exc:
        assert "damaged" in str(exc)
    else:
        assert isinstance(record.source, str) and isinstance(record.chunk_ids, list)


@pytest.fixture(scope="module")
def qdrant_records():
    from qdrant_client import QdrantClient

    from rag.indexing.engine_records import EngineRecordStore
    from rag.stores.qdrant_side import QdrantSide

    return EngineRecordStore(SideTables(QdrantSide(QdrantClient(location=":memory:"), "hostile")))
