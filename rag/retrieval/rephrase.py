"""Query rephrasing: several versions of a question, searched separately and fused (never concatenated).

With a chat model:

- ``"hyde"``: a hypothetical passage that would answer the question (Gao et al., HyDE), searched
  instead of / next to the question;
- ``"multi_query"``: ``n`` differently worded versions of the question.

Offline (no model), general rules only, nothing domain-specific:

- ``"keywords"``: the question without question words and stop words, keeping entity-like spans
  (capitalised words, acronyms, numbers, years) and content words in their original form:
  ``"What was Acme's total revenue in fiscal 2023?" -> "Acme total revenue fiscal 2023"``;
- ``"feedback"``: pseudo-relevance feedback (RM3-style): after a first search, the terms that are
  frequent in the top chunks and rare in the index are appended to the keyword query.

`sub_queries(question)` splits a long question into the parts worth matching on their own (a
question often states a metric, then defines it with the line items to look up);
`EmbeddingReranker(by_sentence=True)` scores a chunk by its best match over them.

`Rephraser.rephrase(question)` returns the question first, then its variants (duplicates
removed). `FusedQueryRetriever` searches every variant with a base retriever (concurrently,
through ``batch``) and merges the lists with RRF, so a chunk found by several variants rises.

Example:
    >>> keyword_query("What was Acme's total revenue in fiscal 2023?")
    'Acme total revenue fiscal 2023'
    >>> Rephraser(modes=["keywords"]).rephrase("How did the gross margin change?")
    ['How did the gross margin change?', 'gross margin change']
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.language_models import BaseLanguageModel
from langchain_core.retrievers import BaseRetriever

from rag.base.errors import ConfigError, removed_names
from rag.base.text import STOP_WORDS, split_sentences, tokenize

__all__ = ["LLM_MODES", "REPHRASE_MODES", "Rephraser", "feedback_terms", "keyword_query", "sub_queries"]

__getattr__ = removed_names(__name__, {"FusedQueryRetriever": (
    "rephrasing is a stage of the retrieval pipeline: RAG(..., retrieval={'rephrase': ['keywords']}) or "
    "rag.retrieve(..., rephrase=['keywords'])")})

REPHRASE_MODES = ("keywords", "feedback", "hyde", "multi_query")
LLM_MODES = ("hyde", "multi_query")   # the modes that need an llm
_QUESTION_WORDS = frozenset("what which who whom whose when where why how much many does did do is are was were "
                            "please tell show give list describe explain according based".split())
_MIN_SUB_QUERY_TOKENS = 3
_WORD = re.compile(r"[^\W_]+(?:[.,'&-][^\W_]+)*", re.UNICODE)

_HYDE_PROMPT = ("Write a short passage, as it would appear in a source document, that answers the question. "
                "Do not say you are unsure.\n\nQuestion: {question}\n\nPassage:")
_MULTI_PROMPT = ("Write {n} different versions of the question below, each on its own line, using other words "
                 "for the same meaning. Output only the questions.\n\nQuestion: {question}")


def sub_queries(question: str, *, min_tokens: int = _MIN_SUB_QUERY_TOKENS) -> list[str]:
    """The question followed by those of its sentences that say enough to search on their own.

    A one-sentence question is returned alone; a sentence counts when it has at least
    `min_tokens` content tokens (`rag.base.text.tokenize`), so "Answer in days." is left out.

    Example:
        >>> sub_queries("What is the FY2019 DPO? DPO is 365 * payables / COGS. Answer in days.")
        ['What is the FY2019 DPO? DPO is 365 * payables / COGS. Answer in days.', 'DPO is 365 * payables / COGS.']
    """
    sentences = split_sentences(question)
    if len(sentences) < 2:
        return [question]
    return [question] + [s for s in sentences if len(tokenize(s)) >= min_tokens]


def keyword_query(question: str) -> str:
    """The question's content words in their original form (see the module docstring)."""
    words = []
    for match in _WORD.finditer(question):
        word = match.group()
        if "'" in word:
            word = word.split("'", 1)[0]
        lower = word.lower()
        if not word or lower in _QUESTION_WORDS or (lower in STOP_WORDS and not word.isupper()):
            continue
        words.append(word)
    return " ".join(dict.fromkeys(words)) or question


