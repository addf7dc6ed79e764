"""Table rows as the loaders print them: cells joined with " | " (PDF tables, `rag.indexing.tables`; HTML
tables, `rag.indexing.html_text`), and the header lines above them that name their columns.

`rag.generation.context_units` quotes such a row as `label (column: cell; ...)`: the columns are named
by the header lines above the row (" | "-joined cells, or a line of years: "2022 2021 2020"); a header
line with fewer cells spans the columns under it ("Fiscal 2024 | Fiscal 2023" over eight columns). Where
the lines above do not name the columns reliably (no line fits, a name would stand for cells apart, the label
is a figure), the row is quoted raw with its nearest header line: `label | cell | cell (2023 2022 Change)`.

Example:
    >>> row_cells("Effective tax rate | 23 | % | 20 | %")
    ['Effective tax rate', '23%', '20%']
    >>> column_names(3, [header_cells("2022 2021 2020")])
    ['2022', '2021', '2020']
    >>> column_names(4, [header_cells("Fiscal 2024 | Fiscal 2023"), header_cells("Opened | Closed | Opened | Closed")])
    ['Fiscal 2024 Opened', 'Fiscal 2024 Closed', 'Fiscal 2023 Opened', 'Fiscal 2023 Closed']
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import groupby

from rag.generation.line_kinds import SENTENCE_END
from rag.generation.periods import kinds, period_cells

__all__ = ["column_names", "header_cells", "is_figure", "is_pdf_row", "is_row", "names_under", "nearest_header",
           "row_context", "row_cells"]

_YEAR = re.compile(r"\b(?:19|20)\d\d\b")
_FIGURE = re.compile(r"\d")
_VERSUS = re.compile(r"\b(?:vs\.?|versus|compared (?:to|with))(?=\s|$)", re.IGNORECASE)
_FIGURE_CELL = re.compile(r"^\(?-?[$€£]?\s?\(?-?\d[\d,]*(?:\.\d+)?\)?\s?%?\)?\*?$")
_CLOSER = re.compile(r"^(?:%|\)|%\)|\)%)$")   # a cell the PDF reader split off its number: "23 | %", "(2 | )"
_CELL_NUMBER = r"(?:\(?-?[$€£]?\d[\d,]*(?:\.\d+)?%?\)?\*?|—|–|-|[$€£%])"
_PDF_ROW = re.compile(rf"^(?P<label>.*?[A-Za-z].*?)\s+(?P<values>{_CELL_NUMBER}(?:\s+{_CELL_NUMBER})*)\s*$")
_DATE_WORDS = (r"ended|months|weeks|quarter|fiscal|fy\d*|q[1-4]|january|february|march|april|may|june|july|"
               r"august|september|october|november|december")
_PERIOD = re.compile(rf"\b(?:{_DATE_WORDS})\b", re.IGNORECASE)
_UNITS = re.compile(r"\b(?:millions?|billions?|thousands?|in \$|percent)\b|%", re.IGNORECASE)
_DATE = re.compile(r"\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.? \d{1,2}, ?(?:19|20)\d\d\b")
_MARKS, _DASHES, _NA = r"(?:\(\w{1,2}\)\s*)+", r"[-—–$\s]+", r"NA|N/A|NM"   # footnote marks, dashes, "not available"
_NOT_NAME = re.compile(rf"{_MARKS}|{_DASHES}|{_NA}|\d{{1,2}},")   # a footnote mark, a dash, a day: no name
_PROSE = re.compile(r"^(?:\S+\s+){12}\S|^(?:\S+\s+){2,}\S*\w[.;]$")   # more than 12 words, or a sentence's end
_TEXT_CELL = re.compile(r"[^\d]*[A-Za-z]{3}[^\d]*")   # a word where a figure belongs ("Cost of sales")
_UNIT = re.compile(rf"{_MARKS}|{_NA}|n/a|nm|years?|months?|days?|bps", re.IGNORECASE)   # "7 | years"
_DASH = re.compile(_DASHES)
_FOOTNOTES = re.compile(r"\(\w\)|\*+|[,.:;\s]")


def row_cells(line: str) -> list[str]:
    """The cells of a row printed as "label | cell | cell", a lone "%" or ")" joined to its number.

    Example:
        >>> row_cells("Effective tax rate | 23 | % | (2 | ) | 20%")
        ['Effective tax rate', '23%', '(2)', '20%']
    """
    cells: list[str] = []
    for cell in (c.strip() for c in line.strip().strip("|").split(" | ")):
        if cells and _CLOSER.match(cell):
            cells[-1] += cell
        elif cell:
            cells.append(cell)
    return cells


def is_figure(cell: str) -> bool:
    """A number cell ("$1,797", "(26%)", "80.5"), not a year, a header ("Fiscal 2023") or a date's day ("31,")."""
    return bool(_FIGURE_CELL.match(cell)) and not _YEAR.fullmatch(cell.strip("$€£()%* ")) and not cell.endswith(",")


