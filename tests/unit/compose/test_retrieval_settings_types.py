"""`RetrievalSettings` checks every field when it is built, before any search: a bad value is a
`ConfigError` naming the setting, what it got and what is valid."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from rag.base.errors import ConfigError
from rag.base.portable import MAX_K
from rag.compose.resource import Resource
from rag.compose.retrieval_settings import retrieval_settings
from rag.compose.retrieve import retrieve
from rag.retrieval.budget import CharTokenCounter
from rag.retrieval.rephrase import Rephraser
from rag.retrieval.rerank import EmbeddingReranker
from rag.retrieval.routing import DocumentRouter
from rag.retrieval.sections import SectionRouter

#: what each object-valued setting takes, one good value each
GOOD: dict[str, Any] = {
    "rephrase": Rephraser(modes=["keywords"]),
    "llm": FakeListChatModel(responses=["x"]),
    "router": DocumentRouter({"a": "Acme annual report"}, key="doc_id"),
    "reranker": EmbeddingReranker(embedding=DeterministicFakeEmbedding(size=8)),
    "sections": SectionRouter([]),
    "token_counter": CharTokenCounter(),
}
#: values that are never valid for any of them: plain data, other objects, near-miss strings
JUNK = st.one_of(st.integers(), st.floats(), st.booleans(), st.text(max_size=12).filter(
    lambda t: t not in ("embedding", "auto", "minilm", "approx", "chars", "keywords", "feedback")),
    st.lists(st.integers(), min_size=1, max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.sampled_from([object(), b"bytes", DeterministicFakeEmbedding(size=4)]))


@pytest.mark.parametrize("field", sorted(GOOD))
def test_each_object_setting_takes_its_kind(field: str) -> None:
    assert getattr(retrieval_settings(**{field: GOOD[field]}), field) is GOOD[field]


@settings(max_examples=150)
@given(field=st.sampled_from(sorted(GOOD)), value=JUNK)
def test_a_bad_object_setting_is_refused_when_built_with_what_is_valid(field: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=rf"invalid retrieval setting {field}=.*: (must be|unknown mode)") as err:
        retrieval_settings(**{field: value})
    assert "valid" in str(err.value) or " or None" in str(err.value) or "one of" in str(err.value)


@settings(max_examples=80)
@given(k=st.one_of(st.integers(max_value=0), st.integers(min_value=MAX_K + 1), st.booleans(), st.floats(),
                   st.text(max_size=3)), name=st.sampled_from(["k", "fetch_k"]))
def test_a_bad_k_or_fetch_k_is_refused_as_the_retrievers_refuse_it(k: Any, name: str) -> None:
    with pytest.raises(ConfigError, match=rf"{name} must be a positive integer"):
        retrieval_settings(**{name: k})


def test_an_llm_rephrase_mode_without_an_llm_is_refused_before_the_search() -> None:
    searched = []

    class Spy(Resource):
        def retrieve(self, *args: Any, **kwargs: Any) -> Any:
            searched.append(args)
            return []

    with pytest.raises(ConfigError, match=r"rephrase mode\(s\) \['hyde'\] need llm="):
        retrieve("q", Spy.from_texts("r", ["a"], embedding=DeterministicFakeEmbedding(size=8)), rephrase="hyde")
    assert not searched
    assert retrieval_settings(rephrase="hyde", llm=GOOD["llm"]).rephrase == ["hyde"]


def test_k_zero_is_the_same_error_at_every_door() -> None:
    from rag import RAG

    resource = Resource.from_texts("r", ["a", "b"], embedding=DeterministicFakeEmbedding(size=8))
    doors = {
        "retrieve": lambda: retrieve("q", resource, k=0),
        "chain": lambda: RAG(resources=[resource]).resources_retrieval_chain.invoke("q", {"configurable": {"k": 0}}),
        "plain chain": lambda: RAG(resources=[resource], retrieval="plain").resources_retrieval_chain.invoke(
            "q", {"configurable": {"k": 0}}),
        "search_kwargs": lambda: Resource.from_texts("s", ["a"], embedding=DeterministicFakeEmbedding(size=8),
                                                     search_kwargs={"k": 0}),
    }
    for door, call in doors.items():
        with pytest.raises(ConfigError, match=r"k must be a positive integer, got 0") as err:
            call()
        assert "leave" in str(err.value), door
