"""LangChain's standard retriever tests for the aggregated `RAGRetriever`."""

from __future__ import annotations

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel
from langchain_tests.integration_tests import RetrieversIntegrationTests

from rag import RAG, Resource, rag_chain_from_docs
from rag.compose.retriever import RAGRetriever


def _rag() -> RAG:
    emb = DeterministicFakeEmbedding(size=16)
    return RAG(
        resources=[Resource.from_texts("a", [f"alpha {i}" for i in range(5)], embedding=emb),
                   Resource.from_texts("b", [f"beta {i}" for i in range(5)], embedding=emb)],
        generation_chain=rag_chain_from_docs(FakeListChatModel(responses=["x"])),
    )


class TestRAGRetriever(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[RAGRetriever]:
        return RAGRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"rag": _rag()}

    @property
    def retriever_query_example(self) -> str:
        return "alpha"


def test_retriever_filter_applies_to_every_resource():
    docs = RAGRetriever(rag=_rag(), k=10).invoke("x", filter={"resource_missing": {"$ne": 1}})
    assert len(docs) == 10
    with pytest.raises(ValueError, match=r"\$bad"):
        RAGRetriever(rag=_rag()).invoke("x", filter={"a": {"$bad": 1}})
