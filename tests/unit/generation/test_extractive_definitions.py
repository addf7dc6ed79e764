"""The fallback quotes a definition's description after its term, read from the chunk's metadata."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from rag.generation.extractive import ExtractiveAnswerer, context_units
from rag.indexing.chunking import split_documents
from rag.indexing.definitions import definitions
from rag.indexing.html_text import html_to_text

PAGE = ("<h2>Options</h2><dl><dt>--mirror</dt><dd><p>Set up a mirror of the source repository.</p></dd>"
        "<dt>--depth &lt;depth&gt;</dt><dd><p>Create a shallow clone with a history truncated to the specified "
        "number of commits.</p></dd><dt>-q, --quiet</dt><dd><p>Operate quietly.</p></dd></dl>")
CITED = re.compile(r"(.+?) \[(\d+(?:, \d+)*)\](?: |$)")


def _chunks(page: str = PAGE) -> list[Document]:
    text, title = html_to_text(page)
    return split_documents([Document(page_content=text, metadata={"source": "clone.html", "title": "clone"})])


def test_a_question_paraphrasing_a_description_is_answered_with_its_term():
    answer = ExtractiveAnswerer(embedding=None, min_confidence=0.3).answer(
        "Which option creates a shallow clone with a truncated history?", _chunks())
    assert not answer.refused
    assert str(answer) == ("--depth <depth>: Create a shallow clone with a history truncated to the specified number "
                           "of commits. [1]")


def test_definitions_come_from_the_metadata_not_the_text():
    (chunk,) = _chunks()
    kinds = [(u.kind, u.text) for u in context_units([chunk])]
    assert ("definition", "-q, --quiet: Operate quietly.") in kinds
    assert not [k for k, _ in kinds if k == "sentence"]   # the description lines left the prose
    # the same text without the metadata: sentences only, no term re-parsed from "term / : description" lines
    bare = context_units([Document(page_content=chunk.page_content)])
    assert bare and all(u.kind == "sentence" for u in bare)


def test_a_refusal_shows_the_definition_with_its_term_as_the_closest_passage():
    answer = ExtractiveAnswerer(embedding=None, min_confidence=0.99).answer(
        "Which option creates a shallow clone for a laptop?", _chunks())
    assert answer.refused and answer.passage
    assert "--depth <depth>" in answer.passage["text"] and "Create a shallow clone" in answer.passage["text"]


def test_a_long_description_is_quoted_in_parts_each_after_its_term():
    sentences = [f"Sentence {i} of the description talks about topic{i} and nothing else here." for i in range(12)]
    (chunk, *_) = _chunks(f"<dl><dt>--long</dt><dd>{' '.join(sentences)}</dd></dl>")
    units = [u for u in context_units([chunk]) if u.kind == "definition"]
    assert len(units) > 1 and all(u.text.startswith("--long: Sentence") and len(u.text.split()) <= 81 for u in units)


_WORD = st.sampled_from("alpha beta gamma delta port timeout server client cache value file mirror".split())
_DESCRIPTION = st.lists(_WORD, min_size=3, max_size=12).map(lambda ws: " ".join(ws).capitalize() + ".")


@settings(max_examples=40, deadline=None)
@given(entries=st.lists(st.tuples(st.from_regex(r"--[a-z]{1,8}", fullmatch=True), _DESCRIPTION), min_size=1,
                        max_size=8),
       question=st.lists(_WORD, min_size=1, max_size=5), threshold=st.floats(0.0, 1.0))
def test_every_asserted_definition_quotes_a_term_and_its_description_from_the_cited_chunk(entries, question, threshold):
    page = "<dl>" + "".join(f"<dt>{t}</dt><dd>{d}</dd>" for t, d in entries) + "</dl>"
    docs = _chunks(page)
    answer = ExtractiveAnswerer(embedding=None, min_confidence=threshold).answer(" ".join(question) + "?", docs)
    if answer.refused:
        return
    for match in CITED.finditer(str(answer)):
        quote, sources = match.group(1), [int(n) for n in match.group(2).split(", ")]
        for n in sources:
            pairs = {(d["term"], d["description"]) for d in definitions(docs[n - 1].metadata)}
            term, _, said = quote.partition(": ")
            assert any(t == term and said in d for t, d in pairs), (quote, pairs)


def test_a_passage_from_a_chunk_below_its_term_still_shows_the_term():
    sentences = [f"Sentence {i} of the description talks about topic{i} and nothing else here." for i in range(40)]
    text, _ = html_to_text(f"<dl><dt>--long-option</dt><dd>{' '.join(sentences)}</dd></dl>")
    chunks = split_documents([Document(page_content=text, metadata={"source": "a.html"})], chunk_size=60,
                             chunk_overlap=10)
    last = chunks[-1]
    assert "--long-option" not in last.page_content and definitions(last.metadata)[0]["term"] == "--long-option"
    answer = ExtractiveAnswerer(embedding=None, min_confidence=0.99).answer("What does topic39 mean for laptops?",
                                                                          [last])
    assert answer.refused and answer.passage["text"].startswith("--long-option\n")
    assert "topic39" in answer.passage["text"]
