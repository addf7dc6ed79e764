"""The offline answerer: picks the context sentences that best answer the question.

No model, no key, no network: each context sentence is scored by IDF-weighted lexical
overlap with the question and, when an embedding model is given, cosine similarity; the best
few are returned in score order, each followed by its `[n]` source number. Every sentence it
returns is verbatim context, so its answers are supported by construction.

Example:
    >>> from langchain_core.documents import Document
    >>> docs = [Document(page_content="The Eiffel Tower is in Paris. It opened in 1889."),
    ...         Document(page_content="Rome has the Colosseum.")]
    >>> ExtractiveAnswerer(max_sentences=1).invoke({"question": "Which city has the Colosseum?",
    ...                                              "context": docs})
    'Rome has the Colosseum. [2]'
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import ensure_config, get_callback_manager_for_config

from rag.core.errors import InputError
from rag.core.text import idf_weights, lexical_overlap, split_sentences, tokenize

__all__ = ["NO_ANSWER", "ExtractiveAnswerer", "ScoredSentence"]

_MAX_WORDS = 80  # longer "sentences" are tables or run-on PDF text, not answers
NO_ANSWER = "I don't know: the retrieved context does not answer this question."


class ScoredSentence(tuple):
    """(score, source number, sentence) of one context sentence."""

    __slots__ = ()

    def __new__(cls, score: float, source: int, text: str) -> ScoredSentence:
        return super().__new__(cls, (score, source, text))

    score = property(lambda self: self[0])
    source = property(lambda self: self[1])
    text = property(lambda self: self[2])


class ExtractiveAnswerer(Runnable[dict, str]):
    """Answer with the best-matching context sentences, each cited as `[n]`.

    Args:
        embedding: optional embedding model; adds semantic similarity to the lexical score.
            The string "default" uses the library's default model (loaded lazily).
        max_sentences: at most this many sentences in an answer.
        min_score: sentences scoring below this are never used.
    """

    name = "ExtractiveAnswerer"

    def __init__(self, *, embedding: Embeddings | str | None = None, max_sentences: int = 3,
                 min_score: float = 0.2) -> None:
        if max_sentences < 1:
            raise ValueError(f"max_sentences must be >= 1, got {max_sentences}")
        if not 0.0 <= min_score <= 1.0:
            raise ValueError(f"min_score must be in [0, 1], got {min_score}")
        self._embedding_spec = embedding
        self._embedding: Embeddings | None = None
        self.max_sentences = max_sentences
        self.min_score = min_score

    def __repr__(self) -> str:
        return f"ExtractiveAnswerer(max_sentences={self.max_sentences}, min_score={self.min_score})"

    @property
    def embedding(self) -> Embeddings | None:
        if self._embedding is None and self._embedding_spec is not None:
            if isinstance(self._embedding_spec, str):
                from rag.models.embeddings import scoring_embeddings

                self._embedding = scoring_embeddings()  # NumPy MiniLM: no torch for a few sentences
            else:
                self._embedding = self._embedding_spec
        return self._embedding

    # ------------------------------------------------------------------ scoring
    def rank(self, question: str, docs: Sequence[Document]) -> list[ScoredSentence]:
        """All context sentences scored against the question, best first."""
        candidates = [(i, s) for i, doc in enumerate(docs, start=1)
                      for s in split_sentences(doc.page_content) if 3 <= len(s.split()) <= _MAX_WORDS]
        if not candidates:
            return []
        q_tokens = tokenize(question)
        s_tokens = [tokenize(s) for _, s in candidates]
        idf = idf_weights(s_tokens)
        lexical = np.array([lexical_overlap(q_tokens, toks, idf) for toks in s_tokens])
        score = lexical
        if self.embedding is not None:
            vectors = np.asarray(self.embedding.embed_documents([s for _, s in candidates]), dtype=float)
            query = np.asarray(self.embedding.embed_query(question), dtype=float)
            norms = np.linalg.norm(vectors, axis=1) * (np.linalg.norm(query) or 1.0)
            cosine = vectors @ query / np.where(norms == 0, 1.0, norms)
            # Lexical overlap is required: similar-sounding sentences without a shared term are not answers.
            score = np.where(lexical > 0, 0.5 * lexical + 0.5 * np.clip(cosine, 0, 1), 0.0)
        order = np.argsort(-score, kind="stable")
        return [ScoredSentence(float(score[j]), candidates[j][0], candidates[j][1]) for j in order]

    def select(self, question: str, docs: Sequence[Document]) -> list[ScoredSentence]:
        """The sentences the answer is made of (at most `max_sentences`, no repeats)."""
        chosen: list[ScoredSentence] = []
        seen: set[str] = set()
        for item in self.rank(question, docs):
            if item.score < self.min_score or len(chosen) >= self.max_sentences:
                break
            if item.text not in seen:
                seen.add(item.text)
                chosen.append(item)
        return chosen

    # ------------------------------------------------------------------ Runnable
    def _parts(self, input: Mapping[str, Any]) -> list[str]:
        if not isinstance(input, Mapping) or "question" not in input:
            raise InputError("ExtractiveAnswerer takes a dict with 'question' and 'context' (a list of Documents)")
        docs = input.get("context") or []
        if isinstance(docs, str):
            docs = [Document(page_content=docs)]
        chosen = self.select(str(input["question"]), docs)
        if not chosen:
            return [NO_ANSWER]
        return [f"{s.text} [{s.source}]" for s in chosen]

    def invoke(self, input: dict, config: RunnableConfig | None = None, **kwargs: Any) -> str:
        return self._call_with_config(lambda x: " ".join(self._parts(x)), input, config, run_type="llm")

    def stream(self, input: dict, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[str]:
        config = ensure_config(config)
        run = get_callback_manager_for_config(config).on_chain_start(None, input, name=self.get_name())
        try:
            parts = self._parts(input)
        except Exception as exc:
            run.on_chain_error(exc)
            raise
        for i, part in enumerate(parts):
            yield part if i == 0 else " " + part
        run.on_chain_end(" ".join(parts))

    def transform(self, input: Iterator[dict], config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[str]:
        final: dict = {}
        for chunk in input:
            final = {**final, **chunk} if isinstance(chunk, Mapping) else chunk
        yield from self.stream(final, config, **kwargs)
