"""An LLM's answer goes through the same checks: supported, unsupported and off-topic answers are told apart."""

from __future__ import annotations

import itertools

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import GenericFakeChatModel

from rag.base.errors import ConfigError
from rag.compose.generator import RAG
from rag.compose.resource import Resource
from rag.base.answer import NO_ANSWER
from rag.checks.postprocess import answer_checks
from rag.generation.rag_with_source import rag_chain_from_docs

TEXTS = ["Acme opened a plant in Lyon in 2023.", "Acme revenue grew 10% in 2024."]
QUESTION = "In which city did Acme open a plant?"


def _checks(answer: str, **options) -> dict:
    """The `checks` extra of a RAG whose fake chat model always answers `answer` (uncited, as models often do)."""
    resource = Resource.from_texts("reports", TEXTS, embedding=DeterministicFakeEmbedding(size=16),
                                   search_kwargs={"k": 2})
    llm = GenericFakeChatModel(messages=itertools.cycle([answer]))
    rag = RAG(resources=[resource], generation_chain=rag_chain_from_docs(llm),
              extras={"checks": answer_checks(embedding=None, **options)})
    return rag.chain().invoke(QUESTION)["checks"]


@pytest.mark.parametrize(("answer", "flags", "answers"), [
    ("Acme opened its plant in Lyon.", ["uncited_sentences"], True),
    ("The plant is on the Moon, built by cats.", ["unsupported_sentences", "uncited_sentences",
                                                  "does_not_answer"], False),
    ("Acme revenue grew 10% in 2024.", ["uncited_sentences", "does_not_answer"], False),
    ("I don't know.", ["no_answer"], None),
])
def test_an_llm_answer_is_flagged_when_unsupported_or_not_answering(answer, flags, answers):
    checks = _checks(answer)
    assert checks["flags"] == flags
    assert checks["support"][0]["answers"] is answers


@pytest.mark.parametrize(("answer", "kept"), [
    ("Acme opened its plant in Lyon [1].", True),
    ("Acme opened its plant in Lyon.", False),                # supported, but cites nothing
    ("The plant is on the Moon, built by cats.", False),     # not supported by the context
    ("Acme revenue grew 10% in 2024.", False),                # supported, but does not answer the question
    ("I don't know.", True),
])
def test_by_default_an_unsupported_llm_answer_is_kept_and_flagged_and_refuse_replaces_it(answer, kept):
    flagged = _checks(answer)   # the documented default: on_unsupported="flag"
    assert flagged["final_answer"] == answer
    refused = _checks(answer, on_unsupported="refuse")
    assert refused["final_answer"] == (answer if kept else NO_ANSWER)
    assert refused["flags"] == flagged["flags"]   # the flags still say why
    if not kept:
        assert refused["citations"]["sources"] == []
        assert {"unsupported_sentences", "uncited_sentences", "does_not_answer"} & set(refused["flags"])


def test_an_unknown_on_unsupported_setting_is_refused_with_the_valid_ones():
    with pytest.raises(ConfigError, match="flag.*refuse.*'drop'"):
        answer_checks(embedding=None, on_unsupported="drop")
