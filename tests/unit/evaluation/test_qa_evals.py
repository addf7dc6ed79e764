"""build_qa_evals / run_qa_evals / write_qa_report on a small real Chroma corpus with fake embeddings."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel

from rag.base.errors import InputError
from rag.compose.generator import RAG
from rag.compose.resource import Resource
from rag.evaluation.qa_evals import (
    QAEval,
    build_qa_evals,
    chunk_key,
    load_qa_evals,
    run_qa_evals,
    save_qa_evals,
)
from rag.evaluation.qa_report import CHART_FILE, write_qa_report
from rag.generation.extractive import ExtractiveAnswerer
from rag.generation.rag_with_source import rag_chain_from_docs

TEXTS = [
    "The Eiffel Tower is in Paris. It was completed in 1889 for the World's Fair in France.",
    "The Colosseum is in Rome. The amphitheatre could hold about 50,000 spectators at games.",
    "The Sagrada Familia is in Barcelona. Antoni Gaudi designed the basilica with organic shapes.",
    "Big Ben is the bell of the clock tower at the Palace of Westminster in London.",
]


@pytest.fixture
def resource(tmp_path) -> Resource:
    return Resource.from_texts("landmarks", TEXTS, metadatas=[{"source": f"doc{i}.txt"} for i in range(4)],
                               embedding=DeterministicFakeEmbedding(size=32), persist_directory=str(tmp_path / "db"))


def test_offline_items_quote_a_sentence_of_their_source_chunk(resource):
    evals = build_qa_evals(resource, n=3)
    assert len(evals) == 3 and len({e.chunk_id for e in evals}) == 3
    for item in evals:
        assert item.answer in item.context and item.chunk_id == chunk_key(item.context)
        assert item.question.endswith("?") and item.generator == "rule"
        assert not set(item.answer.lower().split()) - {"the", "a"} & set(item.question.lower().rstrip("?").split())
        assert item.source.startswith("doc") and item.metadata["resource"] == "landmarks"


def test_sample_is_seeded(resource):
    assert build_qa_evals(resource, n=2, seed=1) == build_qa_evals(resource, n=2, seed=1)
    assert [e.chunk_id for e in build_qa_evals(resource, n=4, seed=1)] != \
        [e.chunk_id for e in build_qa_evals(resource, n=4, seed=2)]


def test_llm_writes_questions_and_bad_json_falls_back_to_the_rule():
    docs = [Document(page_content=t) for t in TEXTS[:2]]
    llm = FakeListChatModel(responses=['Sure: {"question": "When was the tower completed?", "answer": "1889"}',
                                       "not json at all"])
    evals = build_qa_evals(docs, n=2, llm=llm, seed=3)
    assert sorted(e.generator for e in evals) == ["llm", "rule"]
    assert any(e.question == "When was the tower completed?" and e.answer == "1889" for e in evals)


def test_jsonl_round_trip_and_bad_lines_name_the_line(tmp_path, resource):
    path = tmp_path / "evals.jsonl"
    evals = build_qa_evals(resource, n=2, path=path)
    assert load_qa_evals(path) == evals and len(path.read_text().splitlines()) == 2
    path.write_text(path.read_text() + json.dumps({"question": "missing fields"}) + "\n")
    with pytest.raises(InputError, match="evals.jsonl:3"):
        load_qa_evals(path)


def test_run_scores_retrieval_support_and_citations(resource):
    rag = RAG(resources=[resource], generation_chain=rag_chain_from_docs(ExtractiveAnswerer()))
    evals = build_qa_evals(resource, n=4)
    report = run_qa_evals(rag, evals, k=4, embedding=None)
    # k=4 retrieves the whole corpus, so every source chunk is found; extractive answers quote the context.
    assert report.metrics["hit_rate@4"] == 1.0 and 0 < report.metrics["mrr"] <= 1.0
    assert 0 < report.metrics["ndcg@4"] <= 1.0
    assert report.metrics["answer_support"] == 1.0
    assert report.metrics["citation_precision"] == 1.0 and report.metrics["citation_recall"] == 1.0
    assert report.metrics["answer_correctness"] is None and report.metrics["questions"] == 4


def test_missing_source_chunk_scores_zero_retrieval(resource):
    rag = RAG(resources=[resource], generation_chain=rag_chain_from_docs(ExtractiveAnswerer()))
    item = QAEval(id="x", question="Where is Big Ben?", answer="A sentence found nowhere.", chunk_id="nope",
                  context="A sentence found nowhere.")
    report = run_qa_evals(rag, [item], k=2, embedding=None)
    assert (report.metrics["hit_rate@2"], report.metrics["mrr"], report.metrics["ndcg@2"]) == (0.0, 0.0, 0.0)


def test_judge_grades_answer_correctness(resource):
    rag = RAG(resources=[resource], generation_chain=rag_chain_from_docs(ExtractiveAnswerer()))
    evals = build_qa_evals(resource, n=2)
    report = run_qa_evals(rag, evals, k=2, embedding=None, judge=FakeListChatModel(responses=["Yes.", "no"]))
    assert report.metrics["answer_correctness"] == 0.5


def test_report_has_a_metrics_table_and_a_png_chart(tmp_path, resource):
    rag = RAG(resources=[resource], generation_chain=rag_chain_from_docs(ExtractiveAnswerer()))
    report = run_qa_evals(rag, build_qa_evals(resource, n=2), k=2, embedding=None)
    path = write_qa_report(report, tmp_path / "out")
    text = path.read_text()
    assert f"![metrics]({CHART_FILE})" in text and "| mrr |" in text and "| q001 |" in text
    assert (tmp_path / "out" / CHART_FILE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_empty_evals_and_unlistable_corpora_are_input_errors(resource):
    with pytest.raises(InputError, match="no QA eval items"):
        run_qa_evals(RAG(resources=[resource]), [], embedding=None)
    with pytest.raises(InputError, match="cannot list the chunks"):
        build_qa_evals(object(), n=1)


def test_save_creates_the_directory(tmp_path):
    item = QAEval(id="a", question="q?", answer="a", chunk_id="c", context="a")
    assert load_qa_evals(save_qa_evals([item], tmp_path / "new" / "e.jsonl")) == [item]


def test_offline_questions_are_questions_a_person_asks_with_the_answer_taken_out(resource):
    evals = {e.question: e.answer for e in build_qa_evals(resource, n=4)}
    assert evals == {
        "What is in Paris?": "The Eiffel Tower",
        "The amphitheatre could hold about how many spectators at games?": "50,000",
        "What is in Barcelona?": "The Sagrada Familia",
        "What is the bell of the clock tower at the Palace of Westminster in London?": "Big Ben",
    }


_SUBJECTS = ["The default store", "Chroma", "The answerer", "Every chunk", "The report"]
_OBJECTS = ["it", "them", "they", "him", "her"]


@given(st.sampled_from(_SUBJECTS), st.sampled_from(["is", "was", "are"]), st.sampled_from(["written after", "kept beside",
       "read before", "stored next to"]), st.sampled_from(_OBJECTS))
@settings(max_examples=40, deadline=None)
def test_no_offline_question_needs_the_sentence_before_it(subject, verb, middle, pronoun):
    """A sentence whose rest refers back ("No rule was written after it.") or ends elliptically ("... is a plain
    question's.") makes no question: "What was written after it?" cannot be answered from the corpus."""
    from rag.evaluation.qa_questions import sentence_question

    assert sentence_question(f"{subject} {verb} {middle} {pronoun} in the knowledge base.") is None
    assert sentence_question(f"{subject} {verb} a plain question's.") is None
    assert sentence_question(f"{subject} {verb} {middle} the index in the knowledge base.") is not None   # the control


_CELLS = st.one_of(st.from_regex(r"[a-z]{3,9}", fullmatch=True), st.from_regex(r"\d{1,3}/\d{1,3} \(\d{1,2}%\)", fullmatch=True),
                   st.from_regex(r"\d{2,3} ms", fullmatch=True), st.from_regex(r"\d{2,3} \(\d{2} \+ \d\)", fullmatch=True))


@given(st.lists(_CELLS, min_size=4, max_size=9), st.sampled_from([" | ", "; "]))
@settings(max_examples=60, deadline=None)
def test_no_offline_question_is_made_from_a_table_row(cells, separator):
    """A table row ("werkzeug | 59 (51 + 8) | 50/51 (98%) | 225 ms") is no sentence: asking "werkzeug; 59 (51 + 8);
    50/51 ( what percentage) ...?" tests nothing a person asks (found on docs/generation.md's results tables)."""
    from rag.evaluation.qa_questions import sentence_question

    assert sentence_question(separator.join(cells)) is None


@given(st.sampled_from(["that", "which", "who", "if", "because"]), st.sampled_from(_SUBJECTS))
@settings(max_examples=20, deadline=None)
def test_no_offline_question_takes_a_clause_for_the_subject(relative, subject):
    """In "No answer to a question that is not a comparison changed." the verb "is" belongs to a clause: "What is
    not a comparison changed?" / "No answer to a question that" is no question and no answer."""
    from rag.evaluation.qa_questions import sentence_question

    assert sentence_question(f"No answer to a question {relative} is not a comparison changed in the report.") is None
    assert sentence_question(f"{subject} is the part that changed in the index.") is not None   # the control
