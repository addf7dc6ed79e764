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


def kind_scores(question: str, qtype: str, texts: Sequence[str], titles: Sequence[str]) -> np.ndarray:
    """Per unit text (with its document's title): the kind-of-answer bonus, in units of `type_weight`."""
    score = np.zeros(len(texts))
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
