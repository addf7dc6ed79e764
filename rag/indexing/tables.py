"""Tables in PDFs: find them cheaply, read them (with pdfplumber here; by default from pypdfium2's character
boxes, `rag.indexing.pdfium_tables`), keep each one whole as chunks.

pypdfium2 reads a page in about 5 ms and prints a table row per line ("Net sales $ 34,229 $
35,355"), but the chunker would cut a long table anywhere and a reader of one chunk would not know
which table, which columns. pdfplumber finds tables from the page's ruling lines and cell
backgrounds and reads them cell by cell, but it re-parses the page with pdfminer.six (about
0.25-1 s a page). So a page goes to a table finder only when its pypdfium2 text looks tabular
(`looks_tabular`): at least `MIN_NUMERIC_ROWS` lines that read like table rows (two or more
figures or dashes, ending on one), making at least `MIN_NUMERIC_SHARE` of its lines. A line of
prose rarely ends on a figure, so prose pages, even with many figures, seldom qualify. On the
252 pages of 3M's 2022 10-K this sends 63 pages to pdfplumber, of which 57 hold a table, and
misses 5 small tables (a table of contents with page numbers, three of two to four rows, an
exhibit list); pdfplumber over all pages finds 70 pages with tables.

A table becomes one `Document` with `chunk_type="table"`: the short lines printed just above it
(title, period, column headers such as "(Millions) 2022 2021 2020"; not sentences) and then one
line per row, cells joined with " | ". Its `section` is the table's caption ("Table 3 ...") or
the heading nearest above it on the page (else the chunker fills in the heading in effect).
`split_table` keeps a table whole when it fits a chunk, else cuts it between rows and repeats
the header lines in every part.

Example:
    >>> looks_tabular("Net sales $ 34,229 $ 35,355\\nCost of sales 19,232 18,795\\n" * 4)
    True
    >>> looks_tabular("Revenue grew 4% in 2022 and margins improved.\\n" * 8)
    False
"""

from __future__ import annotations

import io
import logging
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag.indexing.headings import is_heading_line
from rag.indexing.page_budget import PageTimeout, Watchdog

__all__ = ["MIN_NUMERIC_ROWS", "MIN_NUMERIC_SHARE", "PageTable", "find_tables", "looks_tabular", "owned_segments",
           "page_segments", "render_table", "split_row", "split_table"]

logger = logging.getLogger(__name__)

MIN_NUMERIC_ROWS = 3
MIN_NUMERIC_SHARE = 0.1
_DASHES = frozenset(["—", "–", "-", "$—", "$-"])
_NUMBER = re.compile(r"\(?[$€£]?\d[\d,]*(\.\d+)?\)?%?")
_MAX_HEADER_LINES = 6      # title, period and column-header lines printed above a table, kept with it
_MAX_HEADER_CHARS = 120
_LABEL_WORDS = 8
_MAX_LABELS = 3
_MARGIN = 2.0                # points around a table region: glyph boxes overhang the ruling lines
_TEXT_COLUMNS = {"vertical_strategy": "text", "horizontal_strategy": "lines"}
_CAPTION = re.compile(r"^(table|exhibit|schedule|figure)\s+[\dIVXivx]+[A-Za-z]?\b", re.IGNORECASE)


def _is_numeric_row(line: str) -> bool:
    """A line that reads like a table row: two or more figures (or dashes for nil), ending on one."""
    words = line.split()
    figures = sum(1 for word in words if _NUMBER.fullmatch(word))
    dashes = sum(1 for word in words if word in _DASHES)
    return figures >= 1 and figures + dashes >= 2 and (bool(_NUMBER.fullmatch(words[-1])) or words[-1] in _DASHES)


def looks_tabular(text: str) -> bool:
    """Whether a page's text has enough rows of figures to be worth a table detector.

    Example:
        >>> looks_tabular("Assets 3,655 4,564\\nGain (2,724) — (389)\\nTotal 1.2% 3.4%\\nHello")
        True
    """
    lines = [line for line in text.splitlines() if line.strip()]
    rows = sum(1 for line in lines if _is_numeric_row(line))
    return rows >= MIN_NUMERIC_ROWS and rows >= MIN_NUMERIC_SHARE * len(lines)


