"""Tables of PDF pages from pypdfium2's own character boxes: rows by baseline, cells by gaps, figures on the right.

pdfplumber re-parses a page with pdfminer.six (0.25-1 s a page); pypdfium2 has already parsed it,
and reading its character boxes costs a few milliseconds a page. This finder works on those boxes
alone (a "stream" table finder, as financial statements are drawn: rows of a label and figures,
columns aligned by their right edges, rarely ruled). Steps 1 to 3 read the page's printed rows
(`rag.indexing.pdfium_rows`); this module finds the tables among them:

1.-3. **Words, rows, cells** (`rag.indexing.pdfium_rows`): words boxed from pdfium's characters, grouped
   into printed rows by baseline, cut into cells at wide gaps; data rows and rows of years marked.
4. **Tables**: a data row has two cells or more and ends on a figure or a dash (or on a column
   of text after figures: "(9) | Interest expense"). A table is a run of data rows, not broken
   by a sentence, a long line of text, a row of years ("2022 2021 2020": a column header, which
   starts the next table) or a vertical gap wider than `MAX_ROW_GAP` row heights, in which at
   least `MIN_DATA_ROWS` rows (one under a row of years), and half of its data rows, end on a
   column edge another row shares (right edges within `ALIGN` points; a closing parenthesis or
   "%" hangs past it). Data rows at its ends that miss every column ("Years ended December 31")
   are left to the header; short lines between data rows ("Operating expenses") are rows of one cell.
5. **What goes with it**: the short lines just above (up to 6, not sentences) are its header, and
   the labels among them its caption, as `rag.indexing.tables` does for pdfplumber's tables.

The result is `rag.indexing.tables.PageTable`s in pdfplumber's coordinates (points from the page's
top-left); `page_segments_pdfium` also says which characters each table holds, so the page text
is cut without a second pass (`rag.indexing.tables.owned_segments`).

Example:
    >>> import pypdfium2 as pdfium                                    # doctest: +SKIP
    >>> found, unread = find_tables_pdfium(pdfium.PdfDocument("10k.pdf"), [47])   # doctest: +SKIP
    >>> found[47][0].lines[5]                                         # doctest: +SKIP
    'Net sales | $34,229 | $35,355 | $32,184'
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

import numpy as np

from rag.indexing.pdfium_rows import CELL_GAP, Row, Word, cut_cells, group_rows, is_prose, read_words
from rag.indexing.tables import (
    _MAX_HEADER_CHARS,
    _MAX_HEADER_LINES,
    _MAX_LABELS,
    PageTable,
    _is_label,
    owned_segments,
    render_table,
)

__all__ = ["ALIGN", "CELL_GAP", "MAX_ROW_GAP", "MIN_DATA_ROWS", "find_tables_pdfium", "page_segments_pdfium",
           "page_tables"]

logger = logging.getLogger(__name__)

MAX_ROW_GAP = 3.0    # a vertical gap wider than this many row heights ends a table
MIN_DATA_ROWS = 2    # rows of figures a table needs
ALIGN = 3.0          # points within which the right edges of a column's figures line up
_MARGIN = 2.0


def _aligned(rows: list[Row], heading: Row | None) -> list[bool]:
    """Which rows are data rows whose last figure ends on a column edge that another data row shares, or
    that have a figure under each year of the row of years above them (`heading`)."""
    ends = np.sort([r.last_x1 for r in rows if r.data])   # sorted: O(n log n) however many rows
    out = []
    for row in rows:
        if not row.data:
            out.append(False)
            continue
        near = np.searchsorted(ends, row.last_x1 + ALIGN, side="right") - np.searchsorted(ends, row.last_x1 - ALIGN)
        out.append(bool(near >= 2) or (heading is not None and row.figures == heading.figures))
    return out


def _trimmed(rows: list[Row], first: int, end: int) -> tuple[int, int] | None:
    """The run without the data rows at its ends that miss every column ("Years ended December 31"), if it
    is a table: at least `MIN_DATA_ROWS` aligned rows (one under a row of years), half its data rows."""
    heading = rows[first - 1] if first and rows[first - 1].years else None
    aligned = _aligned(rows[first:end], heading)
    data = sum(r.data for r in rows[first:end])
    count = sum(aligned)
    if count < (1 if heading else MIN_DATA_ROWS) or count < 0.5 * data:
        return None
    at = [first + n for n, ok in enumerate(aligned) if ok]
    return at[0], at[-1] + 1


def _runs(rows: list[Row]) -> list[tuple[int, int]]:
    """`(first, end)` row ranges of tables: data rows with short rows between, not broken by prose or gaps.

    A row of years after data rows starts the next table (its column header).
    """
    runs: list[tuple[int, int]] = []
    first = last = None
    for index, row in enumerate(rows):
        if first is not None:
            gap = rows[index - 1].bottom - row.top
            if is_prose(row) or row.years or gap > MAX_ROW_GAP * max(row.height, rows[index - 1].height):
                runs.append((first, last + 1))
                first = last = None
        if row.data:
            if first is None:
                first = index
            last = index
    if first is not None:
        runs.append((first, last + 1))
    return [trimmed for first, end in runs if (trimmed := _trimmed(rows, first, end)) is not None]


def _header(rows: list[Row], first: int, floor: int) -> int:
    """Index of the first header row above row `first` (rows down to `floor`): short lines, not sentences."""
    start = first
    while start > floor and first - start < _MAX_HEADER_LINES:
        text = rows[start - 1].text
        if len(text) > _MAX_HEADER_CHARS or text.rstrip("\"”’)").endswith("."):   # a sentence, quoted or not
            break
        start -= 1
    return start


def page_tables(textpage: Any, height: float) -> list[PageTable]:
    """The tables of one page, read from its text page (`height`: the page's height in points)."""
    return _tables(read_words(textpage)[0], height)


def _tables(words: list[Word], height: float) -> list[PageTable]:
    if not words:
        return []
    rows = group_rows(words)
    for row in rows:
        cut_cells(row)
    found = []
    floor = 0
    for first, end in _runs(rows):
        start = _header(rows, first, floor)
        header = [" ".join(rows[i].text.split()) for i in range(start, first)]
        labels = [line for line in header if _is_label(line)]
        body = render_table([row.cells for row in rows[first:end]])
        part = rows[start:end]
        x0 = min(w.x0 for r in part for w in r.words)
        x1 = max(w.x1 for r in part for w in r.words)
        found.append(PageTable(header + body, len(header) or 1, " / ".join(labels[:_MAX_LABELS]) or None,
                               x0 - _MARGIN, height - max(r.top for r in part) - _MARGIN, x1 + _MARGIN,
                               height - min(r.bottom for r in part) + _MARGIN))
        floor = end
    return found


def page_segments_pdfium(textpage: Any, height: float, text: str | None = None) -> list[str | PageTable] | None:
    """The page in reading order, its text outside the tables and each table where it starts (None: no table).

    One pass over the words finds the tables and which characters they hold: a word belongs to the
    first table whose region holds its centre, a space or line break to the character before it
    (`rag.indexing.tables.owned_segments` cuts the text). `text`: the page's text, when known.
    """
    words, spans = read_words(textpage, text)
    tables = _tables(words, height)
    if not tables:
        return None
    owner = np.full(textpage.count_chars(), -1, dtype=np.int64)
    known = np.zeros(len(owner), dtype=bool)
    tops = [t.top for t in tables]   # the tables are apart and in order down the page
    for word, (start, end) in zip(words, spans, strict=True):
        x, y = (word.x0 + word.x1) / 2, height - word.middle
        number = bisect_right(tops, y) - 1
        if number >= 0 and tables[number].x0 <= x <= tables[number].x1 and y <= tables[number].bottom:
            owner[start:end] = number
        known[start:end] = True
    last = np.maximum.accumulate(np.where(known, np.arange(len(known)), -1))
    owner = np.where(last >= 0, owner[np.maximum(last, 0)], -1)
    return owned_segments(textpage, owner, tables)


def find_tables_pdfium(pdf: Any, pages: Sequence[int], *,
                       deadline: float | None = None) -> tuple[dict[int, list[PageTable]], list[int]]:
    """Tables of the given zero-based `pages` of an open `pypdfium2.PdfDocument`, and the pages left unread.

    The same contract as `rag.indexing.tables.find_tables`: pages are read in order until
    `deadline` (a `time.monotonic()` value) has passed; a page the finder fails on keeps its text.
    """
    out: dict[int, list[PageTable]] = {}
    for done, index in enumerate(pages):
        if deadline is not None and time.monotonic() > deadline:
            return out, list(pages[done:])
        page = pdf[index]
        try:
            textpage = page.get_textpage()
            try:
                tables = page_tables(textpage, page.get_size()[1])
            finally:
                textpage.close()
        except Exception as exc:  # noqa: BLE001 - a malformed page keeps its plain text
            logger.info("page %d: table detection failed (%s)", index, exc)
            tables = []
        finally:
            page.close()
        if tables:
            out[index] = tables
    return out, []
