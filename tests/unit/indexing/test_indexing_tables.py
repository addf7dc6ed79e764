"""PDF tables: which pages go to pdfplumber, how a table is cut into chunks, and a real filing."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from rag.evaluation.financebench import DATA_ENV_VAR
from rag.indexing.autocontext import AutoContext
from rag.indexing.chunking import TokenChunker
from rag.indexing.loaders import load_file
from rag.indexing.tables import looks_tabular, render_table, split_table
from rag.indexing.tokens import ApproximateTokenizer

APPROX = ApproximateTokenizer()
ROOT = Path(__file__).resolve().parents[3]
PDFS = Path(os.environ.get(DATA_ENV_VAR) or ROOT.parent / "shared" / "data" / "financebench") / "pdfs"
FILING = PDFS / "3M_2022_10K.pdf"


def test_rows_of_figures_look_tabular_and_prose_with_figures_does_not():
    statement = "Net sales $ 34,229 $ 35,355\nCost of sales 19,232 18,795\nGain (2,724) — (389)\nTotal 1.2 % 3.4 %\n"
    prose = ("Revenue grew 4% in 2022 to $34.2 billion, and margins improved by 120 basis points.\n"
             "Cash was $3.6 billion at year end, against $4.6 billion in 2021, after buybacks.\n") * 6
    assert looks_tabular(statement * 2)
    assert not looks_tabular(prose)
    assert not looks_tabular(prose * 3 + statement)  # a few rows on a page of prose


_prose_line = st.lists(st.one_of(st.from_regex(r"[A-Za-z]{1,10}", fullmatch=True),
                                 st.from_regex(r"\$?[0-9][0-9,]{0,6}%?", fullmatch=True)), min_size=1, max_size=15)


@settings(max_examples=50, deadline=None)
@given(lines=st.lists(_prose_line.map(lambda words: " ".join(words) + " end."), min_size=1, max_size=60))
def test_lines_ending_like_sentences_never_look_tabular(lines):
    assert not looks_tabular("\n".join(lines))


def test_cells_are_joined_and_empty_ones_dropped():
    assert render_table([["Net sales", "", "$", "34,229", None], [None, ""], ["A|B", " 1\n2 "]]) == [
        "Net sales | $34,229", "A/B | 1 2"]


_row = st.lists(st.from_regex(r"[A-Za-z0-9,()$]{1,12}", fullmatch=True), min_size=1, max_size=12).map(" | ".join)


@settings(max_examples=60, deadline=None)
@given(header=st.lists(_row, min_size=1, max_size=3), rows=st.lists(_row, min_size=1, max_size=80),
       size=st.integers(16, 254), max_chars=st.integers(64, 2000))
def test_a_long_table_is_cut_between_rows_with_its_header_in_every_part(header, rows, size, max_chars):
    text = "\n".join(header + rows)
    spans = [m.span() for m in re.finditer(r"[^\W\d_]{1,5}|\d{1,3}|[^\w\s]|_", text)]
    chunker = TokenChunker(chunk_size=size, chunk_overlap=0, max_chars=max_chars, tokenizer=APPROX)
    doc = Document(page_content=text, metadata={"source": "t.pdf", "chunk_type": "table",
                                                "table_header_lines": len(header)})
    chunks = chunker.split_documents([doc])
    assert all(c.metadata["chunk_type"] == "table" for c in chunks)
    assert all(len(c.page_content) <= max_chars and c.metadata["token_count"] <= size for c in chunks)
    lines = header + rows
    parts = split_table(text, spans, header_lines=len(header), size=size, max_chars=max_chars)
    if parts[0][:2] == (0, len(lines)):
        assert [c.page_content for c in chunks] == [text]  # fits: kept whole
        return
    assert [n for first, end, _, _ in parts for n in range(first, end)] == list(range(parts[0][0], len(lines)))
    header_dropped = parts[0][0] == 0  # a header longer than half a chunk is not repeated
    for first, end, _, with_header in parts:
        assert with_header or header_dropped or end - first == 1  # only a row too long for the header comes alone
        if with_header:
            assert "\n".join(header + lines[first:end]) in [c.page_content for c in chunks]


@pytest.fixture(scope="module")
def filing_pages(tmp_path_factory):
    """Three pages of 3M's 2022 10-K: prose (auditor's report), the income statement, revenue tables."""
    if not FILING.exists():
        pytest.skip(f"FinanceBench filings not found at {FILING.parent} (set {DATA_ENV_VAR})")
    import pypdfium2 as pdfium

    path = tmp_path_factory.mktemp("filing") / "3M_2022_10K_pages.pdf"
    source, subset = pdfium.PdfDocument(str(FILING)), pdfium.PdfDocument.new()
    subset.import_pages(source, [8, 47, 59])
    subset.save(str(path))
    return path


def test_tables_of_a_real_filing_become_whole_table_chunks_with_their_caption(filing_pages):
    docs = load_file(filing_pages)
    chunks = TokenChunker().split_documents(docs)
    tables = [c for c in chunks if c.metadata.get("chunk_type") == "table"]
    text = [c for c in chunks if c.metadata.get("chunk_type") != "table"]
    assert {c.metadata["page"] for c in tables} == {1, 2}   # the prose page has none
    income = [c for c in tables if c.metadata["page"] == 1]
    assert all("Consolidated Statement of Income" in c.metadata["section"] for c in income)
    assert all("(Millions, except per share amounts) 2022 2021 2020" in c.page_content for c in income)
    assert any("Net sales | $34,229 | $35,355 | $32,184" in c.page_content for c in income)
    assert any(re.search(r"^Cost of sales \| 19,232 \| 18,795 \| 16,605$", c.page_content, re.MULTILINE) for c in income)
    assert not any("19,232" in c.page_content for c in text)   # the table is not repeated as loose text
    header = AutoContext().header(income[0].metadata, "")
    assert "Consolidated Statement of Income" in header
    regions = [c for c in tables if "Asia Pacific | 9,901 | 10,600 | 9,569" in c.page_content]
    assert len(regions) == 1 and "Net Sales (Millions) 2022 2021 2020" in regions[0].page_content


def test_tables_without_vertical_rules_are_read_row_by_row(tmp_path):
    """Best Buy's statements shade rows instead of ruling columns: columns come from the printed rows."""
    if not (PDFS / "BESTBUY_2017_10K.pdf").exists():
        pytest.skip(f"FinanceBench filings not found at {PDFS} (set {DATA_ENV_VAR})")
    import pypdfium2 as pdfium

    path = tmp_path / "bestbuy_pages.pdf"
    subset = pdfium.PdfDocument.new()
    subset.import_pages(pdfium.PdfDocument(str(PDFS / "BESTBUY_2017_10K.pdf")), [55])
    subset.save(str(path))
    docs = load_file(path)
    table = next(d for d in docs if d.metadata.get("chunk_type") == "table")
    assert table.metadata["section"] == "Consolidated Statements of Earnings"
    assert "Restructuring charges — cost of goods sold | — | 3 | —" in table.page_content.splitlines()
    assert "Revenue | $39,403 | $39,528 | $40,339" in table.page_content.splitlines()
    assert not any("39,403" in d.page_content for d in docs if d is not table)


def test_without_table_detection_pages_stay_plain_text(filing_pages):
    docs = load_file(filing_pages, tables=False)
    assert [d.metadata["page"] for d in docs] == [0, 1, 2]
    assert not any(d.metadata.get("chunk_type") for d in docs)
    assert "Cost of sales 19,232 18,795 16,605" in docs[1].page_content
