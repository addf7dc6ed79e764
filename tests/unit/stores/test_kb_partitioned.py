"""A knowledge base keeps its chunks in a `PartitionedChroma`: documents reach the partitioned layout through
the library's one write path (load, chunk, AutoContext, records, incremental sync), not by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag import KnowledgeBase
from rag.base.errors import ConfigError
from rag.stores.partitioned import PartitionedChroma

EMB = DeterministicFakeEmbedding(size=24)
_DOCS = {name: [Document(page_content=f"{name} paragraph {i} about {topic} and item {i}.",
                         metadata={"source": name}) for i in range(6)]
         for name, topic in (("alpha", "rivers"), ("beta", "taxes"), ("gamma", "weather"))}


def _partitioned(tmp_path: Path) -> PartitionedChroma:
    return PartitionedChroma("notes", EMB, partition_key="source", persist_directory=tmp_path / "partitioned")


def _docs(*names: str) -> list[Document]:
    return [d for n in names for d in _DOCS[n]]


def test_a_knowledge_base_writes_the_partitioned_layout_as_it_writes_chroma(tmp_path: Path) -> None:
    store = _partitioned(tmp_path)
    kb = KnowledgeBase("notes", tmp_path / "kb", embedding=EMB, store=store)
    plain = KnowledgeBase("notes", tmp_path / "plain", embedding=EMB)
    for target in (kb, plain):
        assert target.add_documents(_docs("alpha", "beta", "gamma")).added == ["alpha", "beta", "gamma"]
    assert kb.backend == "chroma-partitioned" and store.count() == plain.count() == 18
    assert sorted(store.partition_values()) == ["alpha", "beta", "gamma"]   # one partition per source
    # filtered search (the partition's exact arrays) and unfiltered search give what Chroma gives
    for flt in ({"source": "beta"}, None):
        got = kb.as_resource(search="dense").retrieve("taxes item 3", search_kwargs={"k": 4, "filter": flt})
        want = plain.as_resource(search="dense").retrieve("taxes item 3", search_kwargs={"k": 4, "filter": flt})
        assert [d.page_content for d in got] == [d.page_content for d in want]
    # the sync is incremental on it too: unchanged skipped, a changed source replaced, a deleted one removed
    changed = [Document(page_content="beta now says one thing.", metadata={"source": "beta"})]
    report = kb.add_documents(_docs("alpha") + changed)
    assert (report.unchanged, report.updated, report.embedded) == (["alpha"], ["beta"], 1)
    assert [d.page_content for d in store.get_documents({"source": "beta"})] == ["beta now says one thing."]
    assert kb.delete_document("gamma") == 6 and store.count() == 7
    assert store.get_documents({"source": "gamma"}) == []


def test_reopening_needs_a_partitioned_store_again(tmp_path: Path) -> None:
    KnowledgeBase("notes", tmp_path / "kb", embedding=EMB, store=_partitioned(tmp_path)).add_documents(_docs("alpha"))
    with pytest.raises(ConfigError, match="keeps its chunks in chroma-partitioned, not chroma: open it with its "
                                          "chroma-partitioned store: store="):
        KnowledgeBase.open("notes", tmp_path / "kb", embedding=EMB)
    again = KnowledgeBase.open("notes", tmp_path / "kb", embedding=EMB, store=_partitioned(tmp_path))
    assert [r.source for r in again.list_documents()] == ["alpha"] and again.count() == 6


def test_a_store_no_knowledge_base_can_keep_chunks_in_names_the_ones_it_can(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot keep its chunks in a dict: use the default store, a "
                                          "PartitionedChroma or one of the registered backends"):
        KnowledgeBase("notes", tmp_path / "kb", embedding=EMB, store={})
