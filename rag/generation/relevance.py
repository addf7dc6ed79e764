"""Does an answer sentence answer the question? A signal separate from "quoted from the source".

A sentence copied verbatim from the context is supported by construction, whether or not it
answers what was asked ("This can be used to raise an exception if invalid JSON numbers are
encountered" for "What exception does json.loads raise?"). `answer_relevance` scores each answer
sentence against the question, independently of the context it came from:

- key terms: the share of the key terms of the question's asking sentence (not its instructions: "Answer in
  USD millions.") the sentence uses, a fiscal year matched as its year ("FY2022" in a "2022" column);
- meaning: the cosine similarity of the sentence and the question (when an embedding is used);
- kind: the sentence holds the kind of answer the question asks for (`question_types`: an option, a
  number, an extension ...);
- names: the question's names (PostgreSQL, Netflix) that the context never mentions.

A sentence `answers` the question when it has the kind of answer asked for, no name of the question
is missing from the context, and its relevance (0.5 key terms + 0.5 meaning; key terms alone without
an embedding) reaches `RELEVANCE_THRESHOLD`. The threshold was chosen on the diffutils corpus of
`bench/answers.py` and checked on the others (docs/generation.md).

Example:
    >>> [round(r.relevance, 2) for r in answer_relevance("Which city has the Colosseum?",
    ...     ["Rome has the Colosseum.", "Paris has the Louvre."], embedding=None)]
    [0.5, 0.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rag.base.text import tokenize
from rag.generation.question_types import (
    has_answer_of_type,
    missing_names,
    question_type,
)
from rag.generation.value_units import OPERATION_WORDS, asked_part, period_term

__all__ = ["RELEVANCE_THRESHOLD", "Relevance", "answer_relevance", "context_text"]

RELEVANCE_THRESHOLD = 0.45
_GENERIC = frozenset(tokenize("happen happened tell say describe explain know thing things information detail details "
                              "summary overview", stop_words=False))


def context_text(docs: Sequence[Any]) -> str:
    """Everything the context says, with its documents' titles and file names (where a question's
    names are looked for)."""
    parts = []
    for doc in docs:
        meta = getattr(doc, "metadata", None) or {}
        parts += [getattr(doc, "page_content", str(doc)), str(meta.get("title") or ""), str(meta.get("source") or "")]
    return "\n".join(parts)


@dataclass(frozen=True)
class Relevance:
    """How one sentence relates to the question."""

    relevance: float
    kind: bool            # holds the kind of answer the question asks for
    missing: tuple[str, ...]   # names of the question the context never mentions

    def answers(self, threshold: float = RELEVANCE_THRESHOLD) -> bool:
        return self.kind and not self.missing and self.relevance >= threshold


def answer_relevance(question: str, sentences: Sequence[str], *, context_text: str = "",
                     embedding: object | None = None,
                     vectors: Callable[[Sequence[str]], np.ndarray] | None = None) -> list[Relevance]:
    """Relevance of each sentence to the question (see the module docstring).

    Args:
        question: the question asked.
        sentences: the answer's sentences (citation markers stripped).
        context_text: the context's text with titles, to find the question's names in; empty: not checked.
        embedding: an Embeddings object for the meaning part (None: key terms only).
        vectors: a function returning unit-length vectors for texts (reuses a scorer's cache); wins over
            `embedding`.
    """
    if not sentences:
        return []
    # the asking sentence's terms (not its instructions: "Answer in USD millions."), a period word as its period
    key = {period_term(t) for t in tokenize(asked_part(question))} - _GENERIC - OPERATION_WORDS
    share = np.array([len(key & {period_term(t) for t in tokenize(s)}) / len(key) if key else 1.0 for s in sentences])
    cosine = None
    if vectors is None and embedding is not None:
        def vectors(texts: Sequence[str]) -> np.ndarray:
            matrix = np.asarray(embedding.embed_documents(list(texts)), dtype=float)
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            return matrix / np.where(norms == 0, 1.0, norms)
    if vectors is not None:
        matrix = vectors([question, *sentences])
        cosine = np.clip(matrix[1:] @ matrix[0], 0.0, 1.0)
    relevance = share if cosine is None else 0.5 * share + 0.5 * cosine
    qtype = question_type(question)
    missing = tuple(missing_names(question, context_text)) if context_text else ()
    return [Relevance(relevance=float(r), kind=has_answer_of_type(s, qtype, question), missing=missing)
            for r, s in zip(relevance, sentences)]
