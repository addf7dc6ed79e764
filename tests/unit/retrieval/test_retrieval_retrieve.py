from __future__ import annotations

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel

from rag.base.errors import ConfigError
from rag.compose.generator import RAG
from rag.compose.resource import Resource
from rag.compose.retrieve import retrieve
from rag.retrieval.hybrid import HybridRetriever
from rag.retrieval.lexical import BM25Retriever
from rag.retrieval.rerank import EmbeddingReranker
from rag.retrieval.routing import DocumentRouter

EMB = DeterministicFakeEmbedding(size=16)


@pytest.fixture
def hybrid_resource(chunks) -> Resource:
    return Resource.from_retriever("filings", HybridRetriever.from_documents(chunks, embedding=EMB))


def test_every_step_is_recorded(hybrid_resource, chunks):
    router = DocumentRouter.from_documents(chunks, fields=["title", "company", "year"])
    llm = FakeListChatModel(responses=["Acme spent $520 million on capital expenditure in 2023."])
    result = retrieve("How much did Acme invest in plants in 2023?", hybrid_resource, rephrase=["keywords", "hyde"],
                      llm=llm, router=router, reranker=EmbeddingReranker(embedding=EMB), k=3, fetch_k=10,
                      max_tokens=200, token_counter="approx")
    assert result.rephrased_questions == ["Acme invest plants 2023",
                                          "Acme spent $520 million on capital expenditure in 2023."]
    assert result.extras["route"]["values"] == ["ACME_2023_10K"]
    cands = result.stages["candidates/filings"]
    assert cands and all(c.document.metadata["doc_name"] == "ACME_2023_10K" for c in cands)
    assert {"dense", "bm25", "rrf"} <= set(cands[0].scores)
    assert [c.document.id for c in result.stages["fused"]][:1] and "reranked" in result.stages
    assert len(result.context) == 3 and all(d.metadata["resource"] == "filings" for d in result.context)
    assert {"rephrase", "route", "search", "fuse", "rerank", "select", "budget", "total"} <= set(result.timings)
    assert result.extras["token_counter"] == "approx"


def test_budget_caps_the_context(hybrid_resource):
    result = retrieve("Acme revenue", hybrid_resource, k=10, max_tokens=40, token_counter="approx")
    assert sum(d.metadata["tokens"] for d in result.context) <= 40
    assert result.extras["context_tokens"] <= 40


def test_rse_path_returns_segments(hybrid_resource):
    result = retrieve("Acme 2023 revenue gross margin capital expenditure", hybrid_resource,
                      filter={"doc_name": "ACME_2023_10K"}, rse="balanced", fetch_k=5, token_counter="approx")
    assert result.segments and result.segments[0].doc_id == "ACME_2023_10K"
    assert result.context[0].page_content == result.segments[0].text
    stages = {"search", "fuse", "select", "budget"}
    assert stages <= set(result.timings)
    assert sum(result.timings[s] for s in stages) <= result.timings["total"]


def test_neighbour_expansion_path_merges_windows(hybrid_resource):
    result = retrieve("Globex green bonds", hybrid_resource, k=1, expand=1, token_counter="approx")
    doc = result.context[0]
    assert doc.metadata["doc_id"] == "GLOBEX_2023_10K" and len(doc.metadata["chunk_indices"]) == 3


def test_several_resources_are_searched_and_fused(chunks):
    acme = Resource.from_retriever("acme", BM25Retriever.from_documents(chunks[:10]))
    globex = Resource.from_retriever("globex", BM25Retriever.from_documents(chunks[10:]))
    rag = RAG(resources=[acme, globex])
    result = retrieve("revenue", rag, k=4, token_counter="approx")
    assert set(result.stages) >= {"candidates/acme", "candidates/globex", "fused"}
    assert {d.metadata["resource"] for d in result.context} == {"acme", "globex"}
    assert "rrf" in result.stages["fused"][0].scores


def test_unknown_setting_lists_valid_fields(hybrid_resource):
    with pytest.raises(ConfigError, match=r"unknown retrieve option\(s\) \['top_k'\]; valid: k, fetch_k"):
        retrieve("q", hybrid_resource, top_k=3)
    with pytest.raises(ConfigError, match="needs a Resource"):
        retrieve("q", "not a resource")


async def test_async_retrieve_matches_sync(hybrid_resource):
    from rag.compose.retrieve import aretrieve

    sync = retrieve("Acme revenue", hybrid_resource, k=3, token_counter="approx")
    result = await aretrieve("Acme revenue", hybrid_resource, k=3, token_counter="approx")
    assert [d.id for d in result.context] == [d.id for d in sync.context]


async def test_every_retriever_keeps_k_and_filter_on_the_async_path(chunks):
    from rag import RAG, Resource
    from rag.compose.retriever import RAGRetriever
    from rag.retrieval.lexical import BM25Index
    from rag.stores import PartitionedChroma

    index = BM25Index.from_documents(chunks)
    base = BM25Retriever(index=index)
    store = PartitionedChroma("a", EMB, partition_key="doc_name")
    store.add_texts([c.page_content for c in chunks], [c.metadata for c in chunks], ids=[c.id for c in chunks])
    router = DocumentRouter.from_documents(chunks, fields=["title"])
    # rephrasing, routing and RSE are pipeline stages: a RAG running each, as a retriever
    rephrased = RAG(resources=[Resource.from_retriever("a", base)], retrieval={"rephrase": ["keywords"]})
    routed = RAG(resources=[Resource.from_retriever("a", base, router=router)])
    segmented = RAG(resources=[Resource.from_retriever("a", base)], retrieval={"rse": "balanced"})
    retrievers = [RAGRetriever(rag=rephrased), RAGRetriever(rag=routed), RAGRetriever(rag=segmented),
                  store.as_retriever(), HybridRetriever(vectorstore=store, bm25=index)]
    for retriever in retrievers:
        docs = await retriever.ainvoke("Acme revenue margin capital expenditure", k=1, filter={"year": 2022})
        assert len(docs) == 1, type(retriever).__name__
        assert docs[0].metadata["year"] == 2022, type(retriever).__name__
