"""stream_events: event order, content, usage, and independence of concurrent requests."""

from __future__ import annotations

import asyncio
import re
import threading

import pytest

from rag.base.errors import InputError
from rag.compose.generator import RAG
from rag.compose.streaming import EVENT_TYPES, stream_events
from rag.generation.rag_with_source import rag_chain_from_docs


def _answer_about_the_question(prompt: str) -> str:
    # The human message is the question; answer from the city it names, citing a source.
    if "Rome" in prompt or "Colosseum" in prompt:
        return "The Colosseum is in Rome. [1]"
    if "Paris" in prompt or "Eiffel" in prompt:
        return "The Eiffel Tower is in Paris. [1] It was finished in 1889 [9]."
    return "I don't know."


def _rag(resource, cls, checks_embedding=None) -> RAG:
    llm = cls(responses=["unused"], answer_for=_answer_about_the_question)
    return RAG(resources=[resource], generation_chain=rag_chain_from_docs(llm, checks_embedding=checks_embedding))


async def _collect(source, question, **kwargs):
    return [event async for event in stream_events(source, question, embedding=None, **kwargs)]


async def test_events_come_in_protocol_order(city_resource, fake_llm_cls):
    events = await _collect(_rag(city_resource, fake_llm_cls), "Where is the Eiffel Tower?")
    types = [e["type"] for e in events]
    assert types[0] == "sources" and types[-4:] == ["citations", "support", "usage", "done"]
    assert set(types[1:-4]) == {"token"} and len(types[1:-4]) > 3
    assert [t for t in EVENT_TYPES if t in types] == list(EVENT_TYPES)


async def test_tokens_join_into_the_raw_answer_and_done_has_the_fixed_one(city_resource, fake_llm_cls):
    events = await _collect(_rag(city_resource, fake_llm_cls), "Where is the Eiffel Tower?")
    raw = "".join(e["text"] for e in events if e["type"] == "token")
    assert raw == "The Eiffel Tower is in Paris. [1] It was finished in 1889 [9]."
    citations = next(e for e in events if e["type"] == "citations")
    assert citations["invalid"] == [9] and citations["cited"] == [1]
    done = events[-1]
    assert done["type"] == "done" and done["answer"] == "The Eiffel Tower is in Paris. [1] It was finished in 1889."
    assert done["cited"] == [1] and done["invalid"] == [9] and "invalid_citations" in done["flags"]


async def test_sources_event_numbers_the_retrieved_chunks(city_resource, fake_llm_cls):
    events = await _collect(_rag(city_resource, fake_llm_cls), "Where is the Eiffel Tower?")
    sources = events[0]["sources"]
    assert [s["n"] for s in sources] == list(range(1, len(sources) + 1))
    assert all(s["resource"] == "cities" and s["source"].startswith("city") and s["content"] for s in sources)


async def test_usage_event_reports_tokens_from_usage_metadata(city_resource, fake_llm_cls):
    events = await _collect(_rag(city_resource, fake_llm_cls), "Where is the Eiffel Tower?")
    usage = next(e for e in events if e["type"] == "usage")
    assert usage["usage"]["calls"] == 1
    assert usage["usage"]["output_tokens"] == len(
        "The Eiffel Tower is in Paris. [1] It was finished in 1889 [9].".split())
    assert usage["usage"]["input_tokens"] > 20          # the prompt includes the fenced sources
    assert usage["usage"]["models"] == ["fake-usage-model"]
    assert set(usage["timings"]) == {"retrieve", "generate", "checks"}


async def test_support_event_flags_the_unsupported_sentence(city_resource, fake_llm_cls):
    events = await _collect(_rag(city_resource, fake_llm_cls), "Where is the Eiffel Tower?")
    support = next(e for e in events if e["type"] == "support")
    labels = [s["label"] for s in support["sentences"]]
    # "finished" is not in the source ("completed"): only partly supported, lexically.
    assert labels == ["supported", "partial"]
    assert {"unsupported_sentences", "invalid_citations"} <= set(support["flags"])


