from __future__ import annotations

import asyncio
import threading

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_tests.integration_tests import RetrieversIntegrationTests
from retrieval_corpus import filing_chunks

from rag.compose.resource import Resource
from rag.retrieval.hybrid import HybridRetriever
from rag.retrieval.lexical import BM25Index
from rag.stores import PartitionedChroma


class MeetingEmbedding(Embeddings):
    """Deterministic fake vectors; a query embedding waits at a barrier for the BM25 search."""

    def __init__(self, barrier: threading.Barrier) -> None:
        self.inner = DeterministicFakeEmbedding(size=16)
        self.barrier = barrier

    def embed_documents(self, texts):
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        self.barrier.wait()   # raises BrokenBarrierError unless BM25 is searching at the same time
        return self.inner.embed_query(text)


class MeetingBM25(BM25Index):
    barrier: threading.Barrier | None = None

    def search(self, query, **kwargs):
        self.barrier.wait()
        return super().search(query, **kwargs)


def test_results_carry_fused_and_per_retriever_scores(chunks):
    hybrid = HybridRetriever.from_documents(chunks, embedding=DeterministicFakeEmbedding(size=16), k=3)
    docs = hybrid.invoke("green bonds terminal upgrades")
    assert docs[0].id == "GLOBEX_2023_10K-3"
    scores = docs[0].metadata["scores"]
    assert {"dense", "bm25", "rrf"} <= set(scores) and docs[0].metadata["score"] == scores["rrf"]
    assert -1.0 <= scores["dense"] <= 1.0


def test_convex_fusion_with_all_weight_on_bm25_follows_bm25(chunks):
    hybrid = HybridRetriever.from_documents(chunks, embedding=DeterministicFakeEmbedding(size=16), k=5,
                                            fusion="convex", weights={"dense": 0.0, "bm25": 1.0})
    bm25 = hybrid.candidates("revenue capital expenditure plant")["bm25"]
    lo, hi = bm25[-1][1], bm25[0][1]
    fused = {d.id: d.metadata["score"] for d in hybrid.invoke("revenue capital expenditure plant", k=20)}
    assert len(bm25) >= 3
    for doc, score in bm25:
        assert fused[doc.id] == pytest.approx((score - lo) / (hi - lo))


def test_filter_applies_to_both_retrievers(chunks):
    hybrid = HybridRetriever.from_documents(chunks, embedding=DeterministicFakeEmbedding(size=16), k=10)
    cands = hybrid.candidates("revenue", filter={"company": "GLOBEX", "chunk_index": {"$lt": 3}})
    assert cands["dense"] and all(d.metadata["company"] == "GLOBEX" and d.metadata["chunk_index"] < 3
                                  for name in cands for d, _ in cands[name])
    assert len(hybrid.invoke("revenue", filter={"doc_name": "ACME_2022_10K"}, k=10)) == 5


def test_dense_and_bm25_run_concurrently(chunks):
    # Both searches wait at one barrier of two: run one after the other, the first would time out.
    barrier = threading.Barrier(2, timeout=10)
    bm25 = MeetingBM25()
    bm25.barrier = barrier
    bm25.add_documents(chunks)
    dense = HybridRetriever.from_documents(chunks, embedding=MeetingEmbedding(barrier))
    hybrid = HybridRetriever(vectorstore=dense.vectorstore, bm25=bm25, k=2)
    assert len(hybrid.invoke("revenue")) == 2
    assert len(asyncio.run(hybrid.ainvoke("revenue"))) == 2
    assert not barrier.broken


def test_persisted_retriever_reloads_both_indexes(tmp_path, chunks):
    emb = DeterministicFakeEmbedding(size=16)
    built = HybridRetriever.from_documents(chunks, embedding=emb, persist_directory=tmp_path, k=3)
    loaded = HybridRetriever.load(tmp_path, embedding=emb, k=3)
    assert [d.id for d in loaded.invoke("gross margin")] == [d.id for d in built.invoke("gross margin")]


def test_partitioned_store_works_as_the_dense_side(chunks):
    store = PartitionedChroma("t", DeterministicFakeEmbedding(size=16), partition_key="doc_name")
    store.add_texts([c.page_content for c in chunks], [c.metadata for c in chunks], ids=[c.id for c in chunks])
    hybrid = HybridRetriever(vectorstore=store, bm25=BM25Index.from_documents(chunks), k=10)
    docs = hybrid.invoke("revenue", filter={"doc_name": "GLOBEX_2023_10K"})
    assert len(docs) == 5 and {d.metadata["doc_name"] for d in docs} == {"GLOBEX_2023_10K"}


def test_unknown_fusion_lists_valid_choices(chunks):
    with pytest.raises(ValueError, match="valid: rrf, convex"):
        HybridRetriever.from_documents(chunks[:2], embedding=DeterministicFakeEmbedding(size=8), fusion="sum")


def test_resource_hands_k_and_filter_to_hybrid(chunks):
    hybrid = HybridRetriever.from_documents(chunks, embedding=DeterministicFakeEmbedding(size=16))
    res = Resource.from_retriever("filings", hybrid, search_kwargs={"k": 2, "filter": {"year": 2022}})
    docs = res.retrieve("revenue")
    assert len(docs) == 2 and all(d.metadata["year"] == 2022 for d in docs)


class TestHybridRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[HybridRetriever]:
        return HybridRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        built = HybridRetriever.from_documents(filing_chunks(), embedding=DeterministicFakeEmbedding(size=16))
        return {"vectorstore": built.vectorstore, "bm25": built.bm25}

    @property
    def retriever_query_example(self) -> str:
        return "Acme revenue"


def test_fetch_k_per_call_widens_the_candidate_lists(chunks):
    hybrid = HybridRetriever.from_documents(chunks, embedding=DeterministicFakeEmbedding(size=16), fetch_k=2)
    assert len(hybrid.candidates("Acme", k=1)["dense"]) == 2
    assert len(hybrid.candidates("Acme", k=1, fetch_k=6)["dense"]) == 6


def test_other_vector_stores_are_filtered_in_python_with_their_relevance(chunks):
    from langchain_core.vectorstores import InMemoryVectorStore

    from rag.retrieval.hybrid import dense_search

    store = InMemoryVectorStore.from_documents(chunks, DeterministicFakeEmbedding(size=16))
    hits = dense_search(store, chunks[4].page_content, k=2, filter={"company": "ACME"})
    assert hits[0][0].page_content == chunks[4].page_content and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert all(d.metadata["company"] == "ACME" for d, _ in hits) and len(hits) == 2
