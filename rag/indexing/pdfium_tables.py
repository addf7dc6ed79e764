"""Tables of PDF pages from pypdfium2's own character boxes: rows by baseline, cells by gaps, figures on the right.

pdfplumber re-parses a page with pdfminer.six (0.25-1 s a page); pypdfium2 has already parsed it,
and reading its character boxes costs a few milliseconds a page. This finder works on those boxes
alone (a "stream" table finder, as financial statements are drawn: rows of a label and figures,
columns aligned by their right edges, rarely ruled):

1. **Words**: runs of characters between the spaces and line breaks of pdfium's text (pdfium adds
   them where glyphs leave a gap or a line), boxed from their first and last character's loose box
   (the font's ascent and descent: one height for a whole line, commas and "p" included).
2. **Rows**: words grouped by the vertical centre of their line (baseline clustering), left to right.
3. **Cells**: a row is cut where the gap between words is wider than `CELL_GAP` line heights; a
   group of figures gives one cell per figure (a lone "$" joins its figure, see
   `rag.indexing.tables.render_table`, and a "%" or ")" printed apart too); a row printed as one
   run ("Segment 3 1,234 567") is split into its label and trailing figures (`split_row`).
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
import re
import time
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rag.indexing.tables import (
    _DASHES,
    _MAX_HEADER_CHARS,
    _MAX_HEADER_LINES,
    _MAX_LABELS,
    _NUMBER,
    PageTable,
    _is_label,
    owned_segments,
    render_table,
    split_row,
)

__all__ = ["ALIGN", "CELL_GAP", "MAX_ROW_GAP", "MIN_DATA_ROWS", "find_tables_pdfium", "page_segments_pdfium",
           "page_tables"]

logger = logging.getLogger(__name__)

CELL_GAP = 0.8       # a gap wider than this many line heights separates cells (a space is about 0.25)
MAX_ROW_GAP = 3.0    # a vertical gap wider than this many row heights ends a table
MIN_DATA_ROWS = 2    # rows of figures a table needs
ALIGN = 3.0          # points within which the right edges of a column's figures line up
_MARGIN = 2.0
_YEAR = re.compile(r"(19|20)\d\d")
_RUN = re.compile(r"\S+")
_SIGNS = ("$", "%", "€", "£")
_SUFFIXES = ("%", "%)", ")")
_LABEL_WORDS = 8     # a sentence of more words ending with "." is prose
_PROSE_CHARS = 100   # a line longer than this that is not a data row is prose and ends a table


@dataclass
class _Word:
    text: str
    x0: float
    x1: float
    bottom: float
    top: float
    edge: float | None = None   # a figure's right edge without the "%" or ")" joined to it

    @property
    def middle(self) -> float:
        return (self.bottom + self.top) / 2


@dataclass
class _Row:
    words: list[_Word]
    cells: list[str] = field(default_factory=list)
    last_x1: float = 0.0   # right edge of the last cell when it is a figure
    data: bool = False     # a label or figures, ending on a figure or a dash
    years: bool = False    # a column header of years: "(Millions) 2022 2021 2020"
    figures: int = 0       # cells that are figures (or years)

    @property
    def text(self) -> str:
        return " ".join(w.text for w in self.words)

    @property
    def top(self) -> float:
        return max(w.top for w in self.words)

    @property
    def bottom(self) -> float:
        return min(w.bottom for w in self.words)

    @property
    def height(self) -> float:
        return max(w.top - w.bottom for w in self.words)


def _figure(token: str) -> bool:
    return bool(_NUMBER.fullmatch(token)) or token in _DASHES


def _words(textpage: Any, text: str | None = None) -> tuple[list[_Word], list[tuple[int, int]]]:
    """The page's words in pdfium's order, and the character range `(start, end)` of each.

    A word is a run of characters between spaces or line breaks in the page's text (pdfium adds
    them where the glyphs leave a gap or a line), boxed from its first and last character. The
    loose box spans the font's ascent and descent: every glyph of a line has the same height. A run
    whose ends are on different lines is cut where the line changes. `text` is the page's text
    (`textpage.get_text_range()`) when the caller has it.
    """
    import pypdfium2.raw as pdfium_c

    raw, rect = textpage.raw, pdfium_c.FS_RECTF()
    count = pdfium_c.FPDFText_CountChars(raw)
    if text is None or len(text) != count:   # one character per index (not so with characters beyond U+FFFF)
        text = "".join(chr(pdfium_c.FPDFText_GetUnicode(raw, index)) for index in range(count))

    def box(index: int) -> tuple[float, float, float, float]:
        pdfium_c.FPDFText_GetLooseCharBox(raw, index, rect)
        return rect.left, rect.right, rect.bottom, rect.top

    words: list[_Word] = []
    spans: list[tuple[int, int]] = []
    for match in _RUN.finditer(text):
        start, end = match.span()
        first = box(start)
        last = box(end - 1) if end - start > 1 else first
        height = max(first[3] - first[2], last[3] - last[2])
        if abs(first[2] + first[3] - last[2] - last[3]) / 2 >= 0.3 * height or last[1] < first[0]:
            _cut_lines(text, start, end, box, words, spans)
        elif height > 0:
            words.append(_Word(match.group(), first[0], max(first[1], last[1]), min(first[2], last[2]),
                               max(first[3], last[3])))
            spans.append((start, end))
    return words, spans


def _cut_lines(text: str, start: int, end: int, box: Any, words: list[_Word], spans: list[tuple[int, int]]) -> None:
    """A run of characters that changes line without a break: one word per line, boxed character by character."""
    begin, (x0, x1, y0, y1) = start, box(start)
    for index in range(start + 1, end + 1):
        l, r, b, t = box(index) if index < end else (0.0, 0.0, 0.0, 0.0)
        if index == end or abs((b + t) - (y0 + y1)) / 2 >= 0.3 * max(t - b, y1 - y0) or l < x0:
            if y1 > y0:
                words.append(_Word(text[begin:index], x0, x1, y0, y1))
                spans.append((begin, index))
            begin, (x0, x1, y0, y1) = index, (l, r, b, t)
        else:
            x1, y0, y1 = max(x1, r), min(y0, b), max(y1, t)


def _rows(words: list[_Word]) -> list[_Row]:
    """Words grouped into printed rows by the vertical centre of their line, top to bottom, left to right."""
    rows: list[_Row] = []
    band = (0.0, 0.0)
    for word in sorted(words, key=lambda w: -w.middle):
        if rows and band[0] <= word.middle <= band[1]:
            rows[-1].words.append(word)
            continue
        rows.append(_Row([word]))
        half = 0.35 * (word.top - word.bottom)
        band = (word.middle - half, word.middle + half)
    for row in rows:
        row.words.sort(key=lambda w: w.x0)
    return rows


def _joined_signs(words: list[_Word]) -> list[_Word]:
    """A "%" or "%)" printed apart joins the figure before it ("3.2 %" -> "3.2%")."""
    out: list[_Word] = []
    for word in words:
        if out and word.text in _SUFFIXES and _figure(out[-1].text):
            prev = out[-1]
            out[-1] = _Word(prev.text + word.text, prev.x0, word.x1, min(prev.bottom, word.bottom),
                            max(prev.top, word.top), _edge(prev))
        else:
            out.append(word)
    return out


def _group_cells(group: list[_Word], alone: bool, first: bool) -> list[str]:
    """The cells of words printed close together: figures one each, a label whole, figures then text apart."""
    tokens = [w.text for w in group]
    if all(_figure(t) or t in _SIGNS for t in tokens) or alone:
        return split_row(" ".join(tokens))
    lead = 0
    while not first and lead < len(tokens) and (_figure(tokens[lead]) or tokens[lead] in _SIGNS):
        lead += 1   # "(9) Interest expense": a figure, then the next column's text
    return ([*split_row(" ".join(tokens[:lead]))] if lead else []) + [" ".join(tokens[lead:])]


def _cells(row: _Row) -> None:
    """Cut a row into cells at wide gaps; figures are cells of their own; mark it a data row or not."""
    row.words = _joined_signs(row.words)
    height = sorted(w.top - w.bottom for w in row.words)[len(row.words) // 2]
    groups: list[list[_Word]] = [[row.words[0]]]
    for prev, word in zip(row.words, row.words[1:], strict=False):
        if word.x0 - prev.x1 > CELL_GAP * height:
            groups.append([word])
        else:
            groups[-1].append(word)
    cells = [cell for n, group in enumerate(groups) for cell in _group_cells(group, len(groups) == 1, n == 0)]
    row.cells = render_table([cells])[0].split(" | ") if cells else []
    last = row.cells[-1] if row.cells else ""
    figures = [c for c in row.cells if _figure(c.lstrip("$€£").rstrip("%"))]
    row.years = bool(figures) and all(_YEAR.fullmatch(c) for c in figures)
    row.figures = len(figures)
    # ending on a figure, or figures followed by a column of text ("(9) | Interest expense")
    ends_on_figure = _figure(last.lstrip("$€£").rstrip("%")) or (len(figures) >= 2 and len(groups) >= 3)
    # a line of prose ending on a figure ("... decreased | $24") is not a row: labels are short
    row.data = len(row.cells) >= 2 and ends_on_figure and not row.years and len(row.cells[0]) <= _PROSE_CHARS
    end = next((w for w in reversed(row.words) if _figure(w.text.lstrip("$€£").rstrip("%"))), row.words[-1])
    row.last_x1 = _edge(end)


def _edge(word: _Word) -> float:
    """A figure's right edge: a closing parenthesis or "%" hangs past the column (about a character each)."""
    if word.edge is not None:
        return word.edge
    hanging = len(word.text) - len(word.text.rstrip(")%"))
    return word.x1 - hanging * (word.x1 - word.x0) / len(word.text)


