"""pprint colours sentences by support (ANSI), to_html uses CSS classes; both take a chain output dict."""

from __future__ import annotations

import io

import pytest

from rag.base.errors import InputError
from rag.base.result import RAGResult
from rag.compose.pretty import ANSI, pprint, to_html, to_text


def _result() -> RAGResult:
    return RAGResult(
        question="Tell me about Rome <3",
        final_answer="The Colosseum is in Rome. [1] It is 2,000 years old. Rome is on Mars.",
        support=[{"sentence": "The Colosseum is in Rome.", "chunk": 1, "score": 1.0, "label": "supported"},
                 {"sentence": "It is 2,000 years old.", "chunk": 2, "score": 0.41, "label": "partial"},
                 {"sentence": "Rome is on Mars.", "chunk": None, "score": 0.0, "label": "unsupported"}],
        sources=[{"n": 1, "label": "rome.txt"}, {"n": 2, "label": "history.pdf, page 3"}],
        flags=["unsupported_sentences"])


def test_pprint_colours_each_sentence_by_its_support_label():
    out = io.StringIO()
    pprint(_result(), file=out, color=True)
    text = out.getvalue()
    assert f"{ANSI['supported']}The Colosseum is in Rome.{ANSI['reset']}" in text
    assert f"{ANSI['partial']}It is 2,000 years old.{ANSI['reset']}" in text
    assert f"{ANSI['unsupported']}Rome is on Mars.{ANSI['reset']}" in text


def test_pprint_shows_chunk_and_score_markers_and_sources():
    out = io.StringIO()
    pprint(_result(), file=out, color=False)
    text = out.getvalue()
    assert "The Colosseum is in Rome. [1, 1.00] It is 2,000 years old. [2, 0.41] Rome is on Mars. [-, 0.00]" in text
    assert "  [2] history.pdf, page 3" in text and "Flags: unsupported_sentences" in text
    assert "\033[" not in text


def test_pprint_to_a_non_terminal_has_no_colour_by_default():
    out = io.StringIO()
    pprint(_result(), file=out)
    assert "\033[" not in out.getvalue()


def test_to_html_marks_sentences_with_css_classes_and_escapes_text():
    page = to_html(_result())
    assert '<span class="rag-supported" title="supported">The Colosseum is in Rome.</span>' in page
    assert 'class="rag-partial"' in page and 'class="rag-unsupported"' in page
    assert "Tell me about Rome &lt;3" in page and "<style>" in page
    assert '<li value="2">history.pdf, page 3</li>' in page
    assert "<style>" not in to_html(_result(), css=False)


def test_result_without_support_prints_the_plain_answer():
    out = io.StringIO()
    pprint(RAGResult(question="q", final_answer="Plain answer."), file=out, color=True)
    assert "Plain answer." in out.getvalue()


def test_pprint_takes_a_chain_output_dict(city_resource):
    from rag.compose.generator import RAG
    from rag.generation.extractive import ExtractiveAnswerer
    from rag.generation.rag_with_source import rag_chain_from_docs

    rag = RAG(resources=[city_resource], generation_chain=rag_chain_from_docs(ExtractiveAnswerer()))
    output = rag.chain().invoke("Where is the Colosseum?")
    out = io.StringIO()
    pprint(output, file=out, color=False)
    lines = out.getvalue().splitlines()
    assert lines[0] == "Question: Where is the Colosseum?"
    assert lines[1] == f"Answer: {output['answer']}" and "The Colosseum is in Rome." in lines[1]
    unused = len(output["context"]) > 1   # the cited source first, then those retrieved but not used
    assert lines[2] == "Sources cited:" and len(lines) == 3 + len(output["context"]) + unused
    assert not unused or "Retrieved, not used:" in lines
    assert "Where is the Colosseum?" in to_html(output)


def test_a_quoted_sentence_that_does_not_answer_is_not_shown_as_supported():
    r = RAGResult(question="Which exception does json.loads raise?", final_answer="It can raise one. [1]",
                  support=[{"sentence": "It can raise one.", "chunk": 1, "score": 1.0, "label": "supported",
                            "quoted": True, "answers": False}],
                  sources=[{"n": 1, "label": "json.html"}, {"n": 2, "label": "other.html"}])
    text = to_text(r, color=True)
    assert ANSI["supported"] not in text and ANSI["not_answering"] + "It can raise one." in text
    assert "[1, 1.00, does not answer]" in text
    assert text.index("Sources cited:") < text.index("[1] json.html") < text.index("Retrieved, not used:") \
        < text.index("[2] other.html")
    html = to_html(r)
    assert 'class="rag-not-answering"' in html and "rag-supported" not in html.split("<style>")[-1].split("</style>")[-1]


@pytest.mark.parametrize("value", [{"answer": "x"}, {"question": "q"}, "just text", 3, None])
def test_pprint_of_something_else_says_what_it_takes(value):
    with pytest.raises(InputError, match="RAGResult or a chain output dict with 'question' and 'answer'"):
        pprint(value, file=io.StringIO())
