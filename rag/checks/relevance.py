"""Does an answer sentence answer the question? A signal separate from "quoted from the source".

A sentence copied verbatim from the context is supported by construction, whether or not it
answers what was asked. `answer_relevance` scores each answer sentence against the question alone:

- key terms: the share of the question's key terms (stop words and topic-less words such as
  "tell" or "details" left out) the sentence uses;
- meaning: the cosine similarity of the sentence and the question (when an embedding is used);
- names: the question's names (a capitalised word past its first, or a word with a digit, dot or
  underscore: `AcmeDB`, `max_items`, `FY2022`) that the context never mentions.

A sentence `answers` when no name of the question is missing from the context and its relevance
(0.5 key terms + 0.5 meaning; key terms alone without an embedding) reaches `RELEVANCE_THRESHOLD`.

Example:
    >>> [round(r.relevance, 2) for r in answer_relevance("Which city has the Colosseum?",
    ...     ["Rome has the Colosseum.", "Paris has the Louvre."], embedding=None)]
    [0.5, 0.0]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rag.base.text import tokenize

__all__ = ["RELEVANCE_THRESHOLD", "Relevance", "answer_relevance", "context_text", "question_names"]

RELEVANCE_THRESHOLD = 0.45
_GENERIC = frozenset(tokenize("happen happened tell say describe explain know thing things information detail details "
                              "summary overview", stop_words=False))
_NAME = re.compile(r"(?<!^)(?<![.?!]\s)\b[A-Z][\w]*[A-Z0-9_]\w*|\b\w*[\d_]\w*[A-Za-z]\w*\b|\b[a-z]+\.[a-z_]+\b")


def context_text(docs: Sequence[Any]) -> str:
    """Everything the context says, with its documents' titles and file names (where a question's
    names are looked for)."""
    parts = []
    for doc in docs:
        meta = getattr(doc, "metadata", None) or {}
        parts += [getattr(doc, "page_content", str(doc)), str(meta.get("title") or ""), str(meta.get("source") or "")]
    return "\n".join(parts)


def question_names(question: str) -> list[str]:
    """Words of the question that name something (see the module docstring).

    Example:
        >>> question_names("What does max_items set in AcmeDB 2?")
        ['max_items', 'AcmeDB']
    """
    return list(dict.fromkeys(m.group() for m in _NAME.finditer(question.strip())))


@dataclass(frozen=True)
class Relevance:
    """How one sentence relates to the question."""

    relevance: float
    missing: tuple[str, ...]   # names of the question the context never mentions

    def answers(self, threshold: float = RELEVANCE_THRESHOLD) -> bool:
        return not self.missing and self.relevance >= threshold


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
    key = set(tokenize(question)) - _GENERIC
    share = np.array([len(key & set(tokenize(s))) / len(key) if key else 1.0 for s in sentences])
    if vectors is None and embedding is not None:
        def vectors(texts: Sequence[str]) -> np.ndarray:
            matrix = np.asarray(embedding.embed_documents(list(texts)), dtype=float)
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            return matrix / np.where(norms == 0, 1.0, norms)
    relevance = share
    if vectors is not None:
        matrix = vectors([question, *sentences])
        relevance = 0.5 * share + 0.5 * np.clip(matrix[1:] @ matrix[0], 0.0, 1.0)
    lowered = context_text.lower()
    missing = tuple(n for n in question_names(question) if n.lower() not in lowered) if context_text else ()
    return [Relevance(relevance=float(r), missing=missing) for r in relevance]
