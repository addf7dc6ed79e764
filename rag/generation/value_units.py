"""Which unit holds the value a question asks for: a table row whose label names the metric, in the period asked.

A question asking for a quantity ("What was Amcor's adjusted EBITDA for FY 2023?") is answered by
the row labelled with that metric, read in the columns of the year the question names, more than
by a sentence that shares the question's words. Two signals, used by the offline answerer
(`rag.generation.extractive`) for value questions:

- `label_share`: how well a row's label names the question's metric: the harmonic mean of the share
  of the question's key terms (IDF-weighted as in the answerer) found in the label and the share of
  the label's words the question uses ("Effective tax rate" for "How much has the effective tax
  rate changed?": all of the label, most of the question);
- `names_period`: whether the unit names one of the years the question asks about ("FY2023",
  "FY 2023", "2021 Q1", "fiscal 2024"), in its text or its column headers;

and `in_period` quotes a row's columns of the years asked only: one value, not the whole row.

Example:
    >>> sorted(question_years("Was there any change between Q2 of FY2024 and FY23?"))
    ['2023', '2024']
    >>> row_label("Effective tax rate | 23% | 20%"), row_label("Cost of sales (2022: $33; 2021: $29)")
    ('Effective tax rate', 'Cost of sales')
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import PurePath

import numpy as np

from rag.base.text import tokenize
from rag.generation.context_units import Unit
from rag.generation.periods import asked_kind, kinds, period_word
from rag.generation.row_choice import (
    COMPARISON_WORDS,
    cell_value,
    document_words,
    extreme_rows,
    is_total,
    row_groups,
    superlative,
)

__all__ = ["asked_part", "asks_for_value", "document_name", "in_period", "label_share", "names_period", "period_term", "question_years", "row_label",
           "value_key", "value_scores"]

_VALUE_QUESTION = re.compile(
    r"\b(how (much|many|big|large|high|low|long)|amount|total|number of|percent(age)?|%|ratios?|rates?|margins?|"
    r"revenues?|sales|income|earnings|ebitda|eps|cash|costs?|expenses?|prices?|values?|growth|figures?|balances?|"
    r"capex|debt|assets|liabilit(y|ies)|dividends?|proceeds|gains?|loss(es)?|profits?|spend|shares?)\b", re.IGNORECASE)
_YEAR = re.compile(r"\b(?:FY\s?)?((?:19|20)\d\d)\b|\bFY\s?'?(\d\d)\b", re.IGNORECASE)


_FISCAL = re.compile(r"^fy'?(\d\d|(?:19|20)\d\d)$")
#: words that say what to do with a value ("Was there any change in the number of stores?"), not which value
OPERATION_WORDS = frozenset(tokenize("number amount quantity", stop_words=False))


def asks_for_value(question: str) -> bool:
    """Whether the question asks for a quantity (an amount, a rate, a count), so a table row may answer.

    Example:
        >>> asks_for_value("What was Amcor's adjusted EBITDA in FY2023?"), asks_for_value("Who founded Acme?")
        (True, False)
    """
    return bool(_VALUE_QUESTION.search(question))


def period_term(token: str) -> str:
    """A token as a period: "fy2021" and "fy21" match the year "2021" a table header prints.

    Example:
        >>> period_term("fy2021"), period_term("fy21"), period_term("rate")
        ('2021', '2021', 'rate')
    """
    match = _FISCAL.match(token)
    return token if not match else match.group(1) if len(match.group(1)) == 4 else f"20{match.group(1)}"


def question_years(question: str) -> set[str]:
    """The years a question names, as four digits ("FY23" -> "2023")."""
    return {m.group(1) or f"20{m.group(2)}" for m in _YEAR.finditer(question)}


def row_label(text: str) -> str:
    """A row unit's label: the text before its cells (" | ") or its column list (" (")."""
    return re.split(r" \| | \(", text, maxsplit=1)[0].strip()


def document_name(metadata: Mapping[str, object]) -> frozenset[str]:
    """The terms of a unit's document name: its title and file name ("BESTBUY_2024Q2_10Q")."""
    stem = PurePath(str(metadata.get("source") or "")).stem
    return frozenset(tokenize(f"{metadata.get('title') or ''} {stem}".replace("_", " ").replace("-", " ")))


def label_share(weights: Mapping[str, float], question: str, units: Sequence[Unit],
                document: Sequence[frozenset[str]] = ()) -> list[float]:
    """Per unit: for a row, how well its label names what the question asks (0 for sentences): the
    harmonic mean of the key terms' weighted share in the label and the label words' share in the question.
    `document`: per unit, the question's words naming its document, which do not count as label words."""
    total = sum(weights.values()) or 1.0
    asked = set(tokenize(question))
    out = []
    for i, unit in enumerate(units):
        label = set(tokenize(row_label(unit.text))) if unit.kind == "row" else set()
        label -= document[i] if document else frozenset()
        if not label:
            out.append(0.0)
            continue
        named = sum(w for t, w in weights.items() if t in label) / total   # the question's terms in the label
        spelled = len(label & asked) / len(label)                        # the label's words in the question
        out.append(2 * named * spelled / (named + spelled) if named and spelled else 0.0)
    return out


def names_period(years: set[str], units: Sequence[Unit]) -> list[bool]:
    """Per unit: whether its text or column headers name one of `years`."""
    return [bool(years) and any(y in f"{u.text} {u.terms}" for y in years) for u in units]


