"""Which row of a table answers: the total for the whole, the extreme one for "which ... highest".

Three readings of a table that a row's label alone does not give (used by `rag.generation.value_units`
for value questions):

- **the document's name is not a metric**: a question names its company ("Best Buy stores"), and a
  table of that company may label a row with the same words (the "Best Buy" brand among "Outlet
  Centers" and "Total"). Words naming the unit's document (its title or file name, also written apart:
  "Best Buy" for `BESTBUY_2024Q2_10Q`) are matched as the document, not as the row's label;
- **a total row answers for the whole**: in a table whose headers name what the question asks
  ("Total Stores at End of Second Quarter"), when no other row's label names it, the row labelled
  "Total ..." is the figure for the whole;
- **a superlative is read across rows**: "Which segment had the highest revenues?" is answered by
  comparing the rows of the table the question's metric heads (its headers or caption) in the column of
  the period asked, and quoting the extreme one with its label (total rows left out).

Example:
    >>> sorted(document_words(["best", "buy", "store"], frozenset({"bestbuy", "2024q2", "10q"})))
    ['best', 'buy']
    >>> superlative("Which segment had the lowest net revenue?"), superlative("What was net revenue?")
    (-1, 0)
    >>> is_total("Total Domestic segment stores"), is_total("Best Buy")
    (True, False)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from rag.base.text import tokenize

__all__ = ["COMPARISON_WORDS", "cell_value", "document_words", "is_total", "superlative"]

_TOTAL = re.compile(r"^total\b|\btotals?$", re.IGNORECASE)
_HIGH = re.compile(r"\b(?:highest|largest|biggest|greatest|most|maximum|top)\b", re.IGNORECASE)
_LOW = re.compile(r"\b(?:lowest|smallest|least|fewest|minimum)\b", re.IGNORECASE)
#: the words of a superlative (stemmed as the answerer's key terms): the comparison, not the topic
COMPARISON_WORDS = frozenset(tokenize("highest largest biggest greatest most maximum lowest smallest least fewest "
                                      "minimum", stop_words=False))
_WHICH = re.compile(r"^\s*(?:which|what|who)\b", re.IGNORECASE)
_NAMED = re.compile(r"^(?P<label>.+?) \((?P<columns>[^()]*: .*)\)$")
_VALUE = re.compile(r"[$€£]?\s?\(?-?[$€£]?\s?\d[\d,]*(?:\.\d+)?\)?")


def document_words(key: Sequence[str], terms: frozenset[str]) -> frozenset[str]:
    """The question's terms that name a document with these terms, alone or joined to the next or
    previous term ("best" + "buy" -> "bestbuy")."""
    found = {t for t in key if t in terms}
    for a, b in zip(key, key[1:]):   # stemmed apart ("acme corp" -> "acm", "corp"), joined in the name ("acmecorp")
        if a + b in terms or any(d.startswith(a) and d.endswith(b) and len(d) - len(a + b) <= 2 for d in terms):
            found |= {a, b}
    return frozenset(found)


def is_total(label: str) -> bool:
    """A row labelled as a total ("Total", "Total net revenue", "Segment totals")."""
    return bool(_TOTAL.search(label.strip(" :")))


def superlative(question: str) -> int:
    """+1 for "which ... highest / largest / most", -1 for "... lowest / smallest / least", else 0."""
    if not _WHICH.match(question):
        return 0
    high, low = bool(_HIGH.search(question)), bool(_LOW.search(question))
    return 1 if high and not low else -1 if low and not high else 0


def cell_value(quoted: str) -> float | None:
    """The first figure of a quoted row after its label ("North America (2023: $21,608)" -> 21608.0),
    negative in brackets; None without one.

    Example:
        >>> cell_value("Corporate (2021: $(473); 2020: 166)"), cell_value("Outlet Centers | 20 | 1 (2023)")
        (-473.0, 20.0)
    """
    named = _NAMED.match(quoted)
    if named:   # "label (column: cell; ...)": the cells without their column names
        rest = re.sub(r"(?:^|;)[^;:]*:\s", " ", named.group("columns"))
    else:       # "label | cell | cell (header)" or a PDF line "label $ 1,234 $ 987 (header)"
        rest = re.sub(r" \([^()]*\)$", "", quoted).split(" | ", 1)[-1] if " | " in quoted else \
            re.sub(r"^.*?[A-Za-z][^$€£(\d]*", "", re.sub(r" \([^()]*\)$", "", quoted))
    match = _VALUE.search(rest)
    if not match:
        return None
    raw = match.group()
    try:
        value = float(re.sub(r"[^\d.]", "", raw))
    except ValueError:
        return None
    return -value if ("(" in raw and ")" in raw) or "-" in raw else value


def row_groups(kinds: Sequence[str], sources: Sequence[int], terms: Sequence[str]) -> dict[tuple, list[int]]:
    """Rows of one table: the row units of one context document under the same headers."""
    groups: dict[tuple, list[int]] = {}
    for i, (kind, source, header) in enumerate(zip(kinds, sources, terms)):
        if kind == "row":
            groups.setdefault((source, header), []).append(i)
    return groups


def extreme_rows(values: Mapping[int, float], direction: int) -> int | None:
    """The index of the highest (`direction` 1) or lowest (-1) value; None when fewer than three (not a table to compare)."""
    if len(values) < 3 or not direction:
        return None
    return max(values, key=lambda i: direction * values[i])
