"""ConversationalRAG: standalone questions (LLM and offline rule), stateless history, optional store, streaming."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from rag.base.errors import InputError
from rag.compose.chat import (
    ConversationalRAG,
    InMemoryMessageStore,
    carry_over_entities,
    named_entities,
)
from rag.compose.generator import RAG
from rag.compose.streaming import stream_events
from rag.generation.extractive import ExtractiveAnswerer
from rag.generation.rag_with_source import rag_chain_from_docs

HISTORY = [("human", "Where is the Colosseum?"), ("ai", "The Colosseum is in Rome. [1]")]


@pytest.fixture
def offline_rag(city_resource) -> RAG:
    # these tests are about condensing: the fallback asserts at a confidence this three-chunk corpus reaches
    return RAG(resources=[city_resource], generation_chain=rag_chain_from_docs(ExtractiveAnswerer(min_confidence=0.3)))


def test_rule_replaces_a_pronoun_with_the_previous_questions_entity():
    assert carry_over_entities("How many spectators could it hold?", HISTORY) == \
        "How many spectators could Colosseum hold?"
    assert carry_over_entities("Who paid for its construction?", HISTORY) == "Who paid for Colosseum's construction?"


def test_rule_appends_entities_when_the_message_has_no_pronoun_and_no_name():
    assert carry_over_entities("And the capacity?", HISTORY) == "And the capacity (Colosseum)?"


def test_rule_leaves_a_message_that_names_a_new_subject():
    assert carry_over_entities("Where is the Eiffel Tower?", HISTORY) == "Where is the Eiffel Tower?"


def test_named_entities_skip_question_words_and_possessives():
    assert named_entities("Where did Antoni Gaudi build the Sagrada Familia's towers?") == \
        ["Antoni Gaudi", "Sagrada Familia"]


def test_offline_chat_answers_the_follow_up_about_the_carried_entity(offline_rag):
    out = ConversationalRAG(offline_rag).invoke("How many spectators could it hold?", history=HISTORY)
    assert out["standalone_question"] == "How many spectators could Colosseum hold?"
    assert out["question"] == "How many spectators could it hold?"
    assert "50,000 spectators" in out["answer"]


def test_first_message_is_its_own_standalone_question(offline_rag):
    out = ConversationalRAG(offline_rag).invoke("Who designed the basilica?")
    assert out["standalone_question"] == "Who designed the basilica?" and "Gaudi" in out["answer"]


def test_llm_condenses_with_the_history_in_the_prompt(city_resource, fake_llm_cls):
    seen: list[str] = []

    def condense_or_answer(prompt: str) -> str:
        seen.append(prompt)
        return "How many spectators could the Colosseum in Rome hold?" if prompt.startswith("How many") \
            else "About 50,000 [1]."

    llm = fake_llm_cls(responses=["unused"], answer_for=condense_or_answer)
    rag = RAG(resources=[city_resource], generation_chain=rag_chain_from_docs(llm))
    out = ConversationalRAG(rag).invoke("How many could it hold?", history=HISTORY)
    assert out["standalone_question"] == "How many spectators could the Colosseum in Rome hold?"
    assert seen[0] == "How many could it hold?" and seen[1] == out["standalone_question"]


def test_store_keeps_the_conversation_between_stateless_calls(offline_rag):
    store = InMemoryMessageStore()
    chat = ConversationalRAG(offline_rag, store=store)
    chat.invoke("Where is the Colosseum?", session_id="s1")
    out = chat.invoke("How many spectators could it hold?", session_id="s1")
    assert out["standalone_question"] == "How many spectators could Colosseum hold?"
    messages = store.get("s1")
    assert [type(m) for m in messages] == [HumanMessage, AIMessage, HumanMessage, AIMessage]
    assert store.get("other") == []


def test_session_without_a_store_is_an_input_error(offline_rag):
    with pytest.raises(InputError, match="no message store"):
        ConversationalRAG(offline_rag).invoke("Hi there?", session_id="s1")


def test_malformed_history_is_an_input_error(offline_rag):
    with pytest.raises(InputError, match="history must be"):
        ConversationalRAG(offline_rag).invoke("Hi?", history=[42])


async def test_chat_streams_the_protocol_with_the_standalone_question(offline_rag):
    store = InMemoryMessageStore()
    store.add("s", [HumanMessage(content="Where is the Colosseum?"), AIMessage(content="Rome [1]")])
    chat = ConversationalRAG(offline_rag, store=store)
    events = [e async for e in stream_events(chat, {"question": "How many spectators could it hold?",
                                                    "session_id": "s"}, embedding=None)]
    assert events[0]["type"] == "sources"
    assert events[0]["standalone_question"] == "How many spectators could Colosseum hold?"
    assert "50,000" in events[-1]["answer"]
    assert len(store.get("s")) == 4 and "50,000" in store.get("s")[-1].content
