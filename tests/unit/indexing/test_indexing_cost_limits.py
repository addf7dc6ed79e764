"""What one file may cost to read: table detection within limits per page and per file, long texts chunked
in bounded pieces; what hits a limit is read more cheaply and noted."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.chunking import TokenChunker
from rag.indexing.loaders import LoadLimits, load_directory, load_file
from rag.indexing.tokens import ApproximateTokenizer
from rag.testing.hostile_files import inflating_pdf

_SLOW = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_a_small_pdf_inflating_to_a_megabyte_page_is_read_as_text_without_table_detection(tmp_path):
    path = tmp_path / "bomb.pdf"
    assert inflating_pdf(path, rows=40_000) < 5_000
    notes: list[str] = []
    [doc] = load_file(path, notes=notes)
    assert doc.page_content.count("Net sales 1,234 5,678") == 40_000
    assert "chunk_type" not in doc.metadata
    assert notes == [("page 1: tables not detected (919,998 characters, 40,000 objects; limits 20,000 / 20,000); "
                      "read as text")]


def test_the_notes_reach_the_index_report(tmp_path):
    inflating_pdf(tmp_path / "bomb.pdf", rows=2_000)
    kb = KnowledgeBase("docs", tmp_path / "store", embedding=DeterministicFakeEmbedding(size=8))
    report = kb.add_documents(tmp_path / "bomb.pdf")
    assert report.added and [n.path for n in report.notes] == [str(tmp_path / "bomb.pdf")]
    assert "tables not detected" in report.notes[0].note


@_SLOW
@given(rows=st.lists(st.integers(1, 120), min_size=1, max_size=4), max_chars=st.integers(0, 2_000))
def test_pages_over_the_character_limit_skip_table_detection_and_keep_all_their_text(tmp_path, make_pdf, rows,
                                                                                    max_chars):
    pages = ["\n".join(f"Segment {n} {n * 3:,} {n * 7:,}" for n in range(count)) for count in rows]
    path = tmp_path / "rows.pdf"
    make_pdf(path, pages)
    notes: list[str] = []
    docs = load_file(path, limits=LoadLimits(table_max_chars=max_chars), notes=notes)
    noted = {int(n.split(":")[0].split()[1]) - 1 for n in notes}
    for index, page in enumerate(pages):
        text = "".join(d.page_content for d in docs if d.metadata["page"] == index)
        if index in noted:  # over the limit: its text as pdfium reads it, no table documents
            assert all(line in text for line in page.splitlines())
            assert not any(d.metadata.get("chunk_type") for d in docs if d.metadata["page"] == index)
    tabular_over = {i for i, p in enumerate(pages) if len(p.splitlines()) >= 3 and len(p) + len(p.splitlines()) > max_chars}
    assert noted <= tabular_over


def test_a_spent_table_budget_leaves_the_remaining_pages_as_text_and_says_so(tmp_path, make_pdf):
    page = "\n".join(f"Segment {n} {n * 3:,} {n * 7:,}" for n in range(12))
    make_pdf(tmp_path / "rows.pdf", [page, page, page])
    notes: list[str] = []
    docs = load_file(tmp_path / "rows.pdf", limits=LoadLimits(table_seconds=0), notes=notes)
    assert sorted({d.metadata["page"] for d in docs}) == [0, 1, 2]
    assert notes == ["pages 1, 2, 3: tables not detected (table_seconds=0 spent on this file); read as text"]


def test_limits_apply_to_a_directory_walk(tmp_path):
    inflating_pdf(tmp_path / "bomb.pdf", rows=300)
    assert not load_directory(tmp_path).notes
    report = load_directory(tmp_path, limits=LoadLimits(table_max_objects=100))
    assert [n.note.split(";")[0] for n in report.notes] == [
        "page 1: tables not detected (6,898 characters, 300 objects"]


@_SLOW
@given(paragraphs=st.lists(st.integers(1, 400), min_size=1, max_size=60), blank=st.booleans())
def test_a_long_text_without_headings_is_chunked_in_pieces_and_nothing_is_lost(paragraphs, blank):
    joiner = "\n\n" if blank else " "
    text = joiner.join(" ".join(f"w{p}x{n}" for n in range(words)) for p, words in enumerate(paragraphs))
    chunker = TokenChunker(chunk_size=64, chunk_overlap=0, tokenizer=ApproximateTokenizer())
    chunks = chunker.split_documents([Document(page_content=text, metadata={"source": "big.txt"})])
    assert " ".join(c.page_content for c in chunks).split() == text.split()
    for chunk in chunks:
        start = chunk.metadata["start_index"]
        assert text[start:start + len(chunk.page_content)] == chunk.page_content


@pytest.mark.parametrize("size", [200_000])
def test_a_section_longer_than_a_piece_is_cut_at_a_paragraph(size):
    text = ("alpha beta gamma. " * 40 + "\n\n") * (size // 740)
    chunker = TokenChunker(chunk_size=200, chunk_overlap=0, tokenizer=ApproximateTokenizer())
    chunks = chunker.split_documents([Document(page_content=text, metadata={"source": "big.txt"})])
    assert all(not c.page_content.startswith(("beta", "gamma")) for c in chunks)
    assert sum(len(c.page_content.split()) for c in chunks) == len(text.split())


def test_the_documented_defaults():
    limits = LoadLimits()
    assert (limits.table_max_chars, limits.table_max_objects, limits.table_seconds, limits.ocr_max_pages) == (
        20_000, 20_000, 120.0, 2_000)
