"""Reporting periods: the one a value question asks for, the ones a table column or a sentence states.

Filings report the same metric over several periods side by side ("Three Months Ended | Six Months
Ended", "SECOND QUARTER ... SIX MONTHS", "Fiscal 2023 | Fiscal 2022"). A question naming a quarter
("Q2", "the second quarter", "the three months ended June 30") is answered by the three-month figure,
not the six-month or the year's. This module reads the period *kind* (quarter, half year, nine
months, year) from text; `rag.generation.value_units` uses it to pick the row and the columns, and
`rag.generation.table_rows` to name columns under a line of periods.

The words that only say *when* ("three months ended June 30", "Q2", "fiscal") are not what a value
question is about: `period_word` tells the answerer not to match them as key terms (they are
matched as the period instead), as it already did for years.

Example:
    >>> asked_kind("What were net sales in the second quarter of FY2023?"), asked_kind("Revenue in FY2023?")
    ('quarter', '')
    >>> sorted(kinds("Net revenues (Three Months Ended 2023: 3,942; Six Months Ended 2023: 7,815)"))
    ['half', 'quarter']
    >>> period_cells("Three Months Ended Six Months Ended")
    ['Three Months Ended', 'Six Months Ended']
"""

from __future__ import annotations

import re

from rag.base.text import tokenize

__all__ = ["asked_kind", "kinds", "period_cells", "period_word"]

# finest first: a question naming a quarter of a fiscal year asks for the quarter
_KINDS = (
    ("quarter", r"\b(?:three|3)[- ]months?\b|\b1[34][- ]weeks\b|\bq[1-4]\b|\bquarter(?:ly)?\b"),
    ("half", r"\b(?:six|6)[- ]months?\b|\b2[67][- ]weeks\b|\b(?:first|second) half\b|\bh[12]\b|\bhalf[- ]year\b"),
    ("nine", r"\b(?:nine|9)[- ]months?\b|\b39[- ]weeks\b"),
    ("year", r"\b(?:twelve|12)[- ]months?\b|\b5[23][- ]weeks\b|\b(?:fiscal |full[- ])?years? ended\b|"
             r"\bfiscal years?\b|\bfull[- ]year\b|\bannual\b"),
)
_PATTERNS = [(kind, re.compile(pattern, re.IGNORECASE)) for kind, pattern in _KINDS]
# where a column header names a period: "Three Months Ended", "SECOND QUARTER", "Six Months", "Year Ended"
_PHRASE = re.compile(r"\b(?:(?:three|six|nine|twelve|\d{1,2})[- ]months?|(?:first|second|third|fourth|1st|2nd|3rd|4th) quarter|"
                     r"quarter|(?:fiscal )?years?)(?: ended)?\b", re.IGNORECASE)
_WORDS = frozenset(tokenize("three six nine twelve months ended ending quarter quarterly q1 q2 q3 q4 first second "
                            "third fourth fiscal fy year years half weeks annual january february march april may june "
                            "july august september october november december", stop_words=False))
_DURATION = re.compile(r"\b\d{1,2}\s+(?:years?|months?)\b(?!\s+ended)", re.IGNORECASE)   # "1 to 3 years": a term
_NUMBER_WORD = re.compile(r"^(?:\d{1,2}|(?:19|20)\d\d)$")   # a day of a date or a year


def kinds(text: str) -> set[str]:
    """The period kinds a text names ("three months" -> quarter, "year ended" -> year)."""
    return {kind for kind, pattern in _PATTERNS if pattern.search(text)}


def asked_kind(question: str) -> str:
    """The period kind a question asks for, the finest it names ("Q2 of fiscal year 2023": quarter); "" for none."""
    named = kinds(question)
    return next((kind for kind, _ in _KINDS if kind in named), "")


def period_word(token: str) -> bool:
    """Whether a question token only says when (a year, a day, a month, "quarter", "q2", "ended"), for value questions.

    Example:
        >>> [t for t in tokenize("net revenues for the three months ended June 30, 2023") if not period_word(t)]
        ['net', 'revenu']
    """
    return token in _WORDS or bool(_NUMBER_WORD.match(token))


def period_cells(line: str) -> list[str]:
    """The periods a header line names, one cell each ("Three Months Ended Six Months Ended"); [] for
    fewer than two: a line of periods spans the columns under it, as a line of " | "-joined cells does. Terms
    ("Less than 1 year 1 to 3 years 3 to 5 years": a maturity's) are not periods.

    Example:
        >>> period_cells("Total Less than 1 year 1 to 3 years 3 to 5 years After 5 years")
        []
    """
    starts = [m.start() for m in _PHRASE.finditer(line)]
    if len(starts) < 2 or len(line.split()) > 16 or _DURATION.search(line):
        return []
    cells = [line[a:b].strip(" ,") for a, b in zip(starts, [*starts[1:], len(line)])]
    return cells if all(map(kinds, cells)) else []   # "years", "Year over Year": not periods
