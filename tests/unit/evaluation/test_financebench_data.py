"""FinanceBench data loading: questions, pages (the library's PDF loader), the page chunker and the corpus knowledge base."""

from __future__ import annotations

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag import KnowledgeBase
from rag.base.errors import ConfigError
from rag.evaluation.financebench import (
    DATA_ENV_VAR,
    PAGE_LIMITS,
    FinanceBenchData,
    PageChunker,
    chunk_pages,
    document_title,
    page_list,
    resolve_data_dir,
)
from rag.evaluation.financebench_corpus import CORPUS_NAME, corpus_chunks
from rag.indexing.loaders import load_file
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


def test_pages_are_the_library_loaders_with_the_filings_metadata(data_dir):
    data = FinanceBenchData.load(data_dir)
    pdf = data_dir / "pdfs" / "GLOBEX_2023_10K.pdf"
    pages = data.pages("GLOBEX_2023_10K")
    assert [p.page_content for p in pages] == [d.page_content for d in load_file(pdf, limits=PAGE_LIMITS)]
    assert {p.metadata["source"] for p in pages} == {"GLOBEX_2023_10K.pdf"}
    assert {p.metadata["doc_name"] for p in pages} == {"GLOBEX_2023_10K"}
    assert data.page_texts("GLOBEX_2023_10K") == page_list(pages)


def test_the_corpus_is_a_knowledge_base_read_once_and_chunked_by_the_page_chunker(data_dir, tmp_path):
    data = FinanceBenchData.load(data_dir)
    fake = DeterministicFakeEmbedding(size=16)
    chunks, _ = corpus_chunks(data, cache_dir=tmp_path / "cache", chunk_size=200, embeddings=fake, progress=print)
    expected = data.chunks(chunk_size=200)   # the same loader and chunker, without a knowledge base
    assert [(c.id, c.page_content, c.metadata) for c in chunks] == \
        [(f"{c.metadata['doc_name']}#{c.metadata['chunk_index']}", c.page_content,
          {k: v for k, v in c.metadata.items() if k != "file_type"}) for c in expected]
    with pytest.raises(ConfigError, match="built with the chunker 'financebench-pages'.*pass chunker="):
        KnowledgeBase.open(CORPUS_NAME, tmp_path / "cache", embedding=fake)   # rag cannot make it by itself
    kb = KnowledgeBase.open(CORPUS_NAME, tmp_path / "cache", embedding=fake, chunker=PageChunker(chunk_size=200))
    assert kb.manifest.chunking == PageChunker(chunk_size=200).settings()
    assert kb.count() == len(chunks)
    # a second run finds every filing recorded: nothing is read or written
    said: list[str] = []
    again, _ = corpus_chunks(data, cache_dir=tmp_path / "cache", chunk_size=200, embeddings=fake, progress=said.append)
    assert [c.page_content for c in again] == [c.page_content for c in chunks]
    assert said == [f"reading 0 of {len(data.documents)} filings into the knowledge base {CORPUS_NAME!r}"]
    with pytest.raises(ConfigError, match="chunk_size=200"):   # the manifest records the chunker
        corpus_chunks(data, cache_dir=tmp_path / "cache", chunk_size=300, embeddings=fake, progress=print)


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
