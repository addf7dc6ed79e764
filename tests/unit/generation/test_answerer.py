"""The Answerer interface: one answer path, the LLM's context fitted to its window, one-line model errors."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import BaseChatModel, FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from rag import RAG, Answer, Answerer, LLMAnswerer, Resource
from rag.base.errors import ConfigError, ModelError
from rag.base.answer import NO_ANSWER
from rag.generation.rag_with_source import rag_chain_from_docs

DOCS = [Document(page_content="The Colosseum is in Rome.", metadata={"source": "rome.md"}),
        Document(page_content="The Eiffel Tower is in Paris.", metadata={"source": "paris.md"})]


class WindowModel(BaseChatModel):
    """A chat model with a hidden window of `window` tokens (3 characters each) that refuses longer prompts
    the way OpenAI-compatible servers do, and records every prompt it was sent."""

    window: int = 10_000
    message: str = "This model's maximum context length is {window} tokens. However, you requested {n} tokens."
    reply: str = "The Colosseum is in Rome [1]."
    prompts: list[str] = []

    @property
    def _llm_type(self) -> str:
        return "window-model"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        prompt = "\n".join(str(m.content) for m in messages)
        self.prompts.append(prompt)
        tokens = len(prompt) // 3
        if tokens > self.window:
            raise ValueError(self.message.format(window=self.window, n=tokens))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self.reply))])


class BrokenModel(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "broken"

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise ConnectionError("connection refused by 10.0.0.7:8080\nTraceback (most recent call last): ...")


def _long_context(n: int, words: int = 300) -> list[Document]:
    return [Document(page_content=" ".join(f"word{i}x{j}" for j in range(words)), metadata={"source": f"d{i}.md"})
            for i in range(n)]


def test_an_answer_is_its_text_with_fields_that_survive_copies():
    answer = Answer("Rome [1].", cited=[1], confidence=0.8, passage={"n": 1, "text": "x", "label": "a"},
                    flags=["uncited_sentences"])
    assert answer == "Rome [1]." and json.dumps({"a": answer}) == '{"a": "Rome [1]."}'
    for clone in (copy.copy(answer), copy.deepcopy(answer)):
        assert clone == answer and clone.fields() == answer.fields()
    assert answer.replace(refused=True).refused and not answer.refused


def test_a_users_own_answerer_in_ten_lines_goes_through_the_same_checks():
    class FirstSource(Answerer):
        name = "first source"

        def answer(self, question: str, context: Sequence[Document], config: Any = None) -> Answer:
            if not context:
                return Answer(NO_ANSWER, refused=True)
            return Answer(f"{context[0].page_content} [1] [9]", confidence=1.0)

    docs = Resource.from_texts("cities", [d.page_content for d in DOCS], embedding=DeterministicFakeEmbedding(size=8))
    out = RAG(resources=[docs], answerer=FirstSource(), retrieval="plain").chain().invoke("Where is it?")
    answer = out["answer"]
    assert isinstance(answer, Answer)
    assert answer.cited == [1] and answer.invalid == [9] and "[9]" not in answer   # dangling marker removed
    assert answer.answerer == "first source" and answer.support[0]["label"] == "supported"


def test_an_llm_answer_citing_nothing_is_flagged_and_refused_when_set():
    flagged = rag_chain_from_docs(FakeListChatModel(responses=["Rome, probably."]), checks_embedding=None)
    out = flagged.invoke({"question": "Where is the Colosseum?", "context": DOCS})
    assert out == "Rome, probably." and "uncited_sentences" in out.flags and not out.refused
    refusing = rag_chain_from_docs(FakeListChatModel(responses=["Rome, probably."]), checks_embedding=None,
                                   on_unsupported="refuse")
    out = refusing.invoke({"question": "Where is the Colosseum?", "context": DOCS})
    assert out == NO_ANSWER and out.refused and out.cited == []


def test_rag_takes_llm_or_answerer_but_not_both():
    docs = Resource.from_texts("c", ["x"], embedding=DeterministicFakeEmbedding(size=8))
    with pytest.raises(ConfigError, match="one of llm=, answerer= and generation_chain="):
        RAG(resources=[docs], llm=FakeListChatModel(responses=["a"]), answerer=LLMAnswerer(FakeListChatModel(responses=["a"])))
    rag = RAG(resources=[docs], llm=FakeListChatModel(responses=["a"]))
    assert "FakeListChatModel" in rag.describe_answerer()


def test_the_context_is_fitted_to_the_models_window_in_order():
    model = WindowModel(window=1_000, prompts=[])
    answerer = LLMAnswerer(model, context_window=1_000, max_answer_tokens=100)
    out = answerer.answer("Where is the Colosseum?", _long_context(20))
    assert out == "The Colosseum is in Rome [1]." and len(model.prompts) == 1
    ids = [int(n) for n in re.findall(r'<source id="(\d+)"', model.prompts[0])]
    assert ids == list(range(1, len(ids) + 1)) and 1 <= len(ids) < 20    # a prefix: numbers unchanged
    assert len(model.prompts[0]) / 3 <= 1_000 - 100


def test_a_length_refusal_is_retried_once_at_the_window_the_error_names():
    model = WindowModel(window=1_200, prompts=[])
    out = LLMAnswerer(model).answer("Where?", _long_context(30))   # believes the default 8,192 tokens
    assert out.startswith("The Colosseum") and len(model.prompts) == 2
    assert len(model.prompts[1]) / 3 <= 1_200


def test_a_length_refusal_naming_no_window_halves_the_context_once_then_reports():
    model = WindowModel(window=1_500, message="prompt is too long", prompts=[])
    out = LLMAnswerer(model, context_window=4_000).answer("Where?", _long_context(40))
    assert out and len(model.prompts) == 2
    tiny = WindowModel(window=10, message="prompt is too long", prompts=[])
    with pytest.raises(ModelError, match="prompt is too long") as err:
        LLMAnswerer(tiny, context_window=4_000).answer("Where?", _long_context(40))
    assert len(tiny.prompts) == 2 and "\n" not in str(err.value)


@pytest.mark.parametrize("form", ["answer", "aanswer", "stream", "astream"])
def test_every_form_retries_a_length_refusal_once_and_reports_a_second_as_one_line(form):
    import asyncio

    async def collect(agen):
        return [piece async for piece in agen]

    def run(answerer: LLMAnswerer, context: list[Document]) -> str:
        call = getattr(answerer, form)("Where?", context)
        if form == "answer":
            return str(call)
        if form == "aanswer":
            return str(asyncio.run(call))
        pieces = asyncio.run(collect(call)) if form == "astream" else list(call)
        return "".join(str(p) for p in pieces)

    model = WindowModel(window=1_200, prompts=[])
    assert run(LLMAnswerer(model), _long_context(30)).startswith("The Colosseum")
    assert len(model.prompts) == 2 and len(model.prompts[1]) / 3 <= 1_200
    tiny = WindowModel(window=10, message="prompt is too long", prompts=[])
    with pytest.raises(ModelError, match="prompt is too long") as err:
        run(LLMAnswerer(tiny, context_window=4_000), _long_context(40))
    assert len(tiny.prompts) == 2 and "\n" not in str(err.value)


def test_any_model_failure_is_one_line_naming_the_model():
    rag = RAG(resources=[Resource.from_texts("c", ["x"], embedding=DeterministicFakeEmbedding(size=8))],
              llm=BrokenModel())
    with pytest.raises(ModelError) as err:
        rag.chain().invoke("anything?")
    message = str(err.value)
    assert "\n" not in message and "BrokenModel" in message and "ConnectionError" in message


def test_a_window_too_small_for_the_prompt_is_a_clear_error():
    with pytest.raises(ConfigError, match="leaves no room for context"):
        LLMAnswerer(WindowModel(prompts=[]), context_window=300, max_answer_tokens=280).answer("Where?", DOCS)


@settings(max_examples=30, deadline=None)
@given(window=st.integers(min_value=700, max_value=6_000), answer_tokens=st.integers(min_value=16, max_value=400),
       sizes=st.lists(st.integers(min_value=1, max_value=2_000), min_size=1, max_size=30))
def test_the_fitted_prompt_never_exceeds_the_window(window, answer_tokens, sizes):
    model = WindowModel(window=window, prompts=[])
    docs = [Document(page_content="x" * n) for n in sizes]
    answerer = LLMAnswerer(model, context_window=window, max_answer_tokens=answer_tokens)
    answerer.answer("What is x?", docs)
    assert len(model.prompts) == 1 and len(model.prompts[0]) // 3 + answer_tokens <= window


def test_a_documents_own_footnote_markers_are_never_the_answers_citations():
    """Issue 37, item 1, on the answer path: chunks indexed before markers were neutralised at indexing."""
    from rag.generation.factory import fallback_answerer

    context = [Document(page_content="Paris is the capital of France.[2] It lies on the Seine.",
                        metadata={"source": "wiki.md"}),
               Document(page_content="Bananas are rich in potassium.", metadata={"source": "audited-report.pdf"})]
    seen: list[str] = []

    class Recorder(Answerer):
        def answer(self, question, context, config=None):
            seen.append(context[0].page_content)
            return Answer("Paris. [1]")

    out = rag_chain_from_docs(fallback_answerer(embedding=None), checks_embedding=None).invoke(
        {"question": "What is the capital of France?", "context": context})
    assert out.cited == [1] and "[^2]" in out and "[2]" not in out
    rag_chain_from_docs(Recorder(), checks_embedding=None).invoke({"question": "q", "context": context})
    assert seen == ["Paris is the capital of France.[^2] It lies on the Seine."]   # what a model is shown
