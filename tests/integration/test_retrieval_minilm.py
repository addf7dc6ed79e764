"""Retrieval components with the real all-MiniLM-L6-v2 model and a persistent Chroma store."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "retrieval"))

from retrieval_corpus import filing_chunks  # noqa: E402

from rag.compose.resource import Resource  # noqa: E402
from rag.compose.retrieve import retrieve  # noqa: E402
from rag.retrieval.hybrid import HybridRetriever  # noqa: E402
from rag.retrieval.rerank import EmbeddingReranker  # noqa: E402
from rag.retrieval.routing import DocumentRouter  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def minilm():
    from rag.models.embeddings import default_embeddings

    return default_embeddings()


@pytest.fixture(scope="module")
def hybrid(minilm, tmp_path_factory) -> HybridRetriever:
    return HybridRetriever.from_documents(filing_chunks(), embedding=minilm,
                                          persist_directory=tmp_path_factory.mktemp("hybrid"),
                                          bm25_settings={"metadata_fields": ["title"]}, k=3)


def test_dense_side_finds_paraphrases_bm25_cannot(hybrid):
    cands = hybrid.candidates("Which firm runs airfields and freight hubs?", k=3)
    assert cands["dense"][0][0].id == "GLOBEX_2023_10K-0"
    assert 0.2 < cands["dense"][0][1] <= 1.0          # cosine similarity, not a distance
    assert "GLOBEX_2023_10K-0" not in [d.id for d, _ in cands["bm25"][:1]]
    assert hybrid.invoke("Which firm runs airfields and freight hubs?")[0].id == "GLOBEX_2023_10K-0"


def test_embedding_reranker_prefers_the_answering_chunk(minilm):
    chunks = filing_chunks()
    out = EmbeddingReranker(embedding=minilm).rerank("How much steel prices hurt margins", chunks)
    assert out[0][0].id == "ACME_2023_10K-2"


def test_full_path_routes_reranks_and_extracts_segments(minilm, hybrid):
    chunks = filing_chunks()
    router = DocumentRouter.from_documents(chunks, fields=["title", "company", "year"], embedding=minilm)
    result = retrieve("What happened to Acme's gross margin and capital spending in 2023?",
                      Resource.from_retriever("filings", hybrid), router=router,
                      reranker=EmbeddingReranker(embedding=minilm), rse="balanced", fetch_k=10, max_tokens=300)
    assert result.extras["route"]["values"] == ["ACME_2023_10K"]
    assert result.segments and result.segments[0].doc_id == "ACME_2023_10K"
    assert "38%" in result.context[0].page_content and "$520 million" in result.context[0].page_content
    assert result.extras["token_counter"] == "minilm" and result.extras["context_tokens"] <= 300
