from __future__ import annotations

import pytest
from langchain_core.documents import Document

from rag.base.errors import InputError
from rag.generation.extractive import NO_ANSWER, ExtractiveAnswerer
from rag.generation.rag_with_source import rag_chain_from_docs

DOCS = [
    Document(page_content="The warehouse opened in 1998 in Lyon. It employs 240 people.", metadata={"source": "a.txt"}),
    Document(page_content="Revenue grew 12% in 2023, driven by exports to Canada.", metadata={"source": "b.txt"}),
    Document(page_content="# Heading only\n\n| col | col |\n|---|---|", metadata={"source": "c.md"}),
]


def test_answer_cites_the_source_of_the_chosen_sentence():
    out = ExtractiveAnswerer(max_sentences=1).invoke({"question": "How much did revenue grow in 2023?", "context": DOCS})
    assert out == "Revenue grew 12% in 2023, driven by exports to Canada. [2]"


def test_every_answer_sentence_is_verbatim_context():
    answerer = ExtractiveAnswerer(max_sentences=3)
    for question in ["When did the warehouse open?", "How many people work there?", "What drove revenue?"]:
        for chosen in answerer.select(question, DOCS):
            assert chosen.text in DOCS[chosen.source - 1].page_content


def test_no_overlap_means_no_answer():
    out = ExtractiveAnswerer().invoke({"question": "Who painted the Mona Lisa?", "context": DOCS})
    assert out == NO_ANSWER


def test_empty_context_means_no_answer():
    assert ExtractiveAnswerer().invoke({"question": "anything?", "context": []}) == NO_ANSWER


def test_streams_one_sentence_at_a_time():
    answerer = ExtractiveAnswerer(max_sentences=2, min_score=0.05)
    parts = list(answerer.stream({"question": "warehouse revenue 2023 Lyon", "context": DOCS}))
    assert len(parts) == 2 and "".join(parts) == answerer.invoke({"question": "warehouse revenue 2023 Lyon",
                                                                   "context": DOCS})


def test_embedding_similarity_reorders_lexical_ties(fake_embedding):
    plain = ExtractiveAnswerer(max_sentences=3).rank("revenue 2023", DOCS)
    with_emb = ExtractiveAnswerer(max_sentences=3, embedding=fake_embedding).rank("revenue 2023", DOCS)
    assert {s.text for s in plain if s.score > 0} == {s.text for s in with_emb if s.score > 0}


def test_bad_input_is_explained():
    with pytest.raises(InputError, match="'question' and 'context'"):
        ExtractiveAnswerer().invoke("just a string")


@pytest.mark.parametrize("kwargs", [{"max_sentences": 0}, {"min_score": 1.5}])
def test_bad_options_fail_fast(kwargs):
    with pytest.raises(ValueError):
        ExtractiveAnswerer(**kwargs)


def test_default_chain_uses_the_extractive_answerer_when_no_llm_is_configured():
    chain = rag_chain_from_docs()
    answer = chain.invoke({"question": "When did the warehouse open?", "context": DOCS[:1]})
    assert answer.endswith("[1]") and "1998" in answer


def test_unknown_rag_llm_lists_valid_choices(monkeypatch):
    from rag.base.errors import ConfigError

    monkeypatch.setenv("RAG_LLM", "gpt5")
    with pytest.raises(ConfigError, match="valid: extractive, openai, local"):
        rag_chain_from_docs()


def test_openai_without_key_or_url_says_what_to_set(monkeypatch):
    from rag.base.errors import ConfigError

    monkeypatch.setenv("RAG_LLM", "openai")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        rag_chain_from_docs()