def is_caption(line: str) -> bool:
    """A table caption: "Table 3: Results", "Schedule II", "Exhibit 10.1 ..."."""
    return bool(_CAPTION.match(" ".join(line.split())))


def render_table(rows: Sequence[Sequence[str | None]]) -> list[str]:
    """One line per row, non-empty cells joined with " | " (a lone currency sign joins its number).

    Example:
        >>> render_table([["Net sales", "", "$", "34,229", None], ["", None], ["Cost", "19,232"]])
        ['Net sales | $34,229', 'Cost | 19,232']
    """
    lines = []
    for row in rows:
        cells: list[str] = []
        for cell in row:
            text = " ".join(str(cell or "").split()).replace("|", "/")
            if not text:
                continue
            if cells and cells[-1] in ("$", "€", "£"):
                cells[-1] += text
            else:
                cells.append(text)
        if cells:
            lines.append(" | ".join(cells))
    return lines


def split_table(text: str, spans: Sequence[tuple[int, int]], *, header_lines: int, size: int,
                max_chars: int) -> list[tuple[int, int, int, bool]]:
    """The parts of a table that fit a chunk: `(first row, end row, tokens, with_header)` line ranges.

    Rows are lines of `text`; the first `header_lines` lines are the header, repeated before the
    rows of every part (unless the header alone takes more than half a chunk). A row too long
    to share a chunk with the header comes alone, without it (the caller cuts it like text).

    Example:
        >>> text = "Item | 2022\\nA | 1\\nB | 2\\nC | 3\\n"
        >>> spans = [(m.start(), m.end()) for m in re.finditer(r"\\S+", text)]
        >>> split_table(text, spans, header_lines=1, size=9, max_chars=100)
        [(1, 3, 9, True), (3, 4, 6, True)]
    """
    lines = text.splitlines(keepends=True)
    bounds = np.cumsum([0] + [len(line) for line in lines])
    tokens = np.diff(np.searchsorted(np.asarray([s for s, _ in spans], dtype=np.int64), bounds))
    if len(spans) <= size and len(text) <= max_chars:
        return [(0, len(lines), len(spans), False)]
    header_tokens, header_chars = int(tokens[:header_lines].sum()), int(bounds[header_lines])
    if header_tokens > size // 2 or header_chars > max_chars // 2:
        header_lines = header_tokens = header_chars = 0
    parts: list[tuple[int, int, int, bool]] = []
    first = header_lines
    while first < len(lines):
        end, count, chars = first, header_tokens, header_chars
        while end < len(lines) and count + tokens[end] <= size and chars + len(lines[end]) <= max_chars:
            count, chars, end = count + int(tokens[end]), chars + len(lines[end]), end + 1
        if end == first:  # one row longer than a chunk with the header
            parts.append((first, first + 1, int(tokens[first]), False))
            first += 1
            continue
        parts.append((first, end, count, header_lines > 0))
        first = end
    return parts


@dataclass
class PageTable:
    """A table found on a PDF page: its lines (header lines first), caption and region.

    `top`, `bottom`, `x0`, `x1` are pdfplumber coordinates (points from the page's top-left),
    covering the header lines above the table too.
    """

    lines: list[str]
    header_lines: int
    caption: str | None
    x0: float
    top: float
    x1: float
    bottom: float


def _is_label(text: str) -> bool:
    """A caption, a heading, or a short label ending with a colon ("Disaggregated revenue information:")."""
    return is_caption(text) or is_heading_line(text) or (text.endswith(":") and len(text.split()) <= _LABEL_WORDS)


