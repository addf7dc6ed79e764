"""The offline fallback's core: units, scoring, quoting with citations, refusing below the threshold."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from rag.base.errors import ConfigError
from rag.base.answer import NO_ANSWER, NOT_SURE
from rag.generation.extractive import ExtractiveAnswerer, context_units
from rag.generation.extractive.units import surrounding
from rag.indexing.chunking import split_documents
from rag.indexing.table_structure import TABLE_ROWS_KEY, chunk_tables, piece_tables, table_rows

CITED = re.compile(r"(.+?) \[(\d+(?:, \d+)*)\](?: |$)")


def _flat(text: str) -> str:
    return " ".join(text.split())


def _quotes(answer: str) -> list[tuple[str, list[int]]]:
    return [(m.group(1), [int(n) for n in m.group(2).split(", ")]) for m in CITED.finditer(answer)]


def test_a_sure_answer_quotes_the_best_sentence_with_its_source():
    docs = [Document(page_content="The Eiffel Tower is in Paris. It opened in 1889."),
            Document(page_content="The Colosseum stands in Rome. It held about fifty thousand spectators.")]
    answer = ExtractiveAnswerer(embedding=None, min_confidence=0.5).answer("Where does the Colosseum stand?", docs)
    assert not answer.refused
    assert _quotes(answer) == [("The Colosseum stands in Rome.", [2])]
    assert answer.cited == [2] and answer.confidence >= 0.5


def test_below_the_threshold_it_asserts_nothing_and_shows_the_closest_passage():
    docs = [Document(page_content="Some intro line.\n\nThe Colosseum stands in Rome.\n\nMore text follows here.",
                     metadata={"source": "/x/rome.html"})]
    answer = ExtractiveAnswerer(embedding=None, min_confidence=1.0).answer("Which emperor built the Colosseum?", docs)
    assert answer.refused and str(answer) == NOT_SURE and answer.cited == []
    assert answer.passage["n"] == 1 and answer.passage["label"] == "rome.html"
    assert "The Colosseum stands in Rome." in answer.passage["text"]
    assert answer.passage["text"] == "Some intro line.\nThe Colosseum stands in Rome.\nMore text follows here."


def test_no_candidate_is_not_asserted_but_the_closest_passage_is_shown():
    answerer = ExtractiveAnswerer(embedding=None)
    empty = answerer.answer("Where is Rome?", [])
    assert str(empty) == NO_ANSWER and empty.refused and empty.passage is None
    answer = answerer.answer("Which port does the server listen on?", [Document(page_content="Bread is baked daily.")])
    assert answer.refused and "[1]" not in answer and answer.passage["text"] == "Bread is baked daily."


def test_the_same_sentence_in_two_chunks_is_cited_from_both():
    docs = [Document(page_content="The default port is 8080."), Document(page_content="The default port is 8080.")]
    answer = ExtractiveAnswerer(embedding=None, min_confidence=0.3).answer("What is the default port?", docs)
    assert _quotes(answer) == [("The default port is 8080.", [1, 2])] and answer.cited == [1, 2]


class _Topics(Embeddings):
    """Texts about baking share one vector, the rest another: meaning without a shared word."""

    def embed_documents(self, texts):
        return [[1.0, 0.0] if re.search(r"bread|bakery", t, re.I) else [0.0, 1.0] for t in texts]

    def embed_query(self, text):
        return self.embed_documents([text])[0]


def test_with_an_embedding_a_unit_close_in_meaning_answers():
    docs = [Document(page_content="Bread is baked every single morning."), Document(page_content="Taxes are due.")]
    answer = ExtractiveAnswerer(embedding=_Topics(), min_similarity=0.99, min_confidence=0.4).answer(
        "When does the bakery open?", docs)
    assert not answer.refused and answer.cited == [1]


def test_units_leave_out_code_cut_sentences_and_headings():
    chunk = ("tail of a sentence cut by the chunker. # Title\n\n## Heading\n\nA whole sentence here.\n\n"
             "```\nx = compute(1, 2)  # not prose.\n```\n\n>>> print('hello there friend.')\n\nIt ends without a stop")
    assert [u.text for u in context_units([Document(page_content=chunk)])] == ["A whole sentence here."]


def test_a_chunk_starting_inside_a_code_block_keeps_the_prose_after_it():
    chunk = "result = run()\n```\n\nThe function returns a result object.\n\n```\nmore()\n```\n"
    assert [u.text for u in context_units([Document(page_content=chunk)])] == ["The function returns a result object."]


def test_table_rows_come_from_the_chunk_metadata_not_the_text():
    text = "Settings below.\n\nName | Default\ntimeout | 30 seconds\nretries | 3 times\n"
    chunk = split_documents([Document(page_content=text, metadata={"source": "a.md"})])[0]
    tables = json.loads(chunk.metadata[TABLE_ROWS_KEY])
    assert tables == [{"header": ["Name", "Default"], "rows": [["timeout", "30 seconds"], ["retries", "3 times"]],
                       "lines": ["timeout | 30 seconds", "retries | 3 times"]}]
    units = context_units([chunk])
    assert [(u.kind, u.text, u.terms) for u in units if u.kind == "row"] == [
        ("row", "timeout | 30 seconds", "Name Default"), ("row", "retries | 3 times", "Name Default")]
    # without the metadata the same text has no rows: nothing re-parses "a | b" at answer time
    assert not [u for u in context_units([Document(page_content=text)]) if u.kind == "row"]
    answer = ExtractiveAnswerer(embedding=None, min_confidence=0.3).answer("What is the default timeout?", [chunk])
    assert _quotes(answer)[0] == ("timeout | 30 seconds", [1])


def test_a_markdown_table_and_a_table_cut_over_chunks_keep_their_header():
    text = "| key | value |\n|---|---|\n" + "".join(f"| k{i} | v{i} |\n" for i in range(60))
    tables = piece_tables(text)
    assert tables[0].header == ["key", "value"] and len(tables[0].rows) == 60
    second = json.loads(chunk_tables(tables, len(text) // 2, len(text)))
    assert second[0]["header"] == ["key", "value"] and second[0]["rows"][-1] == ["k59", "v59"]
    assert table_rows({TABLE_ROWS_KEY: "not json"}) == [] and table_rows({TABLE_ROWS_KEY: '{"a": 1}'}) == []


def test_surrounding_shows_the_unit_with_its_neighbour_lines():
    chunk = "## Options\n\n-q, --quiet\nSuppress all output.\n\nSee also the verbose option."
    assert surrounding("Suppress all output.", chunk) == "-q, --quiet\nSuppress all output.\nSee also the verbose option."
    assert surrounding("Not in the chunk at all.", chunk) == "Not in the chunk at all."


@pytest.mark.parametrize("kwargs", [{"max_sentences": 0}, {"min_confidence": 1.5}, {"relative_cutoff": -0.1},
                                    {"embedding": "another-model"}, {"max_embedded": 0}])
def test_bad_settings_say_what_is_valid(kwargs):
    with pytest.raises(ConfigError):
        ExtractiveAnswerer(**kwargs)


_WORDS = st.sampled_from("alpha beta gamma delta port timeout server client cache default value option file".split())
_SENTENCE = st.lists(_WORDS, min_size=3, max_size=9).map(lambda ws: " ".join(ws).capitalize() + ".")
_CHUNK = st.lists(_SENTENCE, min_size=1, max_size=4).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(chunks=st.lists(_CHUNK, min_size=1, max_size=4), question=st.lists(_WORDS, min_size=1, max_size=5),
       threshold=st.floats(0.0, 1.0))
def test_every_asserted_sentence_is_a_verbatim_unit_of_the_source_it_cites(chunks, question, threshold):
    docs = [Document(page_content=c) for c in chunks]
    answer = ExtractiveAnswerer(embedding=None, min_confidence=threshold).answer(" ".join(question) + "?", docs)
    if answer.refused:   # a refusal asserts nothing and cites nothing
        assert str(answer) in (NOT_SURE, NO_ANSWER) and answer.cited == [] and not _quotes(answer)
        if answer.passage:
            assert _flat(answer.passage["text"]) in _flat(docs[answer.passage["n"] - 1].page_content)
        return
    quotes = _quotes(answer)
    assert quotes and " ".join(f"{t} [{', '.join(map(str, ns))}]" for t, ns in quotes) == str(answer)
    assert answer.confidence >= threshold
    for text, sources in quotes:
        for n in sources:
            assert 1 <= n <= len(docs) and text in _flat(docs[n - 1].page_content)


def test_a_unit_quoting_the_question_talks_about_it_and_does_not_answer_it():
    """`make demo`'s question matched a benchmark row that quotes it; the answer is the sentence after."""
    docs = [Document(page_content="| `rag ask \"Which embedding model is used by default?\"` | 8.6 s | 2.1 s |"),
            Document(page_content="The default embedding model is all-MiniLM-L6-v2, shipped in a wheel.")]
    answer = ExtractiveAnswerer(embedding=None, min_confidence=0.3).answer("Which embedding model is used by default?",
                                                                         docs)
    assert answer.cited == [2] and "8.6" not in answer
