"""Real OpenAI clients (the `openai` SDK, LangChain's `ChatOpenAI`) against a running `rag serve` app."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGenerationChunk

from rag.compose.generator import RAG
from rag.compose.resource import Resource
from rag.config.models import ServerConfig
from rag.generation.extractive import ExtractiveAnswerer
from rag.generation.rag_with_source import rag_chain_from_docs
from rag.testing.live_server import live_server

openai = pytest.importorskip("openai")

TOKEN = "test-token-123"
TEXTS = [
    ("Acme revenue grew 10% in 2024.", {"tenant": "acme", "source": "/data/acme-2024.pdf", "page": 2}),
    ("Acme opened a plant in Lyon in 2023.", {"tenant": "acme", "source": "/data/acme-2023.pdf", "page": 0}),
    ("Globex revenue fell 5% in 2024.", {"tenant": "globex", "source": "/data/globex.md"}),
]
ANSWER = "Acme revenue grew 10% [1]."


class UsageFake(GenericFakeChatModel):
    """Answers ANSWER word by word and reports token usage on the last piece, as OpenAI's models do."""

    def _pieces(self) -> Iterator[ChatGenerationChunk]:
        words = ANSWER.split(" ")
        for i, word in enumerate(words):
            last = i == len(words) - 1
            usage = {"input_tokens": 40, "output_tokens": len(words), "total_tokens": 40 + len(words)}
            yield ChatGenerationChunk(message=AIMessageChunk(content=word if i == 0 else " " + word,
                                                             usage_metadata=usage if last else None))

    def _stream(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Iterator[Any]:
        yield from self._pieces()

    async def _astream(self, messages: Any, stop: Any = None, run_manager: Any = None,
                       **kwargs: Any) -> AsyncIterator[Any]:
        for chunk in self._pieces():
            yield chunk


def _resource() -> Resource:
    return Resource.from_texts("reports", [t for t, _ in TEXTS], metadatas=[m for _, m in TEXTS],
                               embedding=DeterministicFakeEmbedding(size=32), search_kwargs={"k": 3})


def _serve(rag: RAG) -> Any:
    from rag.server.app import create_app

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAG_API_TOKEN", TOKEN)   # read once, when the app is built
        return create_app(rag, settings=ServerConfig(tenant_filter={"tenant": "acme"}, support_scoring="lexical"))


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    rag = RAG(resources=[_resource()], generation_chain=rag_chain_from_docs(UsageFake(messages=iter(()))))
    with live_server(_serve(rag)) as base:
        yield base + "/v1"


@pytest.fixture(scope="module")
def extractive_url() -> Iterator[str]:
    rag = RAG(resources=[_resource()], generation_chain=rag_chain_from_docs(ExtractiveAnswerer()))
    with live_server(_serve(rag)) as base:
        yield base + "/v1"


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_sdk_lists_the_model(url):
    client = openai.OpenAI(base_url=url, api_key=TOKEN)
    assert [m.id for m in client.models.list()] == ["rag"]


def test_sdk_sync_completion_has_answer_usage_and_sources(url):
    client = openai.OpenAI(base_url=url, api_key=TOKEN)
    completion = client.chat.completions.create(model="rag", messages=_user("How did Acme revenue change?"))
    message = completion.choices[0].message
    assert message.content == ANSWER
    assert completion.usage.prompt_tokens == 40 and completion.usage.completion_tokens == 5
    ext = message.model_extra["rag"]        # the SDK keeps unknown fields
    assert ext["cited"] == [1] and ext["sources"][0]["source"].startswith("acme-")   # no server path
    assert ext["usage"]["estimated"] is False


def test_sdk_raw_response_carries_the_extension_field(url):
    client = openai.OpenAI(base_url=url, api_key=TOKEN)
    raw = client.chat.completions.with_raw_response.create(model="rag", messages=_user("Acme revenue"),
                                                           extra_body={"rag": {"k": 1}})
    body = raw.http_response.json()
    assert raw.parse().choices[0].message.content == ANSWER
    (source,) = body["choices"][0]["message"]["rag"]["sources"]
    assert source["n"] == 1 and source["cited"] is True and source["support"]


async def test_sdk_async_completion(url):
    client = openai.AsyncOpenAI(base_url=url, api_key=TOKEN)
    completion = await client.chat.completions.create(model="rag", messages=_user("Acme revenue"))
    assert completion.choices[0].message.content == ANSWER
    assert completion.usage.total_tokens == 45
    await client.close()


def test_sdk_stream_gives_text_then_usage_and_sources_in_the_last_chunk(url):
    client = openai.OpenAI(base_url=url, api_key=TOKEN)
    chunks = list(client.chat.completions.create(model="rag", messages=_user("Acme revenue"), stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == ANSWER
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop" and last.usage.total_tokens == 45
    ext = last.choices[0].delta.model_extra["rag"]
    assert ext["answer"] == ANSWER and ext["sources"][0]["cited"] is True


async def test_sdk_async_stream(url):
    client = openai.AsyncOpenAI(base_url=url, api_key=TOKEN)
    stream = await client.chat.completions.create(model="rag", messages=_user("Acme revenue"), stream=True)
    pieces = [c.choices[0].delta.content or "" async for c in stream]
    assert "".join(pieces) == ANSWER
    await client.close()


def test_sdk_without_the_token_raises_authentication_error(url):
    client = openai.OpenAI(base_url=url, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as info:
        client.chat.completions.create(model="rag", messages=_user("q"))
    assert info.value.status_code == 401 and "bearer token" in info.value.message


def test_sdk_bad_setting_raises_unprocessable_with_the_message(url):
    client = openai.OpenAI(base_url=url, api_key=TOKEN, max_retries=0)
    with pytest.raises(openai.UnprocessableEntityError) as info:
        client.chat.completions.create(model="rag", messages=_user("q"), extra_body={"rag": {"k": 500}})
    assert "valid: 1..20" in info.value.message and info.value.code == "invalid_setting"


def test_tenant_filter_keeps_other_tenants_out(url):
    client = openai.OpenAI(base_url=url, api_key=TOKEN)
    completion = client.chat.completions.create(model="rag", messages=_user("Globex revenue"),
                                                extra_body={"rag": {"filter": {"tenant": "globex"}}})
    assert completion.choices[0].message.model_extra["rag"]["sources"] == []
    everything = client.chat.completions.create(model="rag", messages=_user("revenue"))
    assert {s["source"] for s in everything.choices[0].message.model_extra["rag"]["sources"]} == {
        "acme-2024.pdf", "acme-2023.pdf"}


def test_extractive_answerer_through_the_sdk(extractive_url):
    client = openai.OpenAI(base_url=extractive_url, api_key=TOKEN)
    completion = client.chat.completions.create(model="rag", messages=_user("Where did Acme open a plant?"))
    assert "Lyon" in completion.choices[0].message.content
    assert completion.usage.completion_tokens > 0
    assert completion.choices[0].message.model_extra["rag"]["usage"]["estimated"] is True
    streamed = client.chat.completions.create(model="rag", messages=_user("Where did Acme open a plant?"),
                                              stream=True)
    chunks = list(streamed)
    assert "Lyon" in "".join(c.choices[0].delta.content or "" for c in chunks) and chunks[-1].usage.total_tokens


def test_langchain_chat_openai_invoke_and_stream(url):
    chat_openai = pytest.importorskip("langchain_openai").ChatOpenAI
    llm = chat_openai(base_url=url, api_key=TOKEN, model="rag", max_retries=0)
    reply = llm.invoke([("system", "Answer from the sources."), ("human", "How did Acme revenue change?")])
    assert isinstance(reply, AIMessage) and reply.content == ANSWER
    assert reply.usage_metadata["total_tokens"] == 45
    streamed = "".join(str(chunk.content) for chunk in llm.stream("Acme revenue"))
    assert streamed == ANSWER


def test_langchain_chat_openai_follow_up_uses_the_history(extractive_url):
    chat_openai = pytest.importorskip("langchain_openai").ChatOpenAI
    llm = chat_openai(base_url=extractive_url, api_key=TOKEN, model="rag", max_retries=0)
    reply = llm.invoke([("human", "Where did Acme open a plant?"), ("ai", "In Lyon [1]."),
                        ("human", "When did it open?")])
    assert "2023" in reply.content


def test_answers_do_not_leak_between_concurrent_clients(url):
    from concurrent.futures import ThreadPoolExecutor

    client = openai.OpenAI(base_url=url, api_key=TOKEN)
    ks = list(itertools.islice(itertools.cycle([1, 2]), 8))
    with ThreadPoolExecutor(4) as pool:
        done = list(pool.map(lambda k: client.chat.completions.create(
            model="rag", messages=_user("Acme"), extra_body={"rag": {"k": k}}), ks))
    assert [len(c.choices[0].message.model_extra["rag"]["sources"]) for c in done] == ks