def column_names(count: int, headers: Sequence[list[str]]) -> list[str]:
    """Names of a row's `count` value columns from the header lines above it (top first): a header
    line of `count` cells (or one more: the label column's, not when that cell is itself a year or a
    period) names each column, one of fewer cells that divides `count` spans the columns under it;
    [] when no header line fits, or when one name would stand for columns that are not side by side
    ("2022, 2021, 2022, 2021" under a line of groups the reader could not split) or for all of them (it
    tells them apart from nothing): the row is then quoted raw.

    Example:
        >>> column_names(2, [["2023", "2022", "2021"]])   # a year more than the row's cells: not its header
        []
        >>> column_names(4, [["2022", "2021", "2022", "2021"]])
        []
    """
    names = [""] * count
    for cells in headers:
        if len(cells) == count + 1 and count > 1 and not (_YEAR.search(cells[0]) or kinds(cells[0])):
            cells = cells[1:]
        if len(cells) < 2 and count > 1 or count % len(cells):
            continue
        span = count // len(cells)
        names = [names[j] if names[j].endswith(cells[j // span]) else f"{names[j]} {cells[j // span]}".strip()
                 for j in range(count)]
    runs = [name for j, name in enumerate(names) if not j or names[j - 1] != name]
    return names if all(names) and len(set(runs)) == len(runs) and (len(runs) > 1 or count == 1) else []


def names_under(count: int, lines: Sequence[str], label: str = "", values: Sequence[str] = ()) -> list[str]:
    """Names of a row's `count` value columns from the lines above it (top first), as `column_names` fits
    their `header_cells`; a line of years followed by more columns ("2023 2022 Change", "2022 2021 22 vs. 21")
    names a row of as many cells as it has years (or one more, the change, when no line below it names the
    row), never spans (its years are not over the change's cells); [] for a row whose `label` is a figure ("$1,486,843": its first cell, the names would be shifted by one)
    or whose `values` hold a word under a year or a period ("Operating leases | Operating lease assets | $2,746":
    a second label column, not the year's figure).

    Example:
        >>> names_under(2, ["2023 2022 % Change"]), names_under(3, ["2023 2022 % Change"])
        (['2023', '2022'], ['2023', '2022', '% Change'])
        >>> names_under(4, ["2023 2022 % Change"])
        []
    """
    if is_figure(label):
        return []
    headers: list[list[str]] = []
    extended = -1
    for line in lines:
        cells, after = header_cells(line), _after_years(line)
        if after and count == len(cells) + 1 and len(after.split()) <= 4 and not _PERIOD.search(after):
            cells, extended = [*cells, after], len(headers)   # "2023 2022 Change" over three cells: the change
        if cells and (len(cells) == count or not after):
            headers.append(cells)
    if 0 <= extended < len(headers) - 1:   # ... only right above the row: a line below it names other columns
        del headers[extended]
    names = column_names(count, headers)
    if not _parallel(names, values):
        return []
    words = [name for name, cell in zip(names, values) if _TEXT_CELL.fullmatch(cell) and not _UNIT.fullmatch(cell)]
    return [] if any(_YEAR.search(name) or kinds(name) for name in words) else names


def _after_years(line: str) -> str:
    """What a line of years ("(in millions) 2023 2022 % Change") states after its last year: more columns."""
    cells = header_cells(line)
    if " | " in line or not cells or not all(_YEAR.fullmatch(c) for c in cells):
        return ""
    after = line[list(_YEAR.finditer(line))[-1].end():]
    return " ".join(after.split()) if _FOOTNOTES.sub("", after) else ""


def header_cells(line: str) -> list[str]:
    """A header line's cells: " | "-joined cells, the years of a line naming two or more, or its periods
    ("Three Months Ended Six Months Ended": two cells, each spanning the columns under it).

    Example:
        >>> header_cells("SECOND QUARTER SIX MONTHS"), header_cells("2023 2022 Change")
        (['SECOND QUARTER', 'SIX MONTHS'], ['2023', '2022'])
        >>> header_cells("TWELVE MONTHS 2022 ACTUAL vs. 2021 ACTUAL")   # the period compared, over all the columns
        []
        >>> header_cells("230 | 57 | 2,335")   # a row of figures whose label the reader put on another line
        []
        >>> header_cells("March 31, 2021 December 31, 2020 March 31, 2020")   # a year twice: named by the dates
        ['March 31, 2021', 'December 31, 2020', 'March 31, 2020']
    """
    if " | " in line:
        cells = row_cells(line)   # not a header: a row with figures ("230 | 57", "1 year | 60 | 69"), prose cut in cells,
        return [] if any(is_figure(c) or _NOT_NAME.fullmatch(c) or _PROSE.search(c) for c in cells) else cells   # notes
    if SENTENCE_END.search(line):
        return []
    years = [m.start() for m in _YEAR.finditer(line)]
    if years and any(years[0] < m.start() < years[-1] for m in _VERSUS.finditer(line)):
        return []   # "2022 ACTUAL vs. 2021 ACTUAL": one comparison, not two columns ("2022 2021 22 vs. 21" is three)
    years = _YEAR.findall(line)
    runs = [len(list(run)) for _, run in groupby(years)]
    if max(runs, default=1) > 1:   # a year over two columns: "December 31, 2022 June 30, 2022", "2020 2020 2019 2019"
        dates = _DATE.findall(line)   # the dates tell them apart; else the years do only as equal runs (quarters)
        return dates if len(dates) == len(years) else [] if len(set(runs)) > 1 else years
    return years if len(years) >= 2 and len(line.split()) <= 16 else period_cells(line)


def is_row(cells: Sequence[str]) -> bool:
    """Whether a line's cells are a row of figures under a label (not a header: "Fiscal 2024 | Fiscal 2023")."""
    return len(cells) >= 2 and any(is_figure(c) for c in cells[1:]) and not _FIGURE.search(cells[0][:1])


def row_context(recent: Sequence[str], headers: str = "", caption: str = "") -> str:
    """A row's column `headers` with what the lines above it say beyond them: the nearest line naming a
    period ("SECOND QUARTER", "Six Months Ended June 30,") and the nearest caption (a short line of words:
    "REVENUES" over a block of segments; else `caption`, the table's header lines as its reader found them),
    matched against a question as the row's headers are.

    Example:
        >>> row_context(["(in millions) SECOND QUARTER", "2023 2022 Percent", "REVENUES"], "2023 2022")
        '2023 2022 (in millions) SECOND QUARTER REVENUES'
    """
    lines = [line for line in reversed(recent[-24:]) if " | " not in line]
    period = next((line for line in lines if len(line.split()) <= 12 and kinds(line)), "")
    caption = next((line for line in lines if len(line.split()) <= 8 and not _FIGURE.search(line)
                    and not SENTENCE_END.search(line) and not kinds(line)), caption)
    return " ".join(dict.fromkeys(p for p in (headers, period, caption) if p))


def is_pdf_row(line: str) -> bool:
    """A label then at least two number cells (a PDF table row on one line), not a header of years."""
    match = _PDF_ROW.match(line)
    if not match or SENTENCE_END.search(match.group("label")):
        return False
    values = [v for v in match.group("values").split() if v not in ("$", "€", "£", "%")]
    numbers = [v for v in values if any(c.isdigit() for c in v)]
    return len(values) >= 2 and len(numbers) >= 1 and not all(_YEAR.fullmatch(v) for v in numbers) \
        and len(match.group("label").split()) <= 16 and not _PERIOD.search(match.group("label"))


def nearest_header(lines: Sequence[str]) -> str:
    """The column header of a PDF row: the nearest line above naming a year, else a period
    ("ended", "quarter", ...), else units ("$ million")."""
    recent = [line for line in reversed(lines[-24:]) if len(line.split()) <= 30 and not SENTENCE_END.search(line)
              and not (" | " in line and _a_row(row_cells(line)[1:]))]
    for pattern in (_YEAR, _PERIOD, _UNITS):
        found = next((line for line in recent if pattern.search(line)), "")
        if found:
            return found
    return ""


def _a_row(values: Sequence[str]) -> bool:
    """Whether a line's cells after the first are a row's values: a figure, or only dashes ("$— | —")."""
    return any(map(is_figure, values)) or all(_DASH.fullmatch(c) for c in values)


def _parallel(names: Sequence[str], values: Sequence[str]) -> bool:
    """Whether the cells under each spanning name have the same shape (a percent where the others have one):
    "2022: 3,306, 3,700; 2021: (394), (11)%" are two years then their change, not two cells per year."""
    runs = [[v for n, v in zip(names, values) if n == name] for name in dict.fromkeys(names)]
    if len(runs) < 2 or len({len(r) for r in runs}) > 1 or len(runs[0]) < 2:
        return True
    shapes = [[None if _DASH.fullmatch(v) else v.rstrip(")*").endswith("%") for v in run] for run in runs]
    return all(len({s for s in column if s is not None}) < 2 for column in zip(*shapes))
