"""The kind-of-answer signals of the offline answerer: what a unit holds beyond the question's words.

`kind_scores` gives each context unit a bonus (in units of the answerer's `type_weight`) for holding
the kind of answer the question asks for (`rag.generation.question_types`):

- the kind itself: an option for "Which option ...", a number for "How many ...", a cause for "Why ...";
- an identifier whose name spells the question (`--ignore-all-space` for "ignore all white space");
- a definition of an option (a definition-list unit, "-s, --short: Give the output in the
  short-format.") for a question asking for an option: it is that option's own description, where a
  sentence naming an option in passing ("... can be overridden with the -f option") is not, at half weight;
  for a question asking for a command, the same half weight is taken off: an option's entry
  ("--untracked: ... search also in untracked files") describes an option, not a command;
- a definition of what the question asks to define ("How is citation precision defined?", "What does
  X mean?", "What is X?"): the thing named then "=", ":", "is", "means" or "refers to";
- the word "default" (or "normally") for a question asking what happens by default, at half weight;

and a malus for a unit that starts by denying what the question asks ("--soft: Does not touch the
index ..." for "Which mode resets the index?").

Example:
    >>> kind_scores("Which option resets the index?", "identifier",
    ...             ["--soft: Does not touch the index.", "--mixed: Resets the index."], ["", ""]).tolist()
    [0.5, 1.5]
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from rag.generation.question_types import (
    defined_subject,
    has_answer_of_type,
    identifier_kind,
    name_match,
    negated,
    title_name,
)

__all__ = ["kind_scores"]

_DEFINITION = re.compile(r"^--?[A-Za-z][\w-]*(?:[= ]\S+)?(?:, --?[A-Za-z][\w-]*(?:[= ]\S+)?)*: ")
_DEFAULT_Q = re.compile(r"\bdefaults?\b", re.IGNORECASE)
_DEFAULT = re.compile(r"\bdefault(?:s|ed)?\b|\bnormally\b", re.IGNORECASE)


_WHICH = re.compile(r"^\s*(?:which|what)\s+(?P<words>(?:[\w-]+\s+){1,3})", re.IGNORECASE)
_NOT_NOUNS = frozenset("of in does do did can should is are was were will would the a an".split())
# a name: code-like (snake_case, call, dotted, option, dot-command) or an upper-case word of two letters or more
_NAME = r"(?:[A-Za-z]\w*_\w+|\w+\(\)|\w+(?:\.\w+)+|--?[A-Za-z][\w-]*|\.[a-z]\w*|[A-Z][A-Z0-9]+)"


def instance_of(question: str, texts: Sequence[str]) -> list[bool]:
    """Per text: whether it names an instance of the thing a "Which <noun> ...?" question asks for, a name next
    to the noun ("PRAGMA foreign_keys", "the SHARED lock", "the bm25() function"; the noun is one of the question's
    first three words after "which", before a verb).

    Example:
        >>> instance_of("Which lock lets many processes read?", ["A SHARED lock allows reading.", "Locks are held."])
        [True, False]
    """
    match = _WHICH.match(question)
    if not match:
        return [False] * len(texts)
    nouns = []
    for word in match.group("words").split():
        if word.lower() in _NOT_NOUNS:
            break
        if word.isalpha() and word.islower() and len(word) >= 3:
            nouns.append(re.escape(word[:-1] if word.endswith("s") and len(word) > 4 else word))
    if not nouns:
        return [False] * len(texts)
    noun = f"(?:{'|'.join(nouns)})"
    pattern = re.compile(rf"(?<![\w.-]){_NAME}\s+(?i:{noun})s?\b|\b(?i:{noun})s?\s+(?:the\s+)?{_NAME}(?![\w(])")
    return [bool(pattern.search(t)) for t in texts]


def kind_scores(question: str, qtype: str, texts: Sequence[str], titles: Sequence[str]) -> np.ndarray:
    """Per unit text (with its document's title): the kind-of-answer bonus, in units of `type_weight`."""
    score = np.zeros(len(texts))
    # "Which pragma ...?": a unit naming one ("PRAGMA integrity_check"); options and commands have their own entries
    if qtype == "open" or (qtype == "identifier" and identifier_kind(question) == "code"):
        score += np.array(instance_of(question, texts), dtype=float)
    if qtype != "open":  # the unit holding the kind of answer asked for (an option, a number) comes first
        score += [has_answer_of_type(t, qtype, question, title) for t, title in zip(texts, titles)]
    score -= negated(question, list(texts))
    if qtype in ("identifier", "procedure"):  # an option named after what the question asks ("--ignore-all-space")
        score += [name_match(f"{t} {title_name(title)}", question) for t, title in zip(texts, titles)]
    if qtype == "identifier" and identifier_kind(question) in ("option", "command"):
        sign = 1 if identifier_kind(question) == "option" else -1   # an option's entry is not a command's description
        score += sign * 0.5 * np.array([bool(_DEFINITION.match(t)) for t in texts])
    subject = defined_subject(question) if qtype == "open" else ""
    if subject:   # "How is citation precision defined?": "citation precision = correct citations / all citations"
        pattern = re.compile(rf"(?:^|\W){re.escape(subject)}\W{{0,3}}\s*(?:=|:|\bis\b|\bare\b|\bmeans\b|\brefers to\b)",
                             re.IGNORECASE)
        score += [bool(pattern.search(t)) for t in texts]
    if _DEFAULT_Q.search(question):
        score += 0.5 * np.array([bool(_DEFAULT.search(t)) for t in texts])
    return score
