"""Every user mistake through a public API raises a `RagError` subclass with an actionable message."""

from __future__ import annotations

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag import RAG, KnowledgeBase, Resource, airag, retrieve
from rag.base.errors import ConfigError, FilterError, InputError, RagError
from rag.compose.chat import InMemoryMessageStore
from rag.generation.extractive import ExtractiveAnswerer
from rag.models.pricing import register_price
from rag.checks.support import annotate_support

EMB = DeterministicFakeEmbedding(size=8)


@pytest.fixture
def resource():
    return Resource.from_texts("notes", ["Rome is in Italy.", "Paris is in France."], embedding=EMB)


@pytest.mark.parametrize("k", [0, -1, True, 2.5])
def test_retrieve_rejects_a_bad_k(resource, k):
    with pytest.raises(ConfigError, match="invalid retrieval setting k="):
        retrieve("Where is Rome?", resource, k=k)


@pytest.mark.parametrize("k", [0, -3])
def test_airag_rejects_a_bad_k(resource, k):
    with pytest.raises(ConfigError, match="k"):
        airag(RAG(resources=[resource]), "Where is Rome?", k=k)


@pytest.mark.parametrize("search_kwargs", [{"k": 0}, {"fetch_k": -1}, {"kk": 3}, {"filter": [{"a": 1}]},
                                           {"filter": "year > 2020"}])
def test_resource_rejects_bad_search_kwargs(resource, search_kwargs):
    with pytest.raises(ConfigError, match="invalid Resource: search_kwargs"):
        Resource(name="x", retriever=resource.retriever, search_kwargs=search_kwargs)


@pytest.mark.parametrize("flt", [[{"a": 1}], "a = 1", 3, {"a": {"$gtt": 1}}])
def test_a_bad_filter_through_the_chain_is_a_filter_or_config_error(resource, flt):
    chain = RAG(resources=[resource]).chain()
    with pytest.raises((FilterError, ConfigError)):
        chain.invoke("q", config={"configurable": {"retrieval_chain": {"notes": {"search_kwargs": {"filter": flt}}}}})


def test_duplicate_resource_names_are_a_config_error(resource):
    with pytest.raises(ConfigError, match=r"resource names must be unique; duplicated: \['notes'\]"):
        RAG(resources=[resource, resource])


def test_a_knowledge_base_given_as_a_resource_says_how_to_wrap_it(tmp_path):
    kb = KnowledgeBase("notes", tmp_path, embedding=EMB)
    with pytest.raises(ConfigError, match=r"kb.as_resource\(\)"):
        RAG(resources=[kb])


@pytest.mark.parametrize("question", ["", "   ", "\n"])
def test_retrieve_rejects_an_empty_question_like_the_chain(resource, question):
    with pytest.raises(InputError, match="non-empty"):
        retrieve(question, resource)
    with pytest.raises(InputError, match="non-empty"):
        RAG(resources=[resource]).chain().invoke(question)


@pytest.mark.parametrize("value", [{"q": "x"}, {}, {"questions": "x", "other": 1}])
def test_a_dict_without_question_names_the_missing_key(resource, value):
    with pytest.raises(InputError, match=r"no 'question' key \(got keys"):
        RAG(resources=[resource]).chain().invoke(value)


@pytest.mark.parametrize("call", [
    lambda: ExtractiveAnswerer(max_sentences=0),
    lambda: ExtractiveAnswerer(min_confidence=2),
    lambda: InMemoryMessageStore(max_messages=1),
    lambda: register_price("", input_per_million=1, output_per_million=1),
    lambda: register_price("m", input_per_million=-1, output_per_million=1),
    lambda: annotate_support("Rome is in Italy.", ["Rome is in Italy."], embedding=3),
], ids=["max_sentences", "min_confidence", "max_messages", "price-name", "price-value", "support-embedding"])
def test_generation_mistakes_are_config_errors(call):
    with pytest.raises(ConfigError):
        call()


def test_every_error_is_a_rag_error():
    for cls in (ConfigError, FilterError, InputError):
        assert issubclass(cls, RagError) and issubclass(cls, ValueError)


def test_unknown_retrieve_option_lists_the_valid_ones(resource):
    with pytest.raises(ConfigError, match=r"unknown retrieve option\(s\) \['kk'\]; valid: k, fetch_k"):
        retrieve("q", resource, kk=3)
