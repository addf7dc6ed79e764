"""The printed rows of a PDF page from pypdfium2's own character boxes: words, rows by baseline, cells by gaps.

The first half of the default PDF table finder (`rag.indexing.pdfium_tables` finds tables among these
rows):

1. **Words**: runs of characters between the spaces and line breaks of pdfium's text (pdfium adds
   them where glyphs leave a gap or a line), boxed from their first and last character's loose box
   (the font's ascent and descent: one height for a whole line, commas and "p" included).
2. **Rows**: words grouped by the vertical centre of their line (baseline clustering), left to right.
3. **Cells**: a row is cut where the gap between words is wider than `CELL_GAP` line heights; a
   group of figures gives one cell per figure (a lone "$" joins its figure, see
   `rag.indexing.tables.render_table`, and a "%" or ")" printed apart too); a row printed as one
   run ("Segment 3 1,234 567") is split into its label and trailing figures (`split_row`). A row
   is a data row when it has two cells or more and ends on a figure or a dash (or on a column of
   text after figures: "(9) | Interest expense"); a row of years is a column header.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rag.indexing.tables import _DASHES, _NUMBER, render_table, split_row

__all__ = ["CELL_GAP", "Row", "Word", "cut_cells", "figure_edge", "group_rows", "is_prose", "read_words"]

CELL_GAP = 0.8       # a gap wider than this many line heights separates cells (a space is about 0.25)
_YEAR = re.compile(r"(19|20)\d\d")
_RUN = re.compile(r"\S+")
_SIGNS = ("$", "%", "€", "£")
_SUFFIXES = ("%", "%)", ")")
_LABEL_WORDS = 8     # a sentence of more words ending with "." is prose
_PROSE_CHARS = 100   # a line longer than this that is not a data row is prose and ends a table


@dataclass
class Word:
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
class Row:
    words: list[Word]
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


def is_figure(token: str) -> bool:
    return bool(_NUMBER.fullmatch(token)) or token in _DASHES


def read_words(textpage: Any, text: str | None = None) -> tuple[list[Word], list[tuple[int, int]]]:
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

    words: list[Word] = []
    spans: list[tuple[int, int]] = []
    for match in _RUN.finditer(text):
        start, end = match.span()
        first = box(start)
        last = box(end - 1) if end - start > 1 else first
        height = max(first[3] - first[2], last[3] - last[2])
        if abs(first[2] + first[3] - last[2] - last[3]) / 2 >= 0.3 * height or last[1] < first[0]:
            _cut_lines(text, start, end, box, words, spans)
        elif height > 0:
            words.append(Word(match.group(), first[0], max(first[1], last[1]), min(first[2], last[2]),
                               max(first[3], last[3])))
            spans.append((start, end))
    return words, spans


def _cut_lines(text: str, start: int, end: int, box: Any, words: list[Word], spans: list[tuple[int, int]]) -> None:
    """A run of characters that changes line without a break: one word per line, boxed character by character."""
    begin, (x0, x1, y0, y1) = start, box(start)
    for index in range(start + 1, end + 1):
        l, r, b, t = box(index) if index < end else (0.0, 0.0, 0.0, 0.0)
        if index == end or abs((b + t) - (y0 + y1)) / 2 >= 0.3 * max(t - b, y1 - y0) or l < x0:
            if y1 > y0:
                words.append(Word(text[begin:index], x0, x1, y0, y1))
                spans.append((begin, index))
            begin, (x0, x1, y0, y1) = index, (l, r, b, t)
        else:
            x1, y0, y1 = max(x1, r), min(y0, b), max(y1, t)


def group_rows(words: list[Word]) -> list[Row]:
    """Words grouped into printed rows by the vertical centre of their line, top to bottom, left to right."""
    rows: list[Row] = []
    band = (0.0, 0.0)
    for word in sorted(words, key=lambda w: -w.middle):
        if rows and band[0] <= word.middle <= band[1]:
            rows[-1].words.append(word)
            continue
        rows.append(Row([word]))
        half = 0.35 * (word.top - word.bottom)
        band = (word.middle - half, word.middle + half)
    for row in rows:
        row.words.sort(key=lambda w: w.x0)
    return rows


def _joined_signs(words: list[Word]) -> list[Word]:
    """A "%" or "%)" printed apart joins the figure before it ("3.2 %" -> "3.2%")."""
    out: list[Word] = []
    for word in words:
        if out and word.text in _SUFFIXES and is_figure(out[-1].text):
            prev = out[-1]
            out[-1] = Word(prev.text + word.text, prev.x0, word.x1, min(prev.bottom, word.bottom),
                            max(prev.top, word.top), figure_edge(prev))
        else:
            out.append(word)
    return out


def _group_cells(group: list[Word], alone: bool, first: bool) -> list[str]:
    """The cells of words printed close together: figures one each, a label whole, figures then text apart."""
    tokens = [w.text for w in group]
    if all(is_figure(t) or t in _SIGNS for t in tokens) or alone:
        return split_row(" ".join(tokens))
    lead = 0
    while not first and lead < len(tokens) and (is_figure(tokens[lead]) or tokens[lead] in _SIGNS):
        lead += 1   # "(9) Interest expense": a figure, then the next column's text
    return ([*split_row(" ".join(tokens[:lead]))] if lead else []) + [" ".join(tokens[lead:])]


def cut_cells(row: Row) -> None:
    """Cut a row into cells at wide gaps; figures are cells of their own; mark it a data row or not."""
    row.words = _joined_signs(row.words)
    height = sorted(w.top - w.bottom for w in row.words)[len(row.words) // 2]
    groups: list[list[Word]] = [[row.words[0]]]
    for prev, word in zip(row.words, row.words[1:], strict=False):
        if word.x0 - prev.x1 > CELL_GAP * height:
            groups.append([word])
        else:
            groups[-1].append(word)
    cells = [cell for n, group in enumerate(groups) for cell in _group_cells(group, len(groups) == 1, n == 0)]
    row.cells = render_table([cells])[0].split(" | ") if cells else []
    last = row.cells[-1] if row.cells else ""
    figures = [c for c in row.cells if is_figure(c.lstrip("$€£").rstrip("%"))]
    row.years = bool(figures) and all(_YEAR.fullmatch(c) for c in figures)
    row.figures = len(figures)
    # ending on a figure, or figures followed by a column of text ("(9) | Interest expense")
    ends_on_figure = is_figure(last.lstrip("$€£").rstrip("%")) or (len(figures) >= 2 and len(groups) >= 3)
    # a line of prose ending on a figure ("... decreased | $24") is not a row: labels are short
    row.data = len(row.cells) >= 2 and ends_on_figure and not row.years and len(row.cells[0]) <= _PROSE_CHARS
    end = next((w for w in reversed(row.words) if is_figure(w.text.lstrip("$€£").rstrip("%"))), row.words[-1])
    row.last_x1 = figure_edge(end)


def figure_edge(word: Word) -> float:
    """A figure's right edge: a closing parenthesis or "%" hangs past the column (about a character each)."""
    if word.edge is not None:
        return word.edge
    hanging = len(word.text) - len(word.text.rstrip(")%"))
    return word.x1 - hanging * (word.x1 - word.x0) / len(word.text)


def is_prose(row: Row) -> bool:
    text = row.text
    return not row.data and (len(text) > _PROSE_CHARS or (text.endswith(".") and len(text.split()) > _LABEL_WORDS))