_ROW = re.compile(r"^(?P<label>.+?) \((?P<columns>[^()]*(?:\([^()]*\)[^()]*)*)\)$")


def in_period(text: str, years: set[str], kind: str = "") -> str:
    """A row quoted with the columns of the years (and the period kind) asked only ("Adjusted EBITDA (2023:
    2,018)"); the row as it is when its columns are not named by years or periods or none of them is asked.

    Example:
        >>> in_period("Adjusted EBITDA (2022: 2,117; 2023: 2,018)", {"2023"})
        'Adjusted EBITDA (2023: 2,018)'
        >>> in_period("Net revenues (Three Months 2023: 3,942; Six Months 2023: 7,815)", {"2023"}, "quarter")
        'Net revenues (Three Months 2023: 3,942)'
    """
    match = _ROW.match(text)
    if not (years or kind) or not match:
        return text
    groups = match.group("columns").split("; ")
    kept = [g for g in groups if not years or any(y in g.partition(": ")[0] for y in years)] or groups
    if kind and any(kinds(g.partition(": ")[0]) for g in kept):   # columns named by periods: the one asked
        kept = [g for g in kept if kind in kinds(g.partition(": ")[0])] or kept
    return f"{match.group('label')} ({'; '.join(kept)})" if len(kept) < len(groups) else text


def asked_part(question: str) -> str:
    """The sentences of a question that ask (those ending in "?"), without the instructions around them
    ("If it is not stated then answer 0.", "Please answer in USD millions.") and without its asides in
    brackets ("Kenvue (formerly the Consumer Health segment)"); the whole text when none asks.

    Example:
        >>> asked_part("What were restructuring costs in FY2022? If none are stated then answer 0.")
        'What were restructuring costs in FY2022?'
        >>> asked_part("What did the sale of Kenvue (formerly Consumer Health) bring in?")
        'What did the sale of Kenvue bring in?'
    """
    asking = [s for s in re.split(r"(?<=[?.!])\s+", question.strip()) if s.endswith("?")]
    return re.sub(r"\s*\([^()]{3,}\)", "", " ".join(asking) or question)


def value_key(key: Sequence[str]) -> list[str]:
    """A value question's key terms without the words that say when ("Q2", "three months ended June 30, 2023":
    matched as its period), which way to compare ("highest": read across the rows) or that a value is asked
    ("the number of stores": the stores are counted, not a row saying "number"); all of them if nothing else is left.

    Example:
        >>> value_key(["highest", "revenu", "fy2023", "q2"]), value_key(["number", "store"])
        (['revenu'], ['store'])
    """
    kept = [t for t in key if not period_word(period_term(t)) and t not in COMPARISON_WORDS and t not in OPERATION_WORDS]
    return kept or list(key)


def value_scores(weights: Mapping[str, float], key: Sequence[str], question: str, units: Sequence[Unit]) -> np.ndarray:
    """Per unit, the value signals in units of the answerer's `label_weight`: the row's label naming the
    metric (the document's own name left out), half for naming a year asked, half for the period kind
    asked (minus half for only other kinds), half for the total row of a table about the metric whose other
    rows are not named, and 1.5 for the extreme row of a superlative question (`rag.generation.row_choice`)."""
    names = {}
    named = [names.setdefault(id(u.metadata), document_words(key, document_name(u.metadata))) for u in units]
    share = np.array(label_share(weights, question, units, named))
    score = share + 0.5 * np.array(names_period(question_years(question), units), dtype=float)
    kind = asked_kind(question)
    if kind:   # "Q2": the three-month figure, not the six-month one
        found = [kinds(f"{u.text} {u.terms}") for u in units]
        score += 0.5 * np.array([(kind in k) - (bool(k) and kind not in k) for k in found], dtype=float)
    total, asked = sum(weights.values()) or 1.0, set(tokenize(question))
    best: tuple[float, int, list[int]] = (0.0, 0, [])
    for (_, header), rows in row_groups([u.kind for u in units], [u.source for u in units],
                                        [u.terms for u in units]).items():
        head = {period_term(t) for t in tokenize(header)} - named[rows[0]]
        about = sum(w for t, w in weights.items() if t in head) / total   # the table's headers name the metric
        totals = [i for i in rows if is_total(row_label(units[i].text))]
        whole = [i for i in totals   # "Total" or "Total stores", not "Total mortgage revenue"
                 if not set(tokenize(row_label(units[i].text))) - {"total"} - asked - named[i]]
        if about and whole and max([share[i] for i in rows if i not in totals], default=0.0) < 0.5:
            score[whole] += 0.5
        parts = [i for i in rows if i not in totals]
        if (about, len(parts)) > best[:2] and len(parts) >= 3:   # the most complete table about the metric
            best = (about, len(parts), parts)
    direction = superlative(question)
    if direction:   # "Which segment had the highest ...?" asks for a part: a total row never answers it
        score -= 1.5 * np.array([u.kind == "row" and is_total(row_label(u.text)) for u in units])
    if direction and best[2]:   # "Which segment had the highest revenues?": compare the rows in the period asked
        years = question_years(question)
        values = {i: v for i in best[2] if (v := cell_value(in_period(units[i].text, years, kind))) is not None}
        extreme = extreme_rows(values, direction)
        if extreme is not None:
            score[extreme] += 1.5
    return score
