"""Generation on real documents with the real MiniLM model: the demo index, support, citations, `rag eval qa`."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from langchain_core.documents import Document

from rag.cli import main
from rag.compose.airag import airag
from rag.compose.resource import Resource
from rag.checks.citations import check_citations
from rag.compose.pretty import ANSI, pprint

pytestmark = pytest.mark.integration

DOCS = Path(__file__).resolve().parents[2] / "docs"
QUESTIONS = [
    "How is citation precision defined?",
    "What does the streaming protocol send first?",
    "How is the support score of a sentence computed?",
    "How do I add the price of my own model?",
]


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory) -> Resource:
    from rag.models.embeddings import default_embeddings

    return Resource.from_directory("docs", DOCS, glob="*.md", embedding=default_embeddings(),
                                   persist_directory=str(tmp_path_factory.mktemp("demo") / "store"))


def test_airag_on_the_demo_index_returns_a_complete_result(demo_index):
    from rag import ExtractiveAnswerer

    # a fallback that asserts at this corpus' confidence: the test is about the result being complete
    result = airag(demo_index, QUESTIONS[0], return_all=True, llm=ExtractiveAnswerer(min_confidence=0.3))
    assert result.stages["fused"] and result.context and result.answer and result.final_answer
    assert result.sources and result.citations["cited"] and result.citations["precision"] is not None
    assert result.support and all(0.0 <= s["score"] <= 1.0 for s in result.support)
    assert {"search", "fuse", "build_context", "answer", "refine", "postprocess"} <= set(result.timings)
    assert set(result.usage) == {"build_context", "answer", "refine", "postprocess"}
    out = io.StringIO()
    pprint(result, file=out, color=True)
    assert ANSI["supported"] in out.getvalue() and "Sources cited:" in out.getvalue()


def test_extractive_answers_on_real_docs_are_fully_supported_and_state_the_answer(demo_index):
    """An extractive answer claims only what the context says, is fully supported, and states the answer:
    a definition is answered by the definition (docs/generation.md), not by another page's "precision",
    and a how-to by the call it introduces, quoted with its code line."""
    expected = {"How is citation precision defined?": "correct citations / all citations",
                "How do I add the price of my own model?": "register_price(",
                "How is the support score of a sentence computed?": "lexical_weight * lexical"}
    for question in QUESTIONS:
        result = airag(demo_index, question, return_all=True, search_kwargs={"k": 5})
        answer = result.final_answer
        if answer.refused:   # not sure: nothing asserted, a passage shown (issue 35); whether it holds the answer
            assert not answer.cited and answer.passage, (question, answer.fields())   # is bench/answers.py's
            continue
        claims = [s for s in result.support if s["label"] != "no_answer"]
        assert claims, (question, result.final_answer)
        # every claim is a quoted context sentence, a table row re-labelled with its header
        # ("label (header: cell)") or an intro quoted with its code line, scored (just under) 1
        assert all(s["label"] == "supported" and s["score"] >= 0.95 for s in claims), (question, claims)
        assert result.support_score >= 0.95, question
        assert result.citations["precision"] == 1.0 and result.citations["recall"] == 1.0, question
        assert expected.get(question, "") in result.final_answer, (question, result.final_answer)


def test_hand_labelled_citations_hold_with_embeddings():
    context = [Document(page_content="The Eiffel Tower is in Paris. It was completed in 1889 for the World's Fair."),
               Document(page_content="The Colosseum is in Rome. It could hold about 50,000 spectators."),
               Document(page_content="The Sagrada Familia is in Barcelona. Antoni Gaudi designed the basilica.")]
    report = check_citations("The tower in Paris was finished in 1889 [1]. The Eiffel Tower is in Paris [2]. "
                             "Gaudi designed the Barcelona basilica [3].", context, embedding="default")
    assert [c.supporting for c in report.checks] == [[1], [], [3]]
    assert (report.precision, report.recall) == (pytest.approx(2 / 3, abs=1e-3), pytest.approx(2 / 3, abs=1e-3))


def test_rag_eval_qa_writes_a_report_with_a_chart(tmp_path, capsys):
    # a corpus written for this test (it indexed the live docs before: every docs edit changed the questions)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for page in (Path(__file__).parent / "data" / "qa_corpus").glob("*.md"):
        (corpus / page.name).write_text(page.read_text())
    store = str(tmp_path / "store")
    assert main(["index", str(corpus), "--store", store, "--collection", "docs"]) == 0
    out = tmp_path / "report"
    assert main(["eval", "qa", "--store", store, "--collection", "docs", "--n", "3", "--k", "3",
                 "--out", str(out)]) == 0
    report = (out / "report.md").read_text()
    assert "![metrics](qa_metrics.png)" in report and "| hit_rate@3 |" in report
    assert (out / "qa_metrics.png").stat().st_size > 1000 and len((out / "evals.jsonl").read_text().splitlines()) == 3
    printed = capsys.readouterr().out
    metrics = dict(re.findall(r"^\s*([\w@]+): ([\d.]+)$", printed, re.M))
    # the gold chunk is found; support now also asks whether a sentence answers the question, so it is a
    # measurement (no longer 1.0 by construction for quoted sentences)
    assert metrics["hit_rate@3"] == "1.000" and 0.0 < float(metrics["answer_support"]) <= 1.0
    assert 0.0 < float(metrics["citation_precision"]) <= 1.0
    # A second run reads the same questions back.
    assert main(["eval", "qa", "--store", store, "--collection", "docs", "--out", str(out), "--lexical-support"]) == 0
    assert "read 3 QA item(s)" in capsys.readouterr().err


def test_rag_eval_qa_without_a_store_is_a_one_line_error(tmp_path, capsys):
    assert main(["eval", "qa", "--store", str(tmp_path / "missing")]) == 2
    assert "no store at" in capsys.readouterr().err
