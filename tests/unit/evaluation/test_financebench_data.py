"""FinanceBench data loading: questions, page texts (parsed once, cached) and page-aware chunks."""

from __future__ import annotations

import json

import pytest

from rag.base.errors import ConfigError
from rag.evaluation.financebench import (
    DATA_ENV_VAR,
    FinanceBenchData,
    chunk_pages,
    document_title,
    resolve_data_dir,
)
from rag.testing.financebench import SYNTHETIC_FILINGS, write_synthetic_financebench


@pytest.fixture
def data_dir(tmp_path):
    return write_synthetic_financebench(tmp_path / "fb")


def test_load_reads_questions_with_zero_based_evidence_pages(data_dir):
    data = FinanceBenchData.load(data_dir)
    assert len(data.questions) == 5
    assert sorted(data.documents) == sorted(SYNTHETIC_FILINGS)
    q = next(q for q in data.questions if q.id == "syn_3")
    assert q.doc_name == "ACME_2022_10K"
    assert q.evidence_pages == {("ACME_2022_10K", 3)}
    # the gold page really holds the evidence: zero-based page 3 is the legal proceedings page
    assert "patent lawsuit" in data.page_texts("ACME_2022_10K")[3]


def test_questions_whose_pdf_is_missing_are_left_out(data_dir):
    (data_dir / "pdfs" / "GLOBEX_2023_10K.pdf").unlink()
    data = FinanceBenchData.load(data_dir)
    assert {q.doc_name for q in data.questions} == {"ACME_2022_10K", "ACME_2023_10K"}
    assert "GLOBEX_2023_10K" not in data.documents


def test_limit_keeps_the_first_questions(data_dir):
    assert [q.id for q in FinanceBenchData.load(data_dir, limit=2).questions] == ["syn_1", "syn_2"]


def test_missing_directory_names_the_env_var(tmp_path):
    with pytest.raises(ConfigError, match=DATA_ENV_VAR):
        FinanceBenchData.load(tmp_path / "nowhere")


def test_bad_jsonl_line_reports_file_and_line(data_dir):
    with (data_dir / "questions.jsonl").open("a", encoding="utf-8") as fh:
        fh.write("{not json\n")
    with pytest.raises(ConfigError, match=r"questions.jsonl:6"):
        FinanceBenchData.load(data_dir)


def test_page_texts_are_cached_as_json_and_reused(data_dir, tmp_path):
    data = FinanceBenchData.load(data_dir)
    cache = tmp_path / "cache"
    first = data.page_texts("GLOBEX_2023_10K", cache_dir=cache)
    files = list((cache / "pages").glob("GLOBEX_2023_10K.*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text(encoding="utf-8")) == first
    # a second run reads the cache, not the PDF
    files[0].write_text(json.dumps(["from the cache"]), encoding="utf-8")
    assert data.page_texts("GLOBEX_2023_10K", cache_dir=cache) == ["from the cache"]


def test_chunks_never_cross_pages_and_are_numbered_across_the_document(data_dir):
    data = FinanceBenchData.load(data_dir)
    chunks = data.chunks(chunk_size=200, doc_names=["ACME_2022_10K"])
    pages = data.page_texts("ACME_2022_10K")
    assert [c.metadata["chunk_index"] for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert len(chunk.page_content) <= 200
        assert chunk.page_content in pages[chunk.metadata["page"]]
    assert {c.metadata["page"] for c in chunks} == {0, 1, 2, 3}
    assert chunks[0].metadata["title"] == "Acme Rockets 2022 10-K annual report"


def test_chunk_pages_skips_empty_pages_but_keeps_page_numbers():
    chunks = chunk_pages(["first page", "   ", "third page"], metadata={"doc_name": "D"}, chunk_size=100)
    assert [(c.page_content, c.metadata["page"]) for c in chunks] == [("first page", 0), ("third page", 2)]


def test_document_title_falls_back_to_the_doc_name():
    assert document_title({"doc_name": "ACME_2022_10K"}) == "ACME 2022 10K"
    assert document_title({"doc_name": "X", "company": "Acme", "doc_type": "10q", "doc_period": 2023}) == \
        "Acme 2023 10-Q quarterly report"


def test_resolve_data_dir_prefers_option_then_env(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_ENV_VAR, str(tmp_path / "env"))
    assert resolve_data_dir(tmp_path / "opt") == tmp_path / "opt"
    assert resolve_data_dir(None) == tmp_path / "env"
    monkeypatch.delenv(DATA_ENV_VAR)
    assert str(resolve_data_dir(None)).endswith("shared/data/financebench")
