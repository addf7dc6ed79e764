"""Offline questions a person would ask, made from one sentence with the answer's words taken out.

`sentence_question(sentence)` returns `(question, answer)` or None:

- a number in the sentence is the answer, and the question asks for it in its place
  ("in which year", "what percentage", "how much", "how many <nouns>"; any other number is skipped):
  "Revenue grew 12% in 2024." -> "Revenue grew what percentage in 2024?" / "12%";
- else a short subject of "is / are / was / were" is the answer: "MiniLM is the default embedding
  model." -> "What is the default embedding model?" / "MiniLM";
- else None: no question rather than a list of keywords.

No word of the answer is left in the question (checked, not assumed). Markdown marks (links,
backticks, emphasis, list bullets) are removed from the sentence first.

Example:
    >>> sentence_question("The Colosseum in Rome could hold about 50,000 spectators.")
    ('The Colosseum in Rome could hold about how many spectators?', '50,000')
    >>> sentence_question("The central bank raised interest rates in 2025.")
    ('The central bank raised interest rates in which year?', '2025')
    >>> sentence_question("Chroma is the default vector store of a knowledge base.")
    ('What is the default vector store of a knowledge base?', 'Chroma')
    >>> sentence_question("It was completed in 1889.") is None   # "it": the question needs another sentence
    True
    >>> sentence_question("No rule was written after it."), sentence_question("The median is a plain question's.")
    (None, None)
"""

from __future__ import annotations

import re

__all__ = ["clean_sentence", "sentence_question"]

_NUMBER = re.compile(r"(?<![\w.$€£-])(?P<cur>[$€£])?(?P<num>\d[\d,]*(?:\.\d+)?)(?P<unit>\s?%|\s?percent\b)?"
                     r"(?:\s(?P<scale>million|billion|thousand|trillion)\b)?(?![\w.-]*\w)")
_COPULA = re.compile(r"^(?P<subject>[^,;:()]{2,60}?)\s+(?P<verb>is|are|was|were)\s+(?P<rest>.{8,})$")
_PRONOUNS = {"it", "this", "that", "these", "those", "they", "he", "she", "we", "you", "i", "there", "here",
             "which", "what", "who", "each", "all", "both", "one", "some", "such"}
# a question that needs the sentence before it ("What was written after it?") or ends elliptically ("What is a plain
# question's?")
_INCOMPLETE = re.compile(r"\b(?:it|they|them|he|she|him|her)\b|\w(?:'s|s')\?$", re.IGNORECASE)
_STOPWORDS = {"the", "a", "an", "of", "in", "on", "to", "and", "or", "for", "by", "with", "is", "are", "was",
              "were", "be", "at", "as", "its", "it"}


def clean_sentence(text: str) -> str:
    """A sentence without Markdown marks: `[text](url)` -> text, no backticks, emphasis or bullets."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[`*_]{1,3}([^`*_]+)[`*_]{1,3}", r"\1", text)
    text = re.sub(r"^\s*(?:[-*+]|\d+\.)\s+", "", text)
    return " ".join(text.split())


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOPWORDS}


def _number_question(sentence: str) -> tuple[str, str] | None:
    for match in _NUMBER.finditer(sentence):
        answer = match.group(0).strip()
        before, after = sentence[: match.start()].rstrip(), sentence[match.end():]
        year = re.fullmatch(r"(1[89]|20)\d\d", match.group("num")) and not (match.group("cur") or match.group("unit"))
        if year:
            ask = "which year"
        elif match.group("unit"):
            ask = "what percentage"
        elif match.group("cur") or match.group("scale"):
            ask = "how much"
        elif re.match(r"\s[a-z]{2,}s\b", after):   # a plural noun follows: "50,000 spectators"
            ask = "how many"
        else:
            continue   # a version, an id, a unit we cannot name: no question a person would ask
        question = f"{before} {ask}{after}".strip() if before else f"{ask.capitalize()}{after}"
        return question, answer
    return None


def _copula_question(sentence: str) -> tuple[str, str] | None:
    match = _COPULA.match(sentence)
    if not match:
        return None
    subject = match.group("subject").strip()
    first = subject.split()[0].lower()
    if len(subject.split()) > 6 or first in _PRONOUNS or subject.lower() in _PRONOUNS:
        return None
    return f"What {match.group('verb')} {match.group('rest')}", subject


def sentence_question(sentence: str) -> tuple[str, str] | None:
    """`(question, answer)` from one sentence (see the module docstring), or None."""
    sentence = clean_sentence(sentence).rstrip(" .!?:;")
    if not sentence or "?" in sentence or sentence.split()[0].lower() in _PRONOUNS:
        return None   # "It was completed in which year?" needs the sentence before it
    for make in (_number_question, _copula_question):
        made = make(sentence)
        if made is None:
            continue
        question, answer = made
        question = question.rstrip(" .,;:") + "?"
        if _words(answer) & _words(question) or len(question.split()) < 4 or _INCOMPLETE.search(question):
            continue   # the answer would still be in the question, too little to ask, or it needs another sentence
        return question, answer
    return None