def _is_prose(row: _Row) -> bool:
    text = row.text
    return not row.data and (len(text) > _PROSE_CHARS or (text.endswith(".") and len(text.split()) > _LABEL_WORDS))


def _aligned(rows: list[_Row], heading: _Row | None) -> list[bool]:
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


def _trimmed(rows: list[_Row], first: int, end: int) -> tuple[int, int] | None:
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


def _runs(rows: list[_Row]) -> list[tuple[int, int]]:
    """`(first, end)` row ranges of tables: data rows with short rows between, not broken by prose or gaps.

    A row of years after data rows starts the next table (its column header).
    """
    runs: list[tuple[int, int]] = []
    first = last = None
    for index, row in enumerate(rows):
        if first is not None:
            gap = rows[index - 1].bottom - row.top
            if _is_prose(row) or row.years or gap > MAX_ROW_GAP * max(row.height, rows[index - 1].height):
                runs.append((first, last + 1))
                first = last = None
        if row.data:
            if first is None:
                first = index
            last = index
    if first is not None:
        runs.append((first, last + 1))
    return [trimmed for first, end in runs if (trimmed := _trimmed(rows, first, end)) is not None]


def _header(rows: list[_Row], first: int, floor: int) -> int:
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
    return _tables(_words(textpage)[0], height)


def _tables(words: list[_Word], height: float) -> list[PageTable]:
    if not words:
        return []
    rows = _rows(words)
    for row in rows:
        _cells(row)
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
    words, spans = _words(textpage, text)
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
