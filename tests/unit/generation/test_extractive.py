from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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


# ---------------------------------------------------------------- regression classes (issue 12)
GENERIC_QUESTIONS = st.sampled_from(["What happened?", "What happened", "Tell me what happened.", "Any news?",
                                     "What is new?", "what happened?"])
EVENTS = st.sampled_from(["Rates fell in 2020.", "The bank merged with a rival in 2019.",
                          "Prices rose sharply in March 2021.", "The plant closed in 2018 after the flood."])
FILLER = ["A `Resource` is a named retriever with default search settings.",
          "Chroma collections are created in cosine space, so scores mean the same on every store.",
          "Resource names must be unique."]


@given(GENERIC_QUESTIONS, EVENTS, st.permutations(FILLER))
@settings(max_examples=40, deadline=None)
def test_a_question_without_a_topic_is_answered_by_the_dated_statement(question, event, filler):
    docs = [Document(page_content=t) for t in [*filler[:1], event, *filler[1:]]]
    out = ExtractiveAnswerer(max_sentences=1).invoke({"question": question, "context": docs})
    assert out == f"{event} [2]"


def test_readme_example_answers_with_the_filtered_sentence():
    out = ExtractiveAnswerer().invoke({"question": "What happened?", "context": [Document(page_content="Rates fell in 2020.")]})
    assert out == "Rates fell in 2020. [1]"


PACKAGES = st.lists(st.sampled_from(["requests", "urllib3", "httpx", "flask", "numpy", "chromadb", "pydantic"]),
                    min_size=2, max_size=5, unique=True)
LICENCES = st.sampled_from(["MIT", "Apache 2.0", "BSD 3-Clause", "MPL 2.0", "GPLv3"])


@given(PACKAGES, st.data(), st.booleans())
@settings(max_examples=60, deadline=None)
def test_a_licence_question_quotes_the_licence_of_the_package_it_names(packages, data, name_in_text):
    licences = {p: data.draw(LICENCES, label=p) for p in packages}
    asked = data.draw(st.sampled_from(packages), label="asked")
    docs = []
    for p in packages:
        text = (f"{p.capitalize()} is released under the {licences[p]} license." if name_in_text
                else f"This project is released under the {licences[p]} license.")
        docs.append(Document(page_content=f"{p.capitalize()} is a Python package. {text}",
                             metadata={"source": f"site-packages/{p}/README.md", "title": p}))
    answerer = ExtractiveAnswerer()
    first = answerer.select(f"What license is {asked} released under?", docs)[0]
    assert licences[asked] in first.text and first.source == packages.index(asked) + 1


CODE_FRAGMENTS = st.sampled_from(['0.00}, ) chain.invoke({"question": "What happened?"})',
                                  "retrieve: hybrid + RSE; 8.4; 11.5", "kb = KnowledgeBase('reports', '.rag')",
                                  "out = rag.chain().invoke(\"What was revenue in 2022?\")"])


@given(CODE_FRAGMENTS, st.sampled_from(["How do I ask a question?", "What does the chain return?",
                                        "How is revenue reported?"]))
@settings(max_examples=30, deadline=None)
def test_code_and_table_fragments_are_not_quoted_as_sentences(fragment, question):
    docs = [Document(page_content=f"```python\n{fragment}\n```\n\nThe chain returns the answer and its context."),
            Document(page_content=f"{fragment}\n| path | recall | ms |\n|---|---|---|\n| retrieve: hybrid + RSE | 8.4 | 11.5 |"),
            Document(page_content="You ask a question with the chain, and revenue is reported per quarter.")]
    out = ExtractiveAnswerer().invoke({"question": question, "context": docs})
    assert fragment not in out and "8.4" not in out and "|" not in out


@given(st.lists(st.integers(min_value=100, max_value=99_999), min_size=3, max_size=3, unique=True),
       st.sampled_from(["What was revenue in 2023?", "How much revenue was there in FY2023?", "What was the revenue?"]))
@settings(max_examples=30, deadline=None)
def test_a_value_question_quotes_the_row_with_its_label_and_column_header(values, question):
    table = ("Revenue by year.\n\n| metric | 2022 | 2023 |\n|---|---|---|\n"
             f"| revenue | {values[0]:,} | {values[1]:,} |\n| costs | {values[2]:,} | 1 |")
    docs = [Document(page_content="The company sells anvils."), Document(page_content=table)]
    first = ExtractiveAnswerer().select(question, docs)[0]
    # a question naming a year gets that year's column (one value); one naming none, the whole row
    expected = f"revenue (2023: {values[1]:,})" if "2023" in question else \
        f"revenue (2022: {values[0]:,}; 2023: {values[1]:,})"
    assert first.text == expected and first.source == 2


@given(st.permutations(DOCS + [Document(page_content="Revenue grew 12% in 2023, driven by exports to Canada. "
                                                     "Exports to Canada doubled.")]))
@settings(max_examples=30, deadline=None)
def test_citation_numbers_point_at_a_document_holding_the_sentence_and_no_sentence_repeats(docs):
    answerer = ExtractiveAnswerer(max_sentences=3, relative_cutoff=0.0)
    chosen = answerer.select("How much did revenue grow in 2023, and what about exports to Canada?", docs)
    assert chosen and all(s.text in docs[n - 1].page_content for s in chosen for n in s.sources)
    assert len({s.text for s in chosen}) == len(chosen)
    both = next(s for s in chosen if s.text.startswith("Revenue grew"))
    assert sorted(both.sources) == sorted(i + 1 for i, d in enumerate(docs) if both.text in d.page_content)


def test_a_sentence_with_no_question_term_does_not_answer_without_a_model():
    docs = [Document(page_content="The sky is blue today."), Document(page_content="Cats sleep a lot.")]
    assert ExtractiveAnswerer().invoke({"question": "What is the GDP of France?", "context": docs}) == NO_ANSWER
