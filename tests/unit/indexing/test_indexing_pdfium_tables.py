"""The default PDF table finder (`rag.indexing.pdfium_tables`): tables read from pypdfium2's character boxes
into rows of " | " cells, prose and two-column text left as text, hostile pages bounded."""

from __future__ import annotations

from collections import Counter

import pypdfium2 as pdfium
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag.base.errors import ConfigError
from rag.indexing.loaders import LoadLimits, load_file
from rag.indexing.pdfium_tables import find_tables_pdfium, page_tables
from rag.testing.financebench import pdf_bytes, wrap_lines
from rag.testing.hostile_files import inflating_pdf

# Helvetica advance widths (1/1000 em) of the characters the tables use, to right-align figures
_WIDTHS = {**dict.fromkeys("0123456789$", 556), ",": 278, ".": 278, "(": 333, ")": 333, "-": 333, " ": 278}
_SIZE = 10


def _width(text: str) -> float:
    return sum(_WIDTHS.get(ch, 556) for ch in text) * _SIZE / 1000


def write_placed_pdf(path, pages: list[list[tuple[float, float, str]]],
                     rules: list[tuple[float, float, float, float]] = ()) -> None:
    """One page per list of `(x, y, text)` items, Helvetica 10 pt, y from the page's bottom; `rules`: lines
    `(x0, y0, x1, y1)` drawn on the first page."""
    n = len(pages)
    font = 3 + 2 * n
    bodies = [b"<< /Type /Catalog /Pages 2 0 R >>",
              ("<< /Type /Pages /Kids [%s] /Count %d >>" % (" ".join(f"{3 + 2 * i} 0 R" for i in range(n)), n)).encode()]
    for i, items in enumerate(pages):
        ops = " ".join(f"BT /F1 {_SIZE} Tf {x:.2f} {y:.2f} Td ("
                       + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ") Tj ET"
                       for x, y, text in items)
        ops += "".join(f" 0.5 w {a} {b} m {c} {d} l S" for a, b, c, d in (rules if i == 0 else ()))
        data = ops.encode("latin-1", "replace")
        bodies.append((f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 {font} 0 R "
                       f">> >> /Contents {4 + 2 * i} 0 R >>").encode())
        bodies.append(b"<< /Length " + str(len(data)).encode() + b" >>\nstream\n" + data + b"\nendstream")
    bodies.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    path.write_bytes(pdf_bytes(bodies))


def table_items(rows: list[list[str]], *, top: float = 600, columns: tuple[float, ...] = (330, 420, 510),
                pitch: float = 14) -> list[tuple[float, float, str]]:
    """A statement: each row's label at the left margin, its figures right-aligned on `columns`."""
    items = []
    for n, (label, *figures) in enumerate(rows):
        y = top - n * pitch
        items.append((40, y, label))
        items += [(right - _width(fig), y, fig) for right, fig in zip(columns, figures, strict=False)]
    return items


PROSE = ("Net sales grew 4% in 2022, driven by price increases across the segments, while cost of sales rose "
         "in line with volume. Operating margin was 19.1% against 20.8% in the prior year, as described below.")


def _lines(text: str, width: int = 90) -> list[str]:
    return wrap_lines(text, width)


def test_a_statement_is_read_into_rows_of_cells_with_its_title_and_the_prose_stays_text(tmp_path):
    statement = [["Net sales", "$ 34,229", "$ 35,355", "$ 32,184"], ["Operating expenses"],
                 ["Cost of sales", "19,232", "18,795", "16,605"], ["Gain on divestitures", "(2,724)", "-", "(389)"],
                 ["Total operating expenses", "27,690", "27,986", "25,023"]]
    items = [(40, 740 - 14 * n, line) for n, line in enumerate(_lines(PROSE))]   # a paragraph, ending with "."
    items += [(40, 680, "Consolidated Statement of Income"), (40, 666, "(Millions)"), (310, 666, "2022"),
              (400, 666, "2021"), (490, 666, "2020")]
    items += table_items(statement, top=650)
    items += [(40, 560 - 14 * n, line) for n, line in enumerate(_lines(PROSE))]
    write_placed_pdf(tmp_path / "statement.pdf", [items])
    docs = load_file(tmp_path / "statement.pdf")
    [table] = [d for d in docs if d.metadata.get("chunk_type") == "table"]
    assert table.page_content.splitlines() == [
        "Consolidated Statement of Income", "(Millions) 2022 2021 2020",
        "Net sales | $34,229 | $35,355 | $32,184", "Operating expenses", "Cost of sales | 19,232 | 18,795 | 16,605",
        "Gain on divestitures | (2,724) | - | (389)", "Total operating expenses | 27,690 | 27,986 | 25,023"]
    assert table.metadata["section"] == "Consolidated Statement of Income"
    assert table.metadata["table_header_lines"] == 2 and table.metadata["page"] == 0
    text = " ".join(d.page_content for d in docs if d is not table)
    assert "19,232" not in text and "Net sales grew 4% in 2022" in text and "as described below." in text
    assert [d.metadata.get("chunk_type") for d in docs] == [None, "table", None]   # in reading order


