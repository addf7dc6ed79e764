from __future__ import annotations

import pytest
from langchain_core.language_models import FakeListChatModel

from rag import Resource, retrieve
from rag.base.errors import ConfigError, RemovedError
from rag.retrieval.lexical import BM25Retriever
from rag.retrieval.rephrase import (
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


def test_the_pipeline_fuses_the_results_of_every_variant(chunks):
    llm = FakeListChatModel(responses=["Globex green bonds terminal upgrades"])
    base = BM25Retriever.from_documents(chunks)
    resource = Resource.from_retriever("filings", base)
    question = "How was the airport work financed?"
    result = retrieve(question, resource, rephrase=Rephraser(modes=["hyde"], llm=llm), k=3, max_tokens=None)
    assert result.rephrased_questions == ["Globex green bonds terminal upgrades"]
    ids = [d.id for d in result.context]
    assert "GLOBEX_2023_10K-3" in ids  # found only through the HyDE passage
    assert "GLOBEX_2023_10K-3" not in [d.id for d in base.invoke(question, k=3)]
    assert set(result.context[0].metadata["scores"]) >= {"rrf"}
    assert len(set(ids)) == len(ids)


def test_rephrased_searches_keep_the_filter(chunks):
    resource = Resource.from_retriever("filings", BM25Retriever.from_documents(chunks))
    docs = retrieve("What was the revenue?", resource, rephrase=["keywords"], k=5, filter={"year": 2022}).context
    assert docs and all(d.metadata["year"] == 2022 for d in docs)


def test_the_removed_wrapper_names_the_pipeline_setting():
    with pytest.raises(RemovedError, match="rephrase"):
        from rag.retrieval.rephrase import FusedQueryRetriever  # noqa: F401