def _above(page: Any, top: float, floor: float) -> tuple[list[str], str | None, float, tuple[float, float]]:
    """The lines printed just above a table that belong to it, its caption, their top and horizontal extent.

    Walking up from the table: titles, captions, column headers and page furniture ("Table of
    Contents"), up to `_MAX_HEADER_LINES` short lines that are not sentences. The caption joins
    the labels among them (captions, headings, short lines ending with ":"), at most
    `_MAX_LABELS` from the top ("Consolidated Balance Sheet / At December 31").
    """
    try:
        # 1 point short of the table: a crop also keeps the characters that only touch it.
        lines = page.crop((0, floor, page.width, top - 1), strict=False).extract_text_lines()
    except ValueError:  # an empty crop
        return [], None, top, (page.width, 0.0)
    header: list[str] = []
    labels: list[str] = []
    region_top, left, right = top, float(page.width), 0.0
    for line in reversed(lines):
        text = " ".join(str(line.get("text", "")).split())
        if not text:
            continue
        if len(header) >= _MAX_HEADER_LINES or len(text) > _MAX_HEADER_CHARS or text.endswith("."):
            break
        if _is_label(text):
            labels.insert(0, text)
        header.insert(0, text)
        region_top, left, right = float(line["top"]), min(left, float(line["x0"])), max(right, float(line["x1"]))
    return header, " / ".join(labels[:_MAX_LABELS]) or None, region_top, (left, right)


def split_row(line: str) -> list[str]:
    """Cells of a printed table row: the label, then each trailing figure or dash (`%` joins its figure).

    Example:
        >>> split_row("Restructuring charges — cost of goods sold — 3 33.9 %")
        ['Restructuring charges — cost of goods sold', '—', '3', '33.9%']
    """
    words = line.split()
    values: list[str] = []
    while words and (_NUMBER.fullmatch(words[-1]) or words[-1] in _DASHES or words[-1] in ("$", "%")):
        word = words.pop()
        if values and values[0] == "%":
            values[0] = word + "%"
        else:
            values.insert(0, word)
    return ([" ".join(words)] if words else []) + values


def _tables(page: Any, settings: dict[str, str] | None) -> list[tuple[tuple[float, float, float, float], list[str]]]:
    """`(bbox, rendered rows)` of the tables pdfplumber finds with `settings` (None: ruling lines)."""
    found = []
    for table in page.find_tables(settings) if settings else page.find_tables():
        x0, top, x1, bottom = table.bbox
        if settings:
            # Columns inferred from text alignment cut words and miss the row labels' first letters:
            # take the full width, and read the rows as printed.
            x0, x1 = 0.0, float(page.width)
            lines = page.crop((x0, top, x1, bottom), strict=False).extract_text_lines()
            while lines and len(split_row(str(lines[0].get("text", "")))) < 2:
                lines.pop(0)  # titles above the first row: the header and caption, found by _above
            if not lines:
                continue
            top = float(lines[0]["top"])
            rows = render_table([split_row(str(line.get("text", ""))) for line in lines])
        else:
            rows = render_table(table.extract())
        if sum(" | " in row for row in rows) >= 2:  # one column or one row: a text box, not a table
            found.append(((x0, top, x1, bottom), rows))
    return found


def _page_tables(page: Any) -> list[PageTable]:
    # Tables drawn with ruling lines or cell backgrounds first; filings that shade alternate rows
    # or rule only horizontally give one-row "tables" there, so then columns come from the text.
    tables = _tables(page, None) or _tables(page, _TEXT_COLUMNS)
    found = []
    floor = 0.0
    for (x0, top, x1, bottom), rows in sorted(tables, key=lambda t: t[0][1]):
        header, caption, region_top, (left, right) = _above(page, top, floor)
        found.append(PageTable(header + rows, len(header) or 1, caption, min(x0, left) - _MARGIN, region_top - _MARGIN,
                               max(x1, right) + _MARGIN, bottom + _MARGIN))
        floor = bottom
    return found