def test_the_pdfplumber_finder_stays_available_and_reads_the_same_table(tmp_path):
    pytest.importorskip("pdfplumber")
    rows = [["Revenue", "1,200", "1,100"], ["Cost of revenue", "700", "650"], ["Gross profit", "500", "450"]]
    grid = [(35, 614 - 14 * n, 425, 614 - 14 * n) for n in range(4)] + [(x, 614, x, 572) for x in (35, 250, 340, 425)]
    write_placed_pdf(tmp_path / "t.pdf", [table_items(rows, columns=(330, 420))], rules=grid)
    for finder in ("pdfium", "pdfplumber"):
        docs = load_file(tmp_path / "t.pdf", tables=finder)
        tables = [d.page_content for d in docs if d.metadata.get("chunk_type") == "table"]
        assert any("Cost of revenue | 700 | 650" in t for t in tables), finder
    with pytest.raises(ConfigError, match="valid: 'pdfium', 'pdfplumber', 'none', True"):
        LoadLimits(tables="camelot")


def test_prose_and_two_column_text_with_figures_yield_no_table(tmp_path):
    left = _lines(PROSE * 3, width=40)
    right = _lines(("The company repurchased 12.5 million shares for $2,100 million in 2022 and paid dividends of "
                    "$3,369 million, up from 3,420 in 2021 and 3,388 in 2020. ") * 3, width=40)
    columns = [(40, 740 - 14 * n, line) for n, line in enumerate(left)]
    columns += [(320, 740 - 14 * n, line) for n, line in enumerate(right)]
    prose = [(40, 740 - 14 * n, line) for n, line in enumerate(_lines(PROSE * 4))]
    write_placed_pdf(tmp_path / "text.pdf", [columns, prose])
    pdf = pdfium.PdfDocument(str(tmp_path / "text.pdf"))
    for index in range(len(pdf)):
        textpage = pdf[index].get_textpage()
        assert page_tables(textpage, 792) == []
    docs = load_file(tmp_path / "text.pdf")
    assert not any(d.metadata.get("chunk_type") for d in docs)


_token = st.one_of(st.sampled_from(["Net", "sales", "Total", "of", "assets", "cost", "(loss)", "$", "-", "2022"]),
                   st.integers(0, 10**7).map(lambda n: f"{n:,}"), st.integers(0, 999).map(lambda n: f"({n})"))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.lists(_token, min_size=1, max_size=10), st.integers(0, 3)), min_size=1,
                     max_size=40))
def test_any_page_of_rows_loses_and_invents_no_word(tmp_path, rows):
    """Labels and figures anywhere on the page: every word is in a table or in the text, once; nothing else is."""
    items = []
    for n, (tokens, jitter) in enumerate(rows):
        y = 760 - n * 12 + jitter
        x = 40.0
        for k, token in enumerate(tokens):
            items.append((x, y, token))
            x += _width(token) + (40 if k % 3 == 2 else 3)
    write_placed_pdf(tmp_path / "rows.pdf", [items])
    docs = load_file(tmp_path / "rows.pdf", limits=LoadLimits(ocr=False))   # a page of signs alone would go to OCR
    plain = load_file(tmp_path / "rows.pdf", limits=LoadLimits(tables=False, ocr=False))
    assert _characters(docs) == _characters(plain)   # cells are joined by " | ", "$ 5" becomes "$5": nothing else


def _characters(docs) -> Counter:
    return Counter("".join(d.page_content.replace(" | ", "") for d in docs).replace(" ", "").replace("\n", ""))


def test_huge_pages_stay_bounded_when_the_limits_let_them_through(tmp_path):
    """5,000 rows on one page (5 times the default limits): the finder is linear (sorts and one pass), and every
    row is read once; so is a page of 8,000 figures in 40 rows."""
    inflating_pdf(tmp_path / "rows.pdf", rows=5_000)
    limits = LoadLimits(table_max_chars=10**9, table_max_objects=10**9)
    docs = load_file(tmp_path / "rows.pdf", limits=limits)
    assert sum(d.page_content.count("Net sales") for d in docs) == 5_000
    assert [d.metadata.get("chunk_type") for d in docs] == ["table"]
    wide = [(40 + 30 * k, 700 - 12 * n, f"{k},{n:03d}") for n in range(40) for k in range(1, 200)]
    write_placed_pdf(tmp_path / "wide.pdf", [wide])
    docs = load_file(tmp_path / "wide.pdf", limits=limits)
    assert sum(d.page_content.count(",") for d in docs) == 40 * 199


def test_find_tables_pdfium_keeps_find_tables_contract(tmp_path):
    rows = [["Revenue", "1,200", "1,100"], ["Cost of revenue", "700", "650"], ["Gross profit", "500", "450"]]
    write_placed_pdf(tmp_path / "t.pdf", [table_items(rows, columns=(330, 420)), [(40, 700, "No table here.")]])
    pdf = pdfium.PdfDocument(str(tmp_path / "t.pdf"))
    found, unread = find_tables_pdfium(pdf, [0, 1])
    assert list(found) == [0] and unread == []
    assert found[0][0].lines == ["Revenue | 1,200 | 1,100", "Cost of revenue | 700 | 650", "Gross profit | 500 | 450"]
    assert find_tables_pdfium(pdf, [0, 1], deadline=0.0) == ({}, [0, 1])   # a spent budget: every page unread