async def test_concurrent_requests_get_their_own_answers(city_resource, fake_llm_cls):
    rag = _rag(city_resource, fake_llm_cls)
    questions = ["Where is the Colosseum in Rome?", "Where is the Eiffel Tower?"] * 4
    results = await asyncio.gather(*(_collect(rag, q) for q in questions))
    for question, events in zip(questions, results):
        expected = "Rome" if "Rome" in question else "Paris"
        assert re.search(expected, events[-1]["answer"])
        assert [e["type"] for e in events][-4:] == ["citations", "support", "usage", "done"]
        assert next(e for e in events if e["type"] == "usage")["usage"]["calls"] == 1


async def test_streams_a_chain_built_by_rag_chain(city_resource, fake_llm_cls):
    events = await _collect(_rag(city_resource, fake_llm_cls).chain(), "Where is the Colosseum in Rome?")
    assert events[0]["type"] == "sources" and events[-1]["answer"] == "The Colosseum is in Rome. [1]"


async def test_offline_extractive_answer_is_fully_supported(city_resource):
    from rag.generation.extractive import ExtractiveAnswerer

    rag = RAG(resources=[city_resource], generation_chain=rag_chain_from_docs(ExtractiveAnswerer(min_confidence=0.3)))
    events = await _collect(rag, "How many spectators could the Colosseum hold?")
    assert not events[-1]["refused"]
    support = next(e for e in events if e["type"] == "support")
    assert support["summary"]["score"] == 1.0 and support["flags"] == []
    assert next(e for e in events if e["type"] == "usage")["usage"]["calls"] == 0


async def test_rejects_something_that_is_not_a_chain():
    with pytest.raises(InputError, match="takes a RAG"):
        await _collect(42, "q")


class _LoopProbeEmbedding:
    """An embedding model that, while embedding, waits until the event loop has run a coroutine.

    If the post-checks ran the model on the event loop's thread, the loop could not run that
    coroutine and the wait would time out: `blocked_loop` records it.
    """

    def __init__(self) -> None:
        from langchain_core.embeddings import DeterministicFakeEmbedding

        self.inner = DeterministicFakeEmbedding(size=16)
        self.embedding = threading.Event()
        self.loop_ran = threading.Event()
        self.blocked_loop = False

    def embed_documents(self, texts):
        self.embedding.set()
        if not self.loop_ran.wait(10):
            self.blocked_loop = True
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        return self.embed_documents([text])[0]


async def test_post_checks_do_not_block_the_event_loop(city_resource, fake_llm_cls):
    from langchain_core.embeddings import Embeddings

    probe = type("ProbeEmbedding", (_LoopProbeEmbedding, Embeddings), {})()
    done = asyncio.Event()

    async def on_the_loop():
        while not done.is_set():
            if probe.embedding.is_set():
                probe.loop_ran.set()
            await asyncio.sleep(0.01)

    async def run():
        try:
            return [e async for e in stream_events(_rag(city_resource, fake_llm_cls, checks_embedding=probe),
                                                   "Where is the Eiffel Tower?")]
        finally:
            done.set()

    events, _ = await asyncio.gather(run(), on_the_loop())
    assert events[-1]["type"] == "done"
    support = next(e for e in events if e["type"] == "support")
    assert support["sentences"][0]["relevance"] is not None          # the probing model was used
    assert probe.embedding.is_set() and not probe.blocked_loop, "the model ran on the event loop's thread"


async def test_an_extractive_answer_streams_one_cited_sentence_per_token_event(city_resource):
    from rag.generation.extractive import ExtractiveAnswerer

    # no refusal threshold: this question has two parts, each sentence answers one of them
    answerer = ExtractiveAnswerer(max_sentences=3, relative_cutoff=0.0, min_confidence=0.0)
    rag = RAG(resources=[city_resource], generation_chain=rag_chain_from_docs(answerer))
    question = "When was the Eiffel Tower in Paris completed, and where is the Colosseum?"
    events = await _collect(rag, question)
    tokens = [e["text"] for e in events if e["type"] == "token"]
    assert len(tokens) >= 2
    assert all(re.fullmatch(r" ?[^\[\]]+\. \[\d+\]", t) for t in tokens), tokens
    context = rag.chain().invoke(question)["context"]
    assert "".join(tokens) == answerer.answer(question, context) == events[-1]["answer"]
