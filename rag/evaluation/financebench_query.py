"""Offline query analysis used by the benchmark pipelines: sub-queries and document routing.

`sub_queries` splits a long question into its sentences (a question often states the metric,
then defines it with the line items to look up), so each part is searched on its own.

`route_documents` scores each document of a shared store by how well its metadata matches what
the question names: the organisation (name words weighted by rarity across the store, a prefix of
the squashed name such as "JPM" for "JPMorgan", or initials such as "J&J"), the year (the latest
year named, since an annual report covers earlier years too) and the quarter or form. Nothing here
knows any particular company: it compares the question with the store's own metadata.

Example:
    >>> docs = {"A_2022": {"company": "Acme Rockets", "doc_period": 2022, "doc_type": "10k"},
    ...         "A_2023": {"company": "Acme Rockets", "doc_period": 2023, "doc_type": "10k"},
    ...         "G_2023": {"company": "Globex", "doc_period": 2023, "doc_type": "10k"}}
    >>> scores = route_documents("What were Acme Rockets' sales in FY2022?", docs)
    >>> max(scores, key=scores.get)
    'A_2022'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rag.core.text import idf_weights, split_sentences, tokenize

__all__ = ["question_periods", "route_documents", "sub_queries"]

_YEAR = re.compile(r"(?<!\d)(?:fy\s?|q[1-4]\s?)?((?:19|20)\d\d)(?!\d)", re.I)
_SHORT_FY = re.compile(r"\bfy\s?'?(\d\d)\b", re.I)
_QUARTER = re.compile(r"\bq([1-4])\b|(?<=\d)q([1-4])\b|\bq([1-4])(?=\d)|\b(first|second|third|fourth)\s+(?:fiscal\s+)?quarter",
                      re.I)
_ORDINAL = {"first": 1, "second": 2, "third": 3, "fourth": 4}
_DOC_QUARTER = re.compile(r"(?:19|20)\d\d\s?Q([1-4])", re.I)
_FORMS = {"10k": ("10-k", "10k", "annual report"), "10q": ("10-q", "10q", "quarterly report"),
          "8k": ("8-k", "8k"), "earnings": ("earnings",)}
_MIN_SUB_QUERY_TOKENS = 3


def sub_queries(question: str) -> list[str]:
    """The question followed by those of its sentences that say enough to search on their own.

    Example:
        >>> sub_queries("What is the FY2019 DPO? DPO is 365 * payables / COGS. Answer in days.")
        ['What is the FY2019 DPO? DPO is 365 * payables / COGS. Answer in days.', 'DPO is 365 * payables / COGS.']
    """
    sentences = split_sentences(question)
    if len(sentences) < 2:
        return [question]
    return [question] + [s for s in sentences if len(tokenize(s)) >= _MIN_SUB_QUERY_TOKENS]


def question_periods(question: str) -> tuple[list[int], list[int]]:
    """Years (four digits, or FY + two digits) and quarters (1-4) the question names.

    Example:
        >>> question_periods("Did sales grow between FY20 and Q2 of FY2021, the second quarter?")
        ([2020, 2021], [2, 2])
    """
    years = [int(y) for y in _YEAR.findall(question)]
    years += [2000 + int(y) for y in _SHORT_FY.findall(question) if f"20{y}" not in question]
    quarters = []
    for groups in _QUARTER.findall(question):
        digit = next((g for g in groups[:3] if g), None)
        quarters.append(int(digit) if digit else _ORDINAL[groups[3].lower()])
    return sorted(set(years)), quarters


def _name_words(meta: Mapping[str, Any], doc_name: str) -> list[str]:
    name = str(meta.get("company") or re.split(r"[_\-\s]\d", doc_name)[0])
    return [w.lower() for w in re.findall(r"[A-Za-z0-9]+", name.replace("_", " "))]


def route_documents(question: str, documents: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """A score in [0, 1] per document: how well its organisation, period and form match the question."""
    names = list(documents)
    words = {n: _name_words(documents[n], n) for n in names}
    tokens = {n: set(tokenize(" ".join(words[n]))) for n in names}
    idf = idf_weights(tokens.values())
    question_tokens = set(tokenize(question))
    aliases = _question_aliases(question)
    years, quarters = question_periods(question)
    lowered = question.lower()
    forms = {form for form, cues in _FORMS.items() if any(c in lowered for c in cues)}
    scores: dict[str, float] = {}
    for n in names:
        meta = documents[n]
        total = sum(idf.get(t, 0.0) for t in tokens[n])
        name_score = sum(idf.get(t, 0.0) for t in tokens[n] & question_tokens) / total if total else 0.0
        squashed = "".join(words[n])
        initials = "".join(w[0] for w in words[n])
        for alias in aliases:
            if (len(alias) >= 3 and squashed.startswith(alias) and squashed != alias) or \
                    (len(initials) >= 2 and alias == initials):
                name_score = max(name_score, 0.9)
        period_score = 0.0
        doc_year = meta.get("doc_period")
        match = _DOC_QUARTER.search(n)
        doc_quarter = int(match.group(1)) if match else None
        doc_type = str(meta.get("doc_type", "")).lower()
        if years and isinstance(doc_year, int):
            period_score += 1.0 if doc_year == max(years) else 0.3 if doc_year == max(years) + 1 else 0.0
        if quarters:
            period_score += 0.5 if doc_quarter in quarters else 0.0
        elif doc_quarter is None and doc_type in ("10k", ""):
            period_score += 0.2
        if forms and doc_type in forms:
            period_score += 0.3
        scores[n] = (name_score + 0.2 * period_score) / 1.4
    return scores


def _question_aliases(question: str) -> set[str]:
    """Acronym-like words of the question, lowercased: 'JPM', 'JnJ' -> 'jpm', 'jj' (capitals only)."""
    out = set()
    for word in re.findall(r"[A-Za-z][A-Za-z&]+", question):
        capitals = [c for c in word if c.isupper()]
        if len(capitals) >= 2:
            out.add(word.lower().replace("&", ""))
            out.add("".join(capitals).lower())
    return out
