"""Comparison questions, for side searches: "What is the difference between X and Y?" searched as X and as Y.

A question comparing two things often retrieves pages about one of them. With side searches on
(`RetrievalSettings(side_searches=True)`, off by default) the pipeline also searches each side on its
own (`rag.compose.pipeline`): `comparison_sides` finds the two sides (None for any other question),
`side_question` words the question about one side. The words of a side that the other does not share
are its keys ("git fetch" / "git pull": `fetch` / `pull`); a side named by code ("-q" against "-Q",
"before_request") keeps its name as written.

Example:
    >>> sides = comparison_sides("What is the difference between git fetch and git pull?")
    >>> sides.first, sides.second, sides.first_keys, sides.second_keys
    ('git fetch', 'git pull', ('fetch',), ('pull',))
    >>> side_question("How does the connect timeout compare to the read timeout?",
    ...               comparison_sides("How does the connect timeout compare to the read timeout?"), 1)
    'How does the read timeout timeout?'
    >>> comparison_sides("Which option compares two files line by line?") is None
    True
"""

from __future__ import annotations

import re
from typing import NamedTuple

from rag.base.text import tokenize

__all__ = ["Sides", "code_names", "comparison_sides", "side_question"]

_END = r"(?=\s*(?:[?.!:;,](?:\s|$)|\s(?:in|on|for|during|as of|at|over|under|by)\s|$))"
_VERB = r"(?:does|do|did|is|are|was|were|has|have|had)"
# (pattern, whether the first side is the open-ended text before the cue: trimmed to the second side's length)
_PATTERNS: tuple[tuple[re.Pattern[str], bool], ...] = (
    (re.compile(rf"\bdiffer(?:ence|ences)?\s+between\s+(?P<a>.+?)\s+and\s+(?P<b>.+?){_END}", re.I), False),
    (re.compile(rf"\bhow\s+{_VERB}\s+(?P<a>.+?)\s+(?:compare|differ|stack up)\s+(?:to|with|from|against)\s+"
                rf"(?P<b>.+?){_END}", re.I), False),
    (re.compile(rf"\b{_VERB}\s+(?P<a>.+?)\s+and\s+(?P<b>.+?)\s+(?:\w+\s+)?(?:the same|differ|different|"
                r"identical|similar|alike)\b", re.I), False),
    (re.compile(rf"\b{_VERB}\s+(?P<a>.+?)\s+(?:\w+\s+)?the same\s+(?:\w+\s+){{0,2}}?as\s+(?P<b>.+?){_END}",
                re.I), False),
    (re.compile(rf"\b{_VERB}\s+(?P<a>.+?)\s+(?:\w+er|more\s+\w+|less\s+\w+|better|worse)\s+than\s+(?P<b>.+?){_END}",
                re.I), False),
    (re.compile(rf"(?P<a>[^,;:?]+?)\s+(?:(?:as\s+)?compared|relative)\s+(?:to|with)\s+(?P<b>.+?){_END}", re.I), True),
    (re.compile(rf"(?P<a>[^,;:?]+?)\s+(?:vs\.?|versus)\s+(?P<b>.+?){_END}", re.I), True),
)
_CUE_WORDS = re.compile(r"(?<![\w-])(?:differences?|different|differ|compared?|comparison|versus|vs\.?|between|same|"
                        r"similar|alike|identical)(?![\w-])", re.I)
# a side named by code: an option ("-a", "-Q": case matters), a shell parameter ("$*") or a snake_case name
_CODE = re.compile(r"(?<![\w$-])(?:--?[A-Za-z][\w-]*|\$[*@#?!$0-9-]|[A-Za-z]\w*_\w+)(?![\w])")
# one thing in two periods ("Q2 of FY2023 compared to Q2 of FY2022") is a value question, not two sides
_PERIOD = re.compile(r"^(?:fy)?\d{2,4}$|^q[1-4]$|^h[12]$|^(?:quarter|year|fiscal|month)", re.I)


class Sides(NamedTuple):
    """The two sides of a comparison as the question words them, each side's own key terms, and where the
    two sides stand in the question."""

    first: str
    second: str
    first_keys: tuple[str, ...]
    second_keys: tuple[str, ...]
    span: tuple[int, int] = (0, 0)


def code_names(side: str) -> tuple[str, ...]:
    """The code names a side is named by, in order; () for a side of words.

    Example:
        >>> code_names("the -E option"), code_names("request_started signal"), code_names("git fetch")
        (('-E',), ('request_started',), ())
    """
    return tuple(dict.fromkeys(m.group() for m in _CODE.finditer(side)))


def comparison_sides(question: str) -> Sides | None:
    """The two sides a comparison question asks about, or None for a question that compares nothing."""
    for pattern, open_first in _PATTERNS:
        match = pattern.search(question)
        if not match:
            continue
        first, second = (re.sub(r"^(?:the|an?)\s+", "", match.group(g).strip(), flags=re.I) for g in "ab")
        if open_first:   # "What does exit status 1 mean for X compared to Y": the side is "X"
            first = " ".join(first.split()[-max(len(second.split()), 1):])
        elif len(second.split()) > len(first.split()):   # "the -b and -w options of diff": "-w"
            second = " ".join(second.split()[:len(first.split())])
        start = match.start("a") + match.group("a").rfind(first)
        end = match.start("b") + match.group("b").find(second) + len(second)
        first_terms, second_terms = tokenize(first), tokenize(second)
        first_keys = tuple(dict.fromkeys(t for t in first_terms if t not in second_terms))
        second_keys = tuple(dict.fromkeys(t for t in second_terms if t not in first_terms))
        codes = code_names(first), code_names(second)
        if all(codes) and set(codes[0]) != set(codes[1]):   # "-q" and "-Q": told apart by their code names
            first_keys, second_keys = first_keys or codes[0], second_keys or codes[1]
        if not first_keys or not second_keys:
            continue
        if any(all(_PERIOD.match(k) for k in keys) for keys in (first_keys, second_keys)):
            continue
        return Sides(first, second, first_keys, second_keys, (start, end))
    return None


def side_question(question: str, sides: Sides, which: int) -> str:
    """The question about one side: the two sides replaced by that side (with the words of the other side that
    are not its own keys), the comparison words and dangling connectives taken out."""
    own, other = (sides.first, sides.second) if which == 0 else (sides.second, sides.first)
    other_keys = set(sides.second_keys if which == 0 else sides.first_keys)
    shared = " ".join(w for w in other.split() if not set(tokenize(w)) & other_keys and not code_names(w))
    start, end = sides.span
    text = f"{question[:start]}{own} {shared}{question[end:]}" if end > start else question
    text = _CUE_WORDS.sub(" ", text)
    text = re.sub(r"\b(?:and|to|with|from|as|than|the)\b(?=\s*(?:[?.!,:;]|$|(?:and|to|with|from|as|than|the|in|on|for)\b))",
                  " ", text, flags=re.I)   # connectives left dangling
    return re.sub(r"\s+([?.!,])", r"\1", " ".join(text.split()))
