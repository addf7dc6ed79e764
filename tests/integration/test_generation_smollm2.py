"""Streaming and chat with the real local SmolLM2 model (RAG_LLM=local); slow."""

from __future__ import annotations

import importlib.util

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.compose.chat import ConversationalRAG
from rag.compose.generator import RAG
from rag.compose.resource import Resource
from rag.compose.streaming import stream_events
from rag.generation.rag_with_source import rag_chain_from_docs

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                       reason="llama_cpp is not importable: pip install -e '.[llm-local]' to run the local SmolLM2 test"),
]


@pytest.fixture
def local_rag(tmp_path, monkeypatch) -> RAG:
    monkeypatch.setenv("RAG_LLM", "local")
    from rag.generation.factory import default_llm
    from rag.models.llms import LocalLlamaChatModel

    llm = default_llm()
    assert isinstance(llm, LocalLlamaChatModel)
    llm = llm.model_copy(update={"max_tokens": 32, "temperature": 0.0, "n_ctx": 1024})
    docs = Resource.from_texts("cities", ["The Colosseum is in Rome.", "The Eiffel Tower is in Paris."],
                               embedding=DeterministicFakeEmbedding(size=16), search_kwargs={"k": 1},
                               persist_directory=str(tmp_path / "db"))
    return RAG(resources=[docs], generation_chain=rag_chain_from_docs(llm))


async def test_smollm2_streams_tokens_then_checks_then_done(local_rag):
    events = [e async for e in stream_events(local_rag, "Where is the Colosseum?", embedding=None)]
    types = [e["type"] for e in events]
    tokens = [e["text"] for e in events if e["type"] == "token"]
    assert types[0] == "sources" and types[-4:] == ["citations", "support", "usage", "done"]
    assert len(tokens) >= 2, "the local model should stream more than one piece"
    assert events[-1]["answer"].strip()
    usage = next(e for e in events if e["type"] == "usage")["usage"]
    assert usage["calls"] == 1
    assert usage["input_tokens"] > 20 and usage["output_tokens"] == sum(e["type"] == "token" for e in events)


async def test_smollm2_condenses_a_follow_up_and_answers_it(local_rag):
    chat = ConversationalRAG(local_rag)
    assert chat.llm is local_rag.generation_chain.llm
    events = [e async for e in stream_events(chat, {"question": "And the tower?",
                                                    "history": [("human", "Where is the Colosseum?"),
                                                                ("ai", "In Rome [1].")]}, embedding=None)]
    standalone = events[0]["standalone_question"]
    assert isinstance(standalone, str) and standalone.strip() and standalone != "And the tower?"
    assert events[-1]["type"] == "done" and events[-1]["answer"].strip()
    assert next(e for e in events if e["type"] == "usage")["usage"]["calls"] == 2   # condense + answer
