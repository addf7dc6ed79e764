"""What feeds the model in a local sync: length-sorted calls (vectors stored in the chunks' own order), a small
first group so embedding starts early, and the run's chunks per second and device in its report."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from pydantic import Field

import rag.indexing.executors as executors_module
from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.autocontext import AutoContext
from rag.indexing.report import IndexReport


class RecordingEmbedding(DeterministicFakeEmbedding):
    """Records the texts of every `embed_documents` call; a text's vector depends only on the text."""

    calls: list = Field(default_factory=list)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return super().embed_documents(texts)


def _kb(tmp_path, embedding) -> KnowledgeBase:
    return KnowledgeBase("feed", tmp_path / "kbs", embedding=embedding, cache=False,
                         autocontext=AutoContext(enabled=False))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(alphabet="abcdefgh xyz.", min_size=1, max_size=300).filter(str.strip), min_size=1,
                max_size=40, unique=True))
def test_calls_are_sorted_by_length_and_every_chunk_keeps_its_own_vector(tmp_path_factory, texts) -> None:
    tmp_path = tmp_path_factory.mktemp("feed")
    embedding = RecordingEmbedding(size=8)
    kb = _kb(tmp_path, embedding)
    docs = [Document(page_content=t, metadata={"source": f"doc{i:03d}.txt"}) for i, t in enumerate(texts)]
    kb.add_documents(docs)
    lengths = [len(t) for call in embedding.calls for t in call]
    assert lengths == sorted(lengths)   # one group here: shortest to longest across its calls
    assert kb.storage.chunks.count() == len(docs)
    for doc in docs:   # each chunk is stored with its own text's vector: that vector finds it first
        vector = DeterministicFakeEmbedding(size=8).embed_documents([doc.page_content.strip()])[0]
        (found, _score), *_ = kb.storage.chunks.search(vector, k=1, filter=None)
        assert found.page_content.strip() == doc.page_content.strip()


def test_the_first_group_is_small_and_the_next_grow(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    groups: list[int] = []
    original = executors_module.prepare

    def counting(components, items):
        groups.append(sum(len(i.docs or ()) for i in items))
        return original(components, items)

    monkeypatch.setattr(executors_module, "prepare", counting)
    monkeypatch.setattr(executors_module, "_FIRST_GROUP_CHARS", 2_000)
    docs = [Document(page_content=f"Report {i}: " + "revenue grew on cloud demand. " * 30,
                     metadata={"source": f"doc{i:03d}.txt"}) for i in range(40)]
    _kb(tmp_path, DeterministicFakeEmbedding(size=8)).add_documents(docs)
    assert sum(groups) == 40 and groups[0] <= 3 and groups[1] > groups[0] and len(groups) >= 3


def test_the_report_gives_chunks_per_second_and_the_device(tmp_path) -> None:
    report = _kb(tmp_path, DeterministicFakeEmbedding(size=8)).add_documents(
        [Document(page_content="Revenue grew.", metadata={"source": "a.txt"})])
    assert report.chunks_added == 1 and report.chunks_per_second > 0
    assert report.device == "" and report.summary().endswith(" chunks/s")   # a fake model names no device
    assert IndexReport(seconds=2.0).chunks_per_second == 0 and "chunks/s" not in IndexReport().summary()
    described = IndexReport(chunks_added=10, embedded=10, seconds=2.0, device="cuda fp16 (torch)").summary()
    assert described.endswith("2.00 s, 5.0 chunks/s on cuda fp16 (torch)")
