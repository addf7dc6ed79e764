"""Fixtures shared by the unit tests of answers (generation, checks, compose, models): a fake chat model that
reports token usage, small corpora."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

from rag.compose.resource import Resource


class UsageFakeChatModel(FakeListChatModel):
    """FakeListChatModel whose messages carry `usage_metadata` (input = prompt words, output = answer words).

    With `answer_for`, the answer is computed from the prompt instead of cycling through `responses`,
    which keeps concurrent requests independent.
    """

    answer_for: Callable[[str], str] | None = None
    model_name: str = "fake-usage-model"

    def _answer(self, messages: list[BaseMessage]) -> str:
        if self.answer_for is not None:
            return self.answer_for(str(messages[-1].content))
        return self._call(messages)

    def _usage(self, messages: list[BaseMessage], answer: str) -> dict[str, int]:
        prompt_tokens = sum(len(str(m.content).split()) for m in messages)
        return {"input_tokens": prompt_tokens, "output_tokens": len(answer.split()),
                "total_tokens": prompt_tokens + len(answer.split())}

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        answer = self._answer(messages)
        message = AIMessage(content=answer, usage_metadata=self._usage(messages, answer),
                            response_metadata={"model_name": self.model_name})
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _pieces(self, messages: list[BaseMessage]) -> Iterator[ChatGenerationChunk]:
        answer = self._answer(messages)
        words = answer.split(" ")
        for i, word in enumerate(words):
            last = i == len(words) - 1
            yield ChatGenerationChunk(message=AIMessageChunk(
                content=word if i == 0 else " " + word,
                usage_metadata=self._usage(messages, answer) if last else None,
                response_metadata={"model_name": self.model_name} if last else {}))

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        yield from self._pieces(messages)

    async def _astream(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                       **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in self._pieces(messages):
            yield chunk


CITY_TEXTS = [
    "The Eiffel Tower is in Paris. It was completed in 1889 for the World's Fair.",
    "The Colosseum is in Rome. It could hold about 50,000 spectators.",
    "The Sagrada Familia is in Barcelona. Antoni Gaudi designed the basilica.",
]


@pytest.fixture
def city_docs() -> list[Document]:
    return [Document(page_content=t, metadata={"source": f"/data/city{i}.txt", "page": i})
            for i, t in enumerate(CITY_TEXTS)]


@pytest.fixture
def city_resource(tmp_path) -> Resource:
    return Resource.from_texts("cities", CITY_TEXTS, metadatas=[{"source": f"city{i}.txt"} for i in range(3)],
                               embedding=DeterministicFakeEmbedding(size=32), persist_directory=str(tmp_path / "chroma"))


@pytest.fixture
def fake_llm_cls() -> type[UsageFakeChatModel]:
    """The usage-reporting fake chat model class (tests cannot import conftest as a module)."""
    return UsageFakeChatModel
