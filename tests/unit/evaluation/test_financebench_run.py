"""FinanceBench scoring: context hit within the budget, chunk hit@k / MRR, reports on disk."""

from __future__ import annotations

import json

import pytest
from langchain_core.documents import Document

from rag.base.errors import ConfigError
from rag.evaluation.financebench import FinanceBenchData, Question
from rag.evaluation.financebench_report import markdown_table, write_report
from rag.evaluation.financebench_run import (
    Retrieval,
    cap_context,
    document_pages,
    estimate_tokens,
    run_benchmark,
    score_question,
)
from rag.testing.financebench import write_synthetic_financebench


def chunk(doc: str, page: int, text: str = "x" * 400) -> Document:
    return Document(page_content=text, metadata={"doc_name": doc, "page": page})


QUESTION = Question(id="q1", question="q", doc_name="A", evidence_pages=frozenset({("A", 7)}))


def test_context_hit_needs_the_gold_page_inside_the_budget():
    hit_late = Retrieval(ranked=[], context=[chunk("A", 1), chunk("A", 2), chunk("A", 7)])
    assert score_question(QUESTION, hit_late, budget=300)["context_hit"] == 1.0
    assert score_question(QUESTION, hit_late, budget=200)["context_hit"] == 0.0   # page 7 is cut off


def test_same_page_of_another_filing_is_not_a_hit():
    other = Retrieval(ranked=[chunk("B", 7)], context=[chunk("B", 7)])
    scores = score_question(QUESTION, other)
    assert scores["context_hit"] == 0.0 and scores["hit@5"] == 0.0 and scores["mrr"] == 0.0


def test_chunk_metrics_follow_the_rank_of_the_first_gold_chunk():
    ranked = [chunk("A", 1), chunk("A", 2), chunk("A", 7), chunk("A", 7)]
    scores = score_question(QUESTION, Retrieval(ranked=ranked, context=[]))
    assert scores["hit@1"] == 0.0
    assert scores["hit@5"] == 1.0
    assert scores["mrr"] == pytest.approx(1 / 3)
    assert scores["context_tokens"] == 0.0


def test_cap_context_cuts_the_last_document_and_its_page_list():
    merged = Document(page_content="a" * 400 + "\n" + "b" * 400,
                      metadata={"doc_name": "A", "pages": [3, 4], "page_starts": [0, 401]})
    capped = cap_context([chunk("A", 1), merged], budget=150)
    assert len(capped) == 2 and len(capped[0].page_content) == 400
    assert 190 <= len(capped[1].page_content) <= 200 and estimate_tokens(capped[1].page_content) <= 50
    assert capped[1].metadata["pages"] == [3]          # page 4 starts after the cut
    assert document_pages(capped[1]) == {("A", 3)}


def test_cap_context_keeps_everything_within_budget():
    docs = [chunk("A", p) for p in range(4)]
    assert cap_context(docs, budget=4000) == docs


class FixedConfig:
    """Returns the same pages for every question: an oracle or a decoy."""

    def __init__(self, name: str, pages: dict[str, int] | None) -> None:
        self.name, self.description, self.pages = name, f"{name} config", pages
        self.calls: list[str | None] = []

    def retrieve(self, question: str, *, doc_name: str | None) -> Retrieval:
        self.calls.append(doc_name)
        if self.pages is None:
            docs = [chunk("NOPE", 0)]
        else:
            docs = [chunk(name, page) for name, page in self.pages.items()]
        return Retrieval(ranked=docs, context=docs)


@pytest.fixture
def data(tmp_path):
    return FinanceBenchData.load(write_synthetic_financebench(tmp_path / "fb"))


def test_run_benchmark_scores_every_setting_and_passes_the_filter(data):
    gold = {q.doc_name: next(iter(q.evidence_pages))[1] for q in data.questions}
    oracle, decoy = FixedConfig("oracle", gold), FixedConfig("decoy", None)
    report = run_benchmark(data, [oracle, decoy], settings=("single", "shared"))
    assert report.results["single"]["decoy"]["context_hit"] == 0.0
    # the oracle puts one page per filing in context; the last question per filing is the one it matches
    assert 0 < report.results["shared"]["oracle"]["context_hit"] <= 1.0
    assert oracle.calls[:5] == [q.doc_name for q in data.questions]      # single: filtered by doc_name
    assert oracle.calls[5:] == [None] * 5                                  # shared: no filter
    assert set(report.per_question["single/oracle"]) == {q.id for q in data.questions}


def test_run_benchmark_rejects_unknown_settings_and_duplicate_names(data):
    with pytest.raises(ConfigError, match="valid: single, shared"):
        run_benchmark(data, [FixedConfig("a", None)], settings=("everything",))
    with pytest.raises(ConfigError, match="unique"):
        run_benchmark(data, [FixedConfig("a", None), FixedConfig("a", None)])


def test_write_report_writes_markdown_json_and_png(data, tmp_path):
    report = run_benchmark(data, [FixedConfig("decoy", None)], settings=("single",))
    paths = write_report(report, tmp_path / "out", stem="fb")
    assert sorted(p.name for p in paths) == ["fb.json", "fb.md", "fb.png"]
    saved = json.loads((tmp_path / "out" / "fb.json").read_text(encoding="utf-8"))
    assert saved["results"]["single"]["decoy"]["context_hit"] == 0.0
    assert (tmp_path / "out" / "fb.png").read_bytes()[:4] == b"\x89PNG"
    md = (tmp_path / "out" / "fb.md").read_text(encoding="utf-8")
    assert "| decoy | 0.0% |" in md and "decoy config" in md


def test_markdown_table_marks_configs_missing_from_a_setting(data):
    report = run_benchmark(data, [FixedConfig("decoy", None)], settings=("single",))
    report.results["shared"] = {}
    assert markdown_table(report).splitlines()[-1].endswith("| - | - | - | - | - |")
