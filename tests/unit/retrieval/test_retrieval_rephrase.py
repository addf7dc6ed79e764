from __future__ import annotations

import pytest
from langchain_core.language_models import FakeListChatModel
from langchain_tests.integration_tests import RetrieversIntegrationTests
from retrieval_corpus import filing_chunks

from rag.base.errors import ConfigError
from rag.retrieval.lexical import BM25Retriever
from rag.retrieval.rephrase import (
    FusedQueryRetriever,
    Rephraser,
    feedback_terms,
    keyword_query,
)


def test_keyword_query_drops_question_and_stop_words_but_keeps_entities():
    assert keyword_query("What was Acme's total revenue in fiscal 2023?") == "Acme total revenue fiscal 2023"
    assert keyword_query("How much did the US segment grow?") == "US segment grow"
    assert keyword_query("what?") == "what?"


def test_hyde_and_multi_query_use_the_llm():
    llm = FakeListChatModel(responses=["Acme's revenue was $4.9 billion in 2023.",
                                       "1. Acme 2023 sales?\n2) How large was Acme's turnover?\n- Acme revenue"])
    out = Rephraser(modes=["hyde", "multi_query"], llm=llm, n=3).rephrase("What was Acme's revenue?")
    assert out == ["What was Acme's revenue?", "Acme's revenue was $4.9 billion in 2023.", "Acme 2023 sales?",
                   "How large was Acme's turnover?", "Acme revenue"]


def test_llm_modes_without_llm_and_unknown_modes_fail_fast():
    with pytest.raises(ConfigError, match="need an llm"):
        Rephraser(modes=["hyde"])
    with pytest.raises(ConfigError, match="valid: keywords, feedback, hyde, multi_query"):
        Rephraser(modes=["synonyms"])


def test_feedback_terms_come_from_top_chunks_not_the_question(chunks):
    terms = feedback_terms("Acme revenue", chunks[:10], n_terms=3)
    assert "acme" not in [t.lower() for t in terms] and "revenue" not in terms
    assert "corporation" in terms or "robots" in terms or "expenditure" in terms


def test_feedback_mode_searches_first_then_expands(chunks):
    base = BM25Retriever.from_documents(chunks)
    variants = Rephraser(modes=["feedback"], retriever=base).rephrase("Acme capital expenditure",
                                                                       search_kwargs={"filter": {"company": "ACME"}})
    assert len(variants) == 2 and variants[1].startswith("Acme capital expenditure ")


def test_fused_retriever_merges_results_of_every_variant(chunks):
    llm = FakeListChatModel(responses=["Globex green bonds terminal upgrades"])
    base = BM25Retriever.from_documents(chunks)
    fused = FusedQueryRetriever(retriever=base, rephraser=Rephraser(modes=["hyde"], llm=llm), k=3)
    queries, hits = fused.search_with_scores("How was the airport work financed?")
    assert queries[1] == "Globex green bonds terminal upgrades"
    ids = [d.id for d, _ in hits]
    assert "GLOBEX_2023_10K-3" in ids  # found only through the HyDE passage
    assert "GLOBEX_2023_10K-3" not in [d.id for d in base.invoke("How was the airport work financed?", k=3)]
    assert set(hits[0][0].metadata["scores"]) >= {"rrf"}
    assert len({d.id for d, _ in hits}) == len(hits)


def test_fused_retriever_passes_filter_down(chunks):
    fused = FusedQueryRetriever(retriever=BM25Retriever.from_documents(chunks), k=5)
    docs = fused.invoke("What was the revenue?", filter={"year": 2022})
    assert docs and all(d.metadata["year"] == 2022 for d in docs)


class TestFusedQueryRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[FusedQueryRetriever]:
        return FusedQueryRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"retriever": BM25Retriever.from_documents(filing_chunks())}

    @property
    def retriever_query_example(self) -> str:
        return "What was Acme's revenue and capital expenditure?"
