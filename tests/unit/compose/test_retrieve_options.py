"""`retrieve` options: routing that filters and boosts, rerank depth, question weight, token counter objects."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.retrievers import BaseRetriever

from rag.base.errors import ConfigError
from rag.compose.resource import Resource
from rag.compose.retrieve import retrieve
from rag.retrieval.budget import CharTokenCounter
from rag.retrieval.lexical import BM25Retriever
from rag.retrieval.rephrase import keyword_query, sub_queries
from rag.retrieval.rerank import EmbeddingReranker
from rag.retrieval.routing import DocumentRouter
from rag.stores.memory import ExactVectorStore

EMB = DeterministicFakeEmbedding(size=16)
FILINGS = {
    "ACME_2023_10K": ("Acme Rockets annual report 2023", [
        "Revenue grew to 4.9 billion and revenue from launches doubled.", "Gross margin fell on steel prices.",
        "Capital expenditure was 520 million for a new plant.", "The dividend was raised to 45 cents."]),
    "GLOBEX_2023_10K": ("Globex Foods annual report 2023", [
        "Revenue was 3.1 billion, in line with the prior year, as volumes of the food segment were stable.",
        "Inventories were 310 million at year end.", "The company issued green bonds to fund terminals.", "Litigation is described in note 14."]),
    "INITECH_2022_10K": ("Initech annual report 2022", [
        "Revenue rose on software licences and revenue per seat.", "Staplers were recalled.",
        "Operating income was 80 million.", "The company has 900 employees."]),
}


def filing_chunks() -> list[Document]:
    return [Document(page_content=text, id=f"{name}#{i}", metadata={
        "doc_id": name, "doc_name": name, "chunk_index": i, "title": title, "page": i})
        for name, (title, texts) in FILINGS.items() for i, text in enumerate(texts)]


@pytest.fixture
def chunks() -> list[Document]:
    return filing_chunks()


@pytest.fixture
def bm25(chunks) -> Resource:
    return Resource.from_retriever("filings", BM25Retriever.from_documents(chunks))


@pytest.fixture
def router(chunks) -> DocumentRouter:
    return DocumentRouter.from_documents(chunks, key="doc_name", fields=["title"])


def names(candidates) -> list[str]:
    return [c.document.metadata["doc_name"] for c in candidates]


def test_routing_both_filters_the_search_and_boosts_the_fused_scores(bm25, router):
    question = "What was Globex revenue in 2023?"
    both = retrieve(question, bm25, router=router, routing="both", k=10, fetch_k=10, token_counter="chars")
    assert set(names(both.stages["candidates/filings"])) == {"GLOBEX_2023_10K"}
    assert "filtered" in both.stages and both.extras["route"]["values"] == ["GLOBEX_2023_10K"]
    only_filter = retrieve(question, bm25, router=router, routing="filter", k=10, fetch_k=10, token_counter="chars")
    assert set(names(only_filter.stages["candidates/filings"])) == {"GLOBEX_2023_10K"}
    assert "filtered" not in only_filter.stages
    boost = retrieve(question, bm25, router=router, routing="boost", route_weight=2.0, k=10, fetch_k=10,
                     token_counter="chars")
    assert len(set(names(boost.stages["candidates/filings"]))) == 3       # nothing filtered out
    assert names(boost.stages["fused"])[0] != "GLOBEX_2023_10K"           # BM25 prefers the other revenues
    assert names(boost.stages["filtered"])[0] == "GLOBEX_2023_10K"        # the route lifts Globex's chunk


class ScaledRetriever(BaseRetriever):
    """Fixed documents whose scores are multiplied by `factor` (the scale of a first stage)."""

    docs: list[Document]
    factor: float = 1.0

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        return [Document(page_content=d.page_content, id=d.id,
                         metadata={**d.metadata, "score": self.factor * (len(self.docs) - i)})
                for i, d in enumerate(self.docs)]


@settings(max_examples=25, deadline=None)
@given(factor=st.floats(min_value=1e-4, max_value=1e4), weight=st.floats(min_value=0.05, max_value=2.0))
def test_the_route_boost_does_not_depend_on_the_scale_of_the_fused_scores(factor, weight):
    docs, router = filing_chunks(), DocumentRouter.from_documents(filing_chunks(), key="doc_name", fields=["title"])

    def boosted(scale: float) -> list[str]:
        resource = Resource.from_retriever("r", ScaledRetriever(docs=docs, factor=scale))
        result = retrieve("Globex inventories in 2023", resource, router=router, routing="boost",
                          route_weight=weight, k=len(docs), fetch_k=len(docs), max_tokens=None)
        return [c.document.id for c in result.stages["filtered"]]

    assert boosted(factor) == boosted(1.0)


def test_rerank_depth_reranks_the_top_candidates_and_keeps_the_rest_in_order(bm25):
    reranker = EmbeddingReranker(embedding=EMB)
    deep = retrieve("revenue million", bm25, reranker=reranker, k=20, fetch_k=20, token_counter="chars")
    result = retrieve("revenue million", bm25, reranker=reranker, rerank_depth=2, k=20, fetch_k=20,
                      token_counter="chars")
    fused = [c.document.id for c in result.stages["fused"]]
    reranked = [c.document.id for c in result.stages["reranked"]]
    assert len(fused) > 3 and set(reranked[:2]) == set(fused[:2]) and reranked[2:] == fused[2:]
    assert sorted(c.document.id for c in deep.stages["reranked"]) == sorted(fused)
    blended = retrieve("revenue million", bm25, reranker=reranker, rerank_depth=2, rerank_weight=0.5, k=20,
                       fetch_k=20, token_counter="chars")
    assert [c.document.id for c in blended.stages["reranked"]][2:] == fused[2:]


def test_question_weight_sets_the_share_of_the_question_against_its_rephrasings(chunks):
    dense = Resource.from_retriever("dense", ExactVectorStore.from_documents(chunks, EMB).as_retriever())
    question = "How did Acme's gross margin change with steel prices?"
    own = [c.document.id for c in retrieve(question, dense, k=30, fetch_k=30).stages["fused"]]
    variant = [c.document.id for c in retrieve(keyword_query(question), dense, k=30, fetch_k=30).stages["fused"]]
    assert own != variant

    def fused(weight: float) -> list[str]:
        result = retrieve(question, dense, rephrase=["keywords"], question_weight=weight, fusion="convex",
                          k=30, fetch_k=30)
        return [c.document.id for c in result.stages["fused"]]

    assert fused(1.0)[: len(own)] == own and fused(0.0)[: len(variant)] == variant


def test_a_token_counter_object_sizes_the_context(bm25):
    result = retrieve("revenue", bm25, k=12, fetch_k=12, max_tokens=30, token_counter=CharTokenCounter())
    assert result.extras["token_counter"] == "chars/4" == result.extras["settings"]["token_counter"]
    assert all(d.metadata["tokens"] == (len(d.page_content) + 3) // 4 for d in result.context)
    assert sum(d.metadata["tokens"] for d in result.context) <= 30
    by_name = retrieve("revenue", bm25, k=12, fetch_k=12, max_tokens=30, token_counter="chars")
    assert [d.page_content for d in by_name.context] == [d.page_content for d in result.context]

    class Words:
        name = "words"

        def count(self, text: str) -> int:
            return len(text.split())

        def truncate(self, text: str, max_tokens: int) -> str:
            return " ".join(text.split()[:max_tokens])

    words = retrieve("revenue", bm25, k=12, fetch_k=12, max_tokens=20, token_counter=Words())
    assert sum(len(d.page_content.split()) for d in words.context) <= 20 and words.extras["token_counter"] == "words"


@pytest.mark.parametrize(("option", "message"), [
    ({"routing": "sideways"}, "routing"),
    ({"rerank_depth": 0}, "rerank_depth"),
    ({"question_weight": 1.5}, "question_weight"),
    ({"token_counter": "bytes"}, "token_counter"),
    ({"token_counter": object()}, "token_counter"),
])
def test_bad_options_are_config_errors_naming_the_option(bm25, option, message):
    with pytest.raises(ConfigError, match=message):
        retrieve("revenue", bm25, **option)


def test_the_sentence_reranker_scores_each_chunk_by_its_best_sentence(chunks):
    question = "What is the capex? Capital expenditure is purchases of property and plant. Answer in millions."
    assert sub_queries(question) == [question, "Capital expenditure is purchases of property and plant."]
    whole = EmbeddingReranker(embedding=EMB)
    per_part = [{d.id: s for d, s in whole.rerank(part, chunks)} for part in sub_queries(question)]
    got = {d.id: s for d, s in EmbeddingReranker(embedding=EMB, by_sentence=True).rerank(question, chunks)}
    assert got == pytest.approx({i: max(p[i] for p in per_part) for i in got})
    assert sub_queries("One sentence only?") == ["One sentence only?"]
