"""Citations: [n] -> document mapping, dangling markers, and checked citations on hand-labelled answers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.documents import Document

from rag.checks.citations import check_citations, resolve_citations, source_map
from rag.checks.sentences import CITATION_PATTERN, parse_answer, strip_citations

CONTEXT = [
    Document(page_content="The Eiffel Tower is in Paris. It was completed in 1889 for the World's Fair.",
             metadata={"source": "/data/paris.pdf", "page": 0, "resource": "cities"}),
    Document(page_content="The Colosseum is in Rome. It could hold about 50,000 spectators.",
             metadata={"source": "/data/rome.txt", "resource": "cities"}),
    Document(page_content="The Sagrada Familia is in Barcelona. Antoni Gaudi designed the basilica.",
             metadata={"source": "/data/barcelona.md", "resource": "travel"}),
]

# Hand-labelled: for each answer, every (sentence index, cited number) pair and whether that chunk
# really supports the sentence (judged by a person reading the chunk), then the precision / recall
# these labels imply: precision = correct citations / citations, recall = claims backed by their citations / claims.
LABELLED = [
    ("The Eiffel Tower was completed in 1889 [1]. The Colosseum could hold about 50,000 spectators [2].",
     {(0, 1): True, (1, 2): True}, 1.0, 1.0),
    ("The Eiffel Tower is in Paris [2]. Antoni Gaudi designed the Sagrada Familia basilica [3].",
     {(0, 2): False, (1, 3): True}, 0.5, 0.5),
    ("The Colosseum is in Rome [2][1]. The Sagrada Familia is in Barcelona.",
     {(0, 2): True, (0, 1): False}, 0.5, 0.5),
    ("The Colosseum is in Rome [7].", {(0, 7): False}, 0.0, 0.0),
    ("The Colosseum held 50,000 spectators and is in Rome [2]. The Eiffel Tower is in Paris [1][3]. "
     "Gaudi designed the basilica in Barcelona [3].",
     {(0, 2): True, (1, 1): True, (1, 3): False, (2, 3): True}, 0.75, 1.0),
]


@pytest.mark.parametrize(("answer", "labels", "precision", "recall"), LABELLED)
def test_checked_citations_match_hand_labels(answer, labels, precision, recall):
    report = check_citations(answer, CONTEXT, embedding=None)
    computed = {(i, n): n in check.supporting for i, check in enumerate(report.checks) for n in check.citations}
    assert computed == labels
    assert (report.precision, report.recall) == (precision, recall)


def test_abstaining_answer_has_no_citation_scores():
    report = check_citations("I don't know: the sources do not say.", CONTEXT, embedding=None)
    assert report.checks == [] and report.precision is None and report.recall is None


def test_two_chunks_together_can_support_a_sentence_neither_supports_alone():
    answer = "The Colosseum could hold 50,000 spectators and the Eiffel Tower was completed in 1889 [2][1]."
    alone = check_citations(answer.replace("[2][1]", "[2]"), CONTEXT, embedding=None)
    assert alone.checks[0].supported is False
    report = check_citations(answer, CONTEXT, embedding=None)
    check = report.checks[0]
    assert check.supporting == [2, 1] and check.supported is True
    assert (report.precision, report.recall) == (1.0, 1.0)


def test_source_map_gives_source_page_and_resource_for_each_number():
    sources = source_map(CONTEXT)
    assert [(s["n"], s["source"], s["page"], s["resource"]) for s in sources] == [
        (1, "/data/paris.pdf", 0, "cities"), (2, "/data/rome.txt", None, "cities"),
        (3, "/data/barcelona.md", None, "travel")]
    assert sources[0]["label"] == "paris.pdf, page 1"


def test_dangling_citations_are_removed_and_reported():
    resolved = resolve_citations("Rome has the Colosseum [2, 9]. Paris [4] has the tower [1].", CONTEXT)
    assert resolved.answer == "Rome has the Colosseum [2]. Paris has the tower [1]."
    assert resolved.invalid == [4, 9] and resolved.cited == [1, 2]
    assert [s["source"] for s in resolved.sources] == ["/data/paris.pdf", "/data/rome.txt"]


def test_markers_attach_to_the_sentence_they_follow():
    sentences = parse_answer("Paris is in France. [1] Rome is in Italy [3, 4], old [2]. Done.")
    assert [(s.text, s.citations) for s in sentences] == [
        ("Paris is in France.", [1]), ("Rome is in Italy, old.", [3, 4, 2]), ("Done.", [])]


def test_a_marker_followed_by_more_text_ends_its_claim():
    sentences = parse_answer("Rome is in Italy [1] and Paris is in France [2]. The list: - item one [3] | cell [4]")
    assert [(s.text, s.citations) for s in sentences] == [
        ("Rome is in Italy", [1]), ("and Paris is in France.", [2]), ("The list: - item one", [3]), ("cell", [4])]


def test_a_quoted_sentence_keeps_its_own_spacing():
    # A quote must read as its source: "SQLite :memory:" is not "SQLite:memory:" (the tidy-up after a
    # removed marker used to run over the whole answer).
    quote = "If using a SQLite :memory: database, type : [1]"
    assert resolve_citations(quote, CONTEXT).answer == quote
    assert strip_citations(quote) == "If using a SQLite :memory: database, type :"
    assert resolve_citations("Rome is old [7].", CONTEXT).answer == "Rome is old."


_WORDS = st.lists(st.text(st.characters(blacklist_categories=("Zs", "Cc", "Zl", "Zp")), min_size=1, max_size=8)
                  .filter(lambda w: not CITATION_PATTERN.search(w) and w.strip() == w), min_size=1, max_size=12)


@given(_WORDS, st.data())
def test_removing_markers_changes_nothing_else_in_the_text(words, data):
    at = data.draw(st.lists(st.integers(0, len(words)), max_size=4))
    numbers = data.draw(st.lists(st.integers(5, 99), min_size=len(at), max_size=len(at)))  # none in CONTEXT
    pieces = list(words)
    for i, n in sorted(zip(at, numbers), reverse=True):
        pieces.insert(i, f"[{n}]")
    marked = " ".join(pieces)
    plain = " ".join(words)
    assert strip_citations(marked) == plain
    resolved = resolve_citations(marked, CONTEXT)
    assert resolved.answer == plain and resolved.cited == [] and sorted(set(numbers)) == resolved.invalid


_OPENERS = st.sampled_from(["U.S.", "U.K.", "E.U.", "Mr. Smith", "Dr. Lee", "No. 4", "The U.S.", "Net sales",
                            "International", "Fig. 2"])
_TAILS = st.sampled_from(["(2022: 1.3%, 2.3%)", "(2023: $25,530)", "grew 4% in 2023.", "left the U.S.",
                          "is shown in Fig. 3.", "fell."])


@given(st.lists(st.tuples(_OPENERS, _TAILS, st.integers(1, 9)), min_size=1, max_size=6))
def test_an_answer_sentence_that_starts_or_ends_with_an_abbreviation_keeps_its_citation(parts):
    """Quoted rows start with names like "U.S." and titles; none of them splits a sentence from its marker, so each
    sentence of the answer comes back whole with the citation written after it."""
    answer = " ".join(f"{opener} {tail} [{n}]" for opener, tail, n in parts)
    parsed = parse_answer(answer)
    assert [(s.text, s.citations) for s in parsed] == [(f"{o} {t}", [n]) for o, t, n in parts]


def test_context_sentences_keep_the_plain_split():
    """The answerer's units are split as before (its rules were measured on that split); only answers rejoin."""
    from rag.base.text import split_sentences

    text = "U.S. (2022: 1.3%) grew. Mr. Smith left."
    assert split_sentences(text) == ["U.S.", "(2022: 1.3%) grew.", "Mr.", "Smith left."]
    assert split_sentences(text, abbreviations=True) == ["U.S. (2022: 1.3%) grew.", "Mr. Smith left."]
    assert split_sentences("Sales in the U.S. The rest grew. Is it? No. Next.", abbreviations=True) == [
        "Sales in the U.S.", "The rest grew.", "Is it?", "No.", "Next."]
