"""LangChain's standard retriever tests and the filter contract for `KnowledgeBaseRetriever`."""

from __future__ import annotations

import tempfile
from functools import lru_cache

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_tests.integration_tests import RetrieversIntegrationTests

from rag.base.errors import ConfigError, FilterError
from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.autocontext import AutoContext
from rag.indexing.kb_retriever import KnowledgeBaseRetriever


@lru_cache(maxsize=1)
def _kb() -> KnowledgeBase:
    kb = KnowledgeBase("std", tempfile.mkdtemp(prefix="kb-std-"), embedding=DeterministicFakeEmbedding(size=16),
                       autocontext=AutoContext(enabled=False))
    kb.add_documents([Document(page_content=f"fact number {i}", metadata={"source": f"s{i}", "year": 2020 + i})
                      for i in range(6)])
    return kb


class TestKnowledgeBaseRetriever(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[KnowledgeBaseRetriever]:
        return KnowledgeBaseRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        kb = _kb()
        return {"chunks": kb.chunks, "embedding": kb.embedding}

    @property
    def retriever_query_example(self) -> str:
        return "fact number 3"


def test_exact_text_is_the_top_hit_with_score_one():
    (doc,) = _kb().as_retriever(k=1).invoke("fact number 3")
    assert doc.page_content == "fact number 3" and doc.metadata["score"] == pytest.approx(1.0, abs=1e-5)
    assert doc.id


def test_portable_filter_and_threshold_are_applied():
    retriever = _kb().as_retriever(k=10)
    docs = retriever.invoke("fact", filter={"year": {"$in": [2021, 2023]}})
    assert sorted(d.metadata["year"] for d in docs) == [2021, 2023]
    assert [d.page_content for d in retriever.invoke("fact number 2", score_threshold=0.99)] == ["fact number 2"]


def test_bad_filter_and_unknown_settings_fail_loudly():
    retriever = _kb().as_retriever()
    with pytest.raises(FilterError, match=r"\$gtt"):
        retriever.invoke("x", filter={"year": {"$gtt": 1}})
    with pytest.raises(ConfigError, match="unknown search setting"):
        retriever.invoke("x", search_type="mmr")


def test_resource_hands_filter_to_the_retriever_natively():
    assert KnowledgeBaseRetriever.accepts_portable_filter is True
    docs = _kb().as_resource().retrieve("fact", search_kwargs={"k": 2, "filter": {"year": {"$gte": 2024}}})
    assert sorted(d.metadata["year"] for d in docs) == [2024, 2025]


async def test_async_search_honours_k_and_filter():
    docs = await _kb().as_retriever().ainvoke("fact", k=2, filter={"year": {"$gte": 2024}})
    assert sorted(d.metadata["year"] for d in docs) == [2024, 2025]


def test_hybrid_retriever_over_a_knowledge_base_finds_exact_words_and_keeps_filters(tmp_path):
    kb = KnowledgeBase("facts", tmp_path, embedding=DeterministicFakeEmbedding(size=16),
                       autocontext=AutoContext(enabled=False))
    kb.add_documents([Document(page_content=text, metadata={"source": name, "year": year}) for name, text, year in [
        ("a", "The Colosseum is an amphitheatre in Rome.", 2021),
        ("b", "The Eiffel Tower is a lattice tower in Paris.", 2022),
        ("c", "Ocean tides follow the pull of the moon.", 2023)]])
    hybrid = kb.as_hybrid_retriever(k=1, fusion="convex", weights={"dense": 0.1, "bm25": 0.9})
    top = hybrid.invoke("amphitheatre")
    assert top[0].metadata["source"] == "a" and top[0].metadata["scores"]["bm25"] > 0
    assert [d.metadata["source"] for d in hybrid.invoke("tower", filter={"year": {"$gte": 2023}})] == ["c"]
    resource = kb.as_resource(hybrid={"fusion": "rrf"})
    assert type(resource.retriever).__name__ == "HybridRetriever"
    assert resource.retrieve("lattice tower", search_kwargs={"k": 1})[0].metadata["source"] == "b"
    with pytest.raises(ConfigError, match="fusion"):
        kb.as_hybrid_retriever(fusion="max")
    empty = KnowledgeBase("empty", tmp_path / "e", embedding=DeterministicFakeEmbedding(size=16)).create()
    with pytest.raises(ConfigError, match="'empty' is empty"):
        empty.as_hybrid_retriever()