def feedback_terms(question: str, docs: Sequence[Document], *, n_terms: int = 5,
                   idf: dict[str, float] | None = None) -> list[str]:
    """Terms frequent in `docs` (the first search's top chunks) that the question lacks, best first.

    Each term is returned in its most common surface form. With `idf` (stem -> weight, e.g. from
    `rag.base.text.idf_weights`) frequency is weighted by rarity; without it, by the number of
    chunks containing the term.
    """
    asked = set(tokenize(question))
    counts: Counter[str] = Counter()
    spans: Counter[str] = Counter()
    surface: dict[str, Counter[str]] = {}
    for doc in docs:
        seen = set()
        for match in _WORD.finditer(doc.page_content):
            word = match.group()
            stems = tokenize(word)
            if len(stems) != 1 or stems[0] in asked or len(word) < 3 or word.replace(",", "").replace(".", "").isdigit():
                continue
            stem = stems[0]
            counts[stem] += 1
            surface.setdefault(stem, Counter())[word.lower() if not word.isupper() else word] += 1
            if stem not in seen:
                seen.add(stem)
                spans[stem] += 1
    scored = {s: counts[s] * (idf.get(s, 1.0) if idf else 1.0) for s in counts if spans[s] >= min(2, len(docs))}
    best = sorted(scored, key=lambda s: -scored[s])[:n_terms]
    return [surface[s].most_common(1)[0][0] for s in best]


def _text(message: Any) -> str:
    return str(getattr(message, "content", message)).strip()


class Rephraser:
    """Produce the question and its rephrasings for search.

    Args:
        modes: any of "keywords", "feedback", "hyde", "multi_query" (the LLM modes need `llm`).
        llm: a LangChain chat/text model for HyDE and multi-query.
        n: number of multi-query variants.
        retriever: the base retriever used for the first search of "feedback".
    """

    def __init__(self, *, modes: Sequence[str] = ("keywords",), llm: BaseLanguageModel | None = None, n: int = 3,
                 retriever: BaseRetriever | None = None, feedback_docs: int = 5, feedback_terms: int = 5) -> None:
        if isinstance(modes, str):
            modes = [modes]
        unknown = [m for m in modes if m not in REPHRASE_MODES]
        if unknown:
            raise ConfigError(f"unknown rephrase mode(s) {unknown}; valid: {', '.join(REPHRASE_MODES)}")
        needs_llm = [m for m in modes if m in LLM_MODES]
        if needs_llm and llm is None:
            raise ConfigError(f"rephrase mode(s) {needs_llm} need an llm; pass llm=... or use the offline modes "
                              "'keywords' / 'feedback'")
        if "feedback" in modes and retriever is None:
            raise ConfigError("rephrase mode 'feedback' needs the retriever used for the first search (retriever=...)")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"n must be a positive integer, got {n!r}")
        self.modes, self.llm, self.n, self.retriever = tuple(modes), llm, n, retriever
        self.feedback_docs, self.n_feedback_terms = feedback_docs, feedback_terms

    def rephrase(self, question: str, *, search_kwargs: dict[str, Any] | None = None) -> list[str]:
        """The question followed by its variants, without duplicates."""
        variants = [question]
        for mode in self.modes:
            if mode == "keywords":
                variants.append(keyword_query(question))
            elif mode == "feedback":
                docs = self.retriever.invoke(question, **{**(search_kwargs or {}), "k": self.feedback_docs})
                terms = feedback_terms(question, docs[: self.feedback_docs], n_terms=self.n_feedback_terms)
                variants.append(" ".join([keyword_query(question), *terms]))
            elif mode == "hyde":
                variants.append(_text(self.llm.invoke(_HYDE_PROMPT.format(question=question))))
            else:
                lines = _text(self.llm.invoke(_MULTI_PROMPT.format(question=question, n=self.n))).splitlines()
                cleaned = [re.sub(r"^\s*(?:\d+[.)]|[-*•])\s*", "", line).strip() for line in lines]
                variants.extend([c for c in cleaned if c][: self.n])
        return [v for v in dict.fromkeys(v.strip() for v in variants) if v]
