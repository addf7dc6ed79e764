"""What a question names, for document routing: names, compound names, acronym aliases, years, quarters.

`rag.retrieval.routing.DocumentRouter` compares these with each document's card.

Example:
    >>> sorted(name_tokens("Did Best Buy grow in FY2019?")), sorted(years_in("FY2019"))
    (['best', 'buy', 'fy2019'], [2019])
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rag.base.text import tokenize

__all__ = ["WORD", "alias_words", "aliases", "compound_names", "initials_of", "name_tokens", "period_tokens",
           "quarters_in", "years_in"]

_YEAR = re.compile(r"(?<![\d])((?:19|20)\d{2})(?![\d])")
_ACRONYM = re.compile(r"\b(?=\w*[A-Z]\w*[A-Z])[A-Za-z&]{3,}\b")  # JPM, JnJ, AMD: two capitals or more
_SHORT_FY = re.compile(r"\bFY\s?'?(\d{2})\b", re.IGNORECASE)
_QUARTER_BEFORE_YEAR = re.compile(r"\b(Q[1-4])(?=(?:19|20)\d{2}(?!\d))", re.IGNORECASE)   # "Q22023"
_QUARTER = re.compile(r"(?:\b|(?<=\d))Q([1-4])(?:\b|(?=\d))|\b(first|second|third|fourth)\s+(?:fiscal\s+)?quarter",
                      re.IGNORECASE)
_ORDINAL = {"first": 1, "second": 2, "third": 3, "fourth": 4}
WORD = re.compile(r"[A-Za-z0-9&]+")


def period_tokens(tokens: set[str]) -> set[str]:
    """The tokens that are numbers, years or short fiscal years ("fy22"): periods, not names."""
    return {t for t in tokens if t.isdigit() or _YEAR.fullmatch(t) or _SHORT_FY.fullmatch(t)}


def years_in(text: str) -> set[int]:
    """Four-digit years (1900-2099) in text, plus two-digit fiscal years ("FY22" -> 2022).

    Example:
        >>> sorted(years_in("FY22 vs fiscal 2021, doc_2019_10K"))
        [2019, 2021, 2022]
    """
    text = _QUARTER_BEFORE_YEAR.sub(r"\1 ", text.replace("_", " "))
    years = {int(y) for y in _YEAR.findall(text)}
    years |= {2000 + int(y) for y in _SHORT_FY.findall(text)}
    return years


def quarters_in(text: str) -> set[int]:
    """Quarters (1-4) named in text: "Q2", "2023Q2", "Q22023", "second (fiscal) quarter".

    Example:
        >>> sorted(quarters_in("Q2 of FY2023 vs the fourth quarter; ACME_2022Q1_10Q"))
        [1, 2, 4]
    """
    return {int(digit) if digit else _ORDINAL[word.lower()]
            for digit, word in _QUARTER.findall(text.replace("_", " "))}


def name_tokens(question: str) -> set[str]:
    """Tokens of the words a question writes as names: capitalised, acronyms ("AMD", "JnJ") or letters with
    digits ("3M"). Stop words drop out ("How", "Which"), so an ordinary question names nothing.

    Example:
        >>> sorted(name_tokens("How do I start the server?")), sorted(name_tokens("What was 3M's capex in FY2022?"))
        ([], ['3m', 'fy2022'])
    """
    return set(tokenize(" ".join(w for w in WORD.findall(question) if _is_name(w))))


def _is_name(word: str) -> bool:
    return word[0].isupper() or sum(c.isupper() for c in word) >= 2 or \
        (any(c.isdigit() for c in word) and any(c.isalpha() for c in word))


def compound_names(question: str) -> dict[str, str]:
    """Two or three adjacent words written as names, joined: token -> the joined word.

    A name written in words ("Best Buy", "General Mills", "Coca-Cola") is often one word in a file
    name or title ("BESTBUY_2019_10K", "GeneralMills"); the router matches the joined token too.

    Example:
        >>> compound_names("Did Best Buy or General Mills grow?")   # the router keeps those some card holds
        {'didbest': 'DidBest', 'didbestbuy': 'DidBestBuy', 'bestbuy': 'BestBuy', 'generalmil': 'GeneralMills'}
    """
    words = [(m.group(), m.start(), m.end()) for m in WORD.finditer(question)]
    out: dict[str, str] = {}
    for i in range(len(words)):
        run = [words[i]]
        for nxt in words[i + 1: i + 3]:
            gap = question[run[-1][2]: nxt[1]]
            if gap not in (" ", "-") or not all(_is_name(w) and w.isalpha() for w, _, _ in [*run, nxt]):
                break
            run.append(nxt)
            joined = "".join(w for w, _, _ in run)
            tokens = tokenize(joined, stop_words=False)
            if len(tokens) == 1:
                out.setdefault(tokens[0], joined)
    return out


def alias_words(question: str) -> list[str]:
    """Acronym-like words of the question: two capitals or more ("JPM", "JnJ"), or "J&J"."""
    return _ACRONYM.findall(question) + re.findall(r"\b[A-Z]&[A-Z]\b", question)


def initials_of(word: str) -> str:
    """The capitals of a word, lower case: "JnJ" -> "jj"."""
    return "".join(c for c in word if c.isupper()).lower()


def aliases(question: str, words: Iterable[str] | None = None) -> tuple[set[str], set[str]]:
    """Acronym-like words of the question (or `words`): (name prefixes "jpm"; initials "jpm", "jj" for "JnJ" or
    "J&J")."""
    words = alias_words(question) if words is None else list(words)
    prefixes = {w.lower().replace("&", "") for w in words}
    # a name prefix needs three letters: "da" (from "D&A") would begin too many words
    return {p for p in prefixes if len(p) >= 3}, {initials_of(w) for w in words} | prefixes
