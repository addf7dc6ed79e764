"""The pipelined writer of `sync`: groups stored in order by one thread, errors surface, crashes repair."""

from __future__ import annotations

import threading

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from pydantic import Field

import rag.indexing.executors as executors_module
from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.autocontext import AutoContext


class FailingEmbedding(DeterministicFakeEmbedding):
    """Fails on any batch containing `poison`; records the threads it ran in."""

    poison: str = "POISON"
    threads: list = Field(default_factory=list)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.threads.append(threading.current_thread())
        if any(self.poison in t for t in texts):
            raise RuntimeError("embedding service down")
        return super().embed_documents(texts)


def _docs(n: int, poison_at: int | None = None) -> list[Document]:
    return [Document(page_content=f"Report {i}: revenue grew {i}% on cloud demand." + (" POISON" if i == poison_at
                                                                                         else ""),
                     metadata={"source": f"doc{i:03d}.txt"}) for i in range(n)]


@pytest.fixture
def small_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executors_module, "_GROUP_DOCS", 3)  # many groups, so several are in flight over the run


def test_many_groups_are_all_stored_and_recorded(tmp_path, small_groups) -> None:
    emb = FailingEmbedding(size=16, threads=[])
    kb = KnowledgeBase("pipe", tmp_path, embedding=emb, cache=False, autocontext=AutoContext(enabled=False))
    report = kb.add_documents(_docs(20))
    assert len(report.added) == 20 and report.chunks_added == kb.count() == 20
    assert all(r.state == "ok" and len(r.chunk_ids) == 1 for r in kb.list_documents())
    assert emb.threads and all(t.name.startswith("rag-index-writer") for t in emb.threads)  # embedded off the caller's thread
    assert not any(t.is_alive() for t in emb.threads)  # and that thread ended before add_documents returned


def test_writer_error_is_raised_by_add_documents_and_the_next_run_repairs(tmp_path, small_groups) -> None:
    failing = FailingEmbedding(size=16, threads=[])
    kb = KnowledgeBase("pipe", tmp_path, embedding=failing, cache=False, autocontext=AutoContext(enabled=False))
    with pytest.raises(RuntimeError, match="embedding service down"):
        kb.add_documents(_docs(20, poison_at=10))
    states = {source: r.state for source, r in kb.records.all().items()}
    assert states["doc010.txt"] == "pending"  # marked before the failed write, so the next run redoes it
    assert states["doc000.txt"] == "ok"  # groups before the failure were stored and recorded
    assert states.get("doc019.txt") != "ok"  # nothing after the failure was recorded ok
    healthy = KnowledgeBase("pipe", tmp_path, embedding=FailingEmbedding(size=16, poison="never", threads=[]),
                            cache=False)
    report = healthy.add_documents(_docs(20, poison_at=10))
    assert healthy.count() == 20 and "doc010.txt" in report.added + report.updated
    assert {r.state for r in healthy.list_documents()} == {"ok"}
    texts = sorted(d.page_content for d in healthy.get_documents())
    assert texts == sorted(d.page_content for d in _docs(20, poison_at=10))
