"""Answer sentences and their `[n]` citation markers.

An answer such as `"Paris is in France. [1] It has the Louvre [2][3]."` is split into sentences,
each with the source numbers cited right after it (or inside it, before the full stop). Markers
may be `[1]`, `[1][2]` or `[1, 2]`; a marker belongs to the sentence it follows. A marker followed by
more text (not by punctuation) also ends its claim: "Rome is in Italy [1] and Paris in France [2]."
gives two claims, each checked against its own citation, and answers made of quoted fragments
without full stops (list items, table rows, code) split where they were cited.

Example:
    >>> [(s.text, s.citations) for s in parse_answer("Paris is in France. [1] It has the Louvre [2][3].")]
    [('Paris is in France.', [1]), ('It has the Louvre.', [2, 3])]
    >>> strip_citations("Rome [1, 2] is old.")
    'Rome is old.'
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from rag.base.text import split_sentences

__all__ = ["CITATION_PATTERN", "MARKER_WITH_SPACE", "AnswerSentence", "is_abstention", "parse_answer", "strip_citations"]

#: One citation marker: `[3]` or `[1, 2]`. Sources are numbered from 1, so "[0, 1]" (an interval) is text.
CITATION_PATTERN = re.compile(r"\[([1-9]\d*(?:\s*,\s*[1-9]\d*)*)\]")
# A marker with the spaces before it: removing it leaves the text around it as it was written, so a quoted
# sentence keeps its own spacing ("SQLite :memory: [3]." -> "SQLite :memory:.").
MARKER_WITH_SPACE = re.compile(r"[ \t]*\[([1-9]\d*(?:\s*,\s*[1-9]\d*)*)\]")
_BOUNDARY = re.compile(r"(\[[1-9]\d*(?:\s*,\s*[1-9]\d*)*\])[ \t]+(?=[^\s.,;:!?)\[])")
_ABSTAIN = re.compile(r"^\s*(i don'?t know|i do not know|i cannot answer|i'?m not sure|i am not sure|"
                     r"the (retrieved )?(context|sources) do(es)? not)",
                      re.IGNORECASE)


class AnswerSentence(BaseModel):
    """One sentence of an answer, without its markers, and the source numbers it cites (in order)."""

    text: str
    citations: list[int] = Field(default_factory=list)


def strip_citations(text: str) -> str:
    """The text with every `[n]` marker and the spaces it leaves removed; nothing else changes."""
    return MARKER_WITH_SPACE.sub("", text).strip()


def is_abstention(sentence: str) -> bool:
    """True for "I don't know"-style sentences, which make no claim to support."""
    return bool(_ABSTAIN.match(sentence))


def parse_answer(answer: str) -> list[AnswerSentence]:
    """Split an answer into sentences and attach each marker to the sentence it follows."""
    answer = _BOUNDARY.sub(lambda m: m.group(1) + "\n\n", answer)
    markers: list[tuple[int, list[int]]] = []   # (position in the cleaned text, numbers)
    pieces: list[str] = []
    cursor = 0
    length = 0
    for match in MARKER_WITH_SPACE.finditer(answer):
        piece = answer[cursor:match.start()]
        pieces.append(piece)
        length += len(piece)
        markers.append((length, [int(n) for n in re.findall(r"\d+", match.group(1))]))
        cursor = match.end()
    pieces.append(answer[cursor:])
    cleaned = "".join(pieces)

    spans: list[tuple[int, int, str]] = []
    pos = 0
    for sentence in split_sentences(cleaned, abbreviations=True):
        words = sentence.split()
        found = re.compile(r"\s+".join(re.escape(w) for w in words)).search(cleaned, pos) if words else None
        start, end = (found.start(), found.end()) if found else (pos, pos)
        spans.append((start, end, sentence))
        pos = end
    out = [AnswerSentence(text=strip_citations(s)) for _, _, s in spans]
    for at, numbers in markers:
        # The marker belongs to the last sentence that starts before it.
        owner = max((i for i, (start, _, _) in enumerate(spans) if start < at), default=0 if spans else None)
        if owner is None:
            continue
        for n in numbers:
            if n not in out[owner].citations:
                out[owner].citations.append(n)
    return [s for s in out if s.text]