def find_tables(path: str | Path | bytes, pages: Sequence[int], *, deadline: float | None = None,
                page_seconds: float | None = None,
                cut: list[int] | None = None) -> tuple[dict[int, list[PageTable]], list[int]]:
    """Tables of the given zero-based `pages` of a PDF (its path or bytes), read with pdfplumber, and the pages left
    unread.

    Pages are read in order until `deadline` (a `time.monotonic()` value) has passed; the pages
    after it are returned as unread. A page that takes more than `page_seconds` is cut off
    (`rag.indexing.page_budget`: pdfplumber's time is not linear in a page) and added to `cut`;
    the file is opened again for the pages after it. A page pdfplumber fails on is left without
    tables (and logged); without pdfplumber installed no page has tables.
    """
    if not pages:
        return {}, []
    try:
        import pdfplumber
    except ImportError:
        logger.warning("pdfplumber is not installed: PDF tables are indexed as plain text "
                       "(pip install pdfplumber)")
        return {}, []
    out: dict[int, list[PageTable]] = {}
    todo = list(pages)
    with Watchdog(math.inf if page_seconds is None else page_seconds) as watchdog:
        while todo:   # (opened again after a page was cut off: its parser state is not trusted)
            source = io.BytesIO(path) if isinstance(path, bytes) else str(path)
            with pdfplumber.open(source, pages=[n + 1 for n in todo]) as pdf:
                for done, page in enumerate(pdf.pages):
                    if deadline is not None and time.monotonic() > deadline:
                        return out, todo[done:]
                    try:
                        with watchdog.step():
                            tables = _page_tables(page)
                    except PageTimeout:
                        (cut if cut is not None else []).append(todo[done])
                        todo = todo[done + 1:]
                        break
                    except Exception as exc:  # noqa: BLE001 - a malformed page keeps its plain text
                        logger.info("%s page %d: table detection failed (%s)", "PDF" if isinstance(path, bytes) else path,
                                    page.page_number - 1, exc)
                        tables = []
                    if tables:
                        out[page.page_number - 1] = tables
                    page.close()
                else:
                    todo = []
    return out, []


def _digits(text: str) -> int:
    return sum(map(text.count, "0123456789"))


def page_segments(textpage: Any, height: float, tables: Sequence[PageTable]) -> list[str | PageTable]:
    """The page in reading order: its text outside the tables, each table where it starts.

    A character belongs to a table when its centre lies in the table's region. When the text
    removed does not hold about the digits of the table (pdfplumber and pdfium disagree on the
    page's geometry), the page is kept whole, and the tables are only appended: text may then
    repeat, but none is lost.
    """
    import pypdfium2.raw as pdfium_c

    owner: list[int] = []
    for index in range(textpage.count_chars()):
        if chr(pdfium_c.FPDFText_GetUnicode(textpage.raw, index)).isspace() and owner:
            owner.append(owner[-1])  # spaces and line breaks (often generated, without a box) go with their line
            continue
        left, bottom, right, top = textpage.get_charbox(index)
        x, y = (left + right) / 2, height - (top + bottom) / 2
        owner.append(next((n for n, t in enumerate(tables) if t.x0 <= x <= t.x1 and t.top <= y <= t.bottom), -1))
    return owned_segments(textpage, owner, tables)


def owned_segments(textpage: Any, owner: Sequence[int], tables: Sequence[PageTable]) -> list[str | PageTable]:
    """The page's text cut into segments by the table each character belongs to (`owner`, -1: none).

    See `page_segments`: when the characters taken out do not hold about the tables' digits, the
    page text is kept whole and the tables are appended.
    """
    owners = np.asarray(owner, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]]) if len(owners) else np.zeros(0, dtype=np.int64)
    counts = np.diff(np.r_[starts, len(owners)])
    runs = list(zip(owners[starts].tolist(), starts.tolist(), counts.tolist(), strict=True))  # (owner, first, count)
    removed = sum(_digits(textpage.get_text_range(first, count)) for who, first, count in runs if who >= 0)
    expected = sum(_digits("\n".join(t.lines)) for t in tables)
    if not expected or abs(removed - expected) > 0.2 * expected:
        return [textpage.get_text_range(), *tables]
    segments: list[str | PageTable] = []
    placed: set[int] = set()
    for who, first, count in runs:
        if who < 0:
            segments.append(textpage.get_text_range(first, count))
        elif who not in placed:
            placed.add(who)
            segments.append(tables[who])
    return segments
