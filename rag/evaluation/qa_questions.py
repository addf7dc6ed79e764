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
    >>> sentence_question("werkzeug | 59 (51 + 8) | 50/51 (98%) | 29/51 (57%)") is None   # a table row
    True
    >>> sentence_question("No answer to a question that is not a comparison changed.") is None   # a clause
    True
    >>> sentence_question("Both stores answered wrong (31%) on the held-out pages.") is None   # an aside in brackets
    True
"""

from __future__ import annotations

import re

__all__ = ["clean_sentence", "sentence_question"]

_NUMBER = re.compile(r"(?<![\w.$€£-])(?P<cur>[$€£])?(?P<num>\d[\d,]*(?:\.\d+)?)(?P<unit>\s?%|\s?percent\b)?"
                     r"(?:\s(?P<scale>million|billion|thousand|trillion)\b)?(?![\w.-]*\w)")
_COPULA = re.compile(r"^(?P<subject>[^,;:()]{2,60}?)\s+(?P<verb>is|are|was|were)\s+(?P<rest>.{8,})$")
_PRONOUNS = {"it", "this", "that", "these", "those", "they", "he", "she", "we", "you", "i", "there", "here",
             "which", "what", "who", "each", "all", "both", "one", "some", "such", "its", "their", "his", "her", "our",
             "my", "your"}   # "Its context hit is 40/45": whose, the sentence before says
# a question that needs the sentence before it ("What was written after it?") or ends elliptically ("What is a plain
# question's?")
_INCOMPLETE = re.compile(r"\b(?:it|they|them|he|she|him|her)\b|\w(?:'s|s')\?$|"
                         r"\b(?:from|to|with|of|on|in|for|by|at|about|then)\?$", re.IGNORECASE)   # "... written from?"
# a subject that is a clause ("No answer to a question that is not ..."): its verb belongs to the clause
_CLAUSE_WORDS = {"that", "which", "who", "whom", "whose", "where", "when", "if", "whether", "because", "than", "unless",
                 "while", "whereas"}
_PREPOSITIONS = {"with", "in", "on", "at", "for", "from", "by", "to", "of", "after", "before", "since", "during"}
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


def _prose(sentence: str) -> bool:
    """Whether the text is a sentence: no table cell separators, no emphasis or code mark left open by a sentence
    cut out of a span, no label ("PostgreSQL (postgresql.json): 40 pages ..." is a list item), and mostly words
    (not figures and marks)."""
    tokens = sentence.split()
    words = [t for t in tokens if re.fullmatch(r"[A-Za-z][A-Za-z'’-]*[,.:]?", t)]
    return not re.search(r"[|*`]|:\s", sentence) and sentence.count(";") <= 2 and len(words) >= 0.6 * len(tokens)


def _number_question(sentence: str) -> tuple[str, str] | None:
    for match in _NUMBER.finditer(sentence):
        answer = match.group(0).strip()
        before, after = sentence[: match.start()].rstrip(), sentence[match.end():]
        if before.count("(") > before.count(")"):
            continue   # a figure in brackets ("answered wrong (31%)") is an aside, not what the sentence says
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
    words = set(subject.lower().split())
    if len(subject.split()) > 6 or first in _PRONOUNS | _PREPOSITIONS or words & (_CLAUSE_WORDS | _PRONOUNS):
        return None   # "With them Docutils", "No answer to a question that": not the subject of the verb
    return f"What {match.group('verb')} {match.group('rest')}", subject


def sentence_question(sentence: str) -> tuple[str, str] | None:
    """`(question, answer)` from one sentence (see the module docstring), or None."""
    sentence = clean_sentence(sentence).rstrip(" .!?:;")
    if not sentence or "?" in sentence or sentence.split()[0].lower() in _PRONOUNS:
        return None   # "It was completed in which year?" needs the sentence before it
    if not _prose(sentence):
        return None   # a table row ("werkzeug | 59 (51 + 8) | 50/51 ..."), a list of figures: no sentence to ask about
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
