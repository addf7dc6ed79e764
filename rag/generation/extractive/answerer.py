"""`ExtractiveAnswerer`: score the context's units against the question, quote the best, or say it is not sure.

Each unit (`rag.generation.extractive.units`) gets two scores, both about 0..1:

- key terms: the IDF-weighted share of the question's terms found in the unit; a term of its
  document's title, section or file name counts as found (a unit out of its page loses its subject);
- meaning: the cosine similarity of the unit (after its document's title) and the question, with the
  scoring embedding (`rag.models.embeddings.scoring_embeddings`; only the best `max_embedded` units by
  key terms are embedded, where the answerer's time goes).

The score is their mean. A unit is a candidate when it holds a key term itself, or is close in meaning
(cosine >= `min_similarity`). The best candidate's score is the answer's confidence. At or above
`min_confidence` the answer quotes the best units (at most `max_sentences`, each within
`relative_cutoff` of the best), each followed by its `[n]`. Below it the answerer asserts nothing:
`NOT_SURE`, refused, with the best unit shown as the closest passage (`Answer.passage`); with no
candidate, the unit closest by the same score is shown that way ("What happened?" shares no word with
its answer). `NO_ANSWER` only when the context has no quotable unit.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import PurePath
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.runnables import RunnableConfig

from rag.base.answer import NO_ANSWER, NOT_SURE, Answer, passage
from rag.base.errors import ConfigError
from rag.base.text import idf_weights, tokenize
from rag.generation.answerer import Answerer
from rag.generation.extractive.units import Unit, context_units, shown_passage
from rag.generation.prompts import source_label
from rag.models.embeddings import scoring_embeddings

__all__ = ["DEFAULT_MIN_CONFIDENCE", "ExtractiveAnswerer", "Scored"]

#: The refusal threshold on the confidence: the lowest of 0.05 steps with at most 15% of all questions asserted and
#: wrong on sqlite, requests, pytest and Django (docs/generation.md, "The offline fallback", says which were held out).
DEFAULT_MIN_CONFIDENCE = 0.8




class Scored(tuple):
    """(score, unit) of one candidate, best first in `ExtractiveAnswerer.rank`."""

    __slots__ = ()

    def __new__(cls, score: float, unit: Unit) -> Scored:
        return super().__new__(cls, (score, unit))

    score = property(lambda self: self[0])
    unit = property(lambda self: self[1])

    @property
    def quote(self) -> str:
        """The unit's text followed by its citation: "Rome is old. [1, 3]"."""
        return f"{self.unit.text} [{', '.join(map(str, self.unit.sources))}]"


def _document_terms(metadata: Any) -> set[str]:
    source = str(metadata.get("source") or "")
    parts = [str(metadata.get("title") or ""), str(metadata.get("section") or ""), PurePath(source).stem if source else ""]
    return set(tokenize(" ".join(parts).replace("_", " ").replace("-", " ")))


class ExtractiveAnswerer(Answerer):
    """Answer with the context units that best answer the question, each cited as `[n]`; refuse when not sure.

    Args:
        embedding: an embedding model for the meaning score; "default" is the scoring embedding (loaded on
            first use), None scores key terms only.
        max_sentences: at most this many units in an answer.
        min_similarity: a unit without a key term of the question is a candidate when its cosine reaches this.
        relative_cutoff: units after the first must score at least this share of the best.
        min_confidence: below this confidence the answer is "not sure" with the closest passage.
        max_embedded: only this many units (the best by key terms) are embedded and may answer.
        passage_lines: the closest passage shown beside a refusal is the best unit with this many non-blank
            lines of its chunk before and after it.
    """

    name = "extractive"

    def __init__(self, *, embedding: Embeddings | str | None = "default", max_sentences: int = 2,
                 min_similarity: float = 0.5, relative_cutoff: float = 0.9,
                 min_confidence: float = DEFAULT_MIN_CONFIDENCE, max_embedded: int = 16,
                 passage_lines: int = 2) -> None:
        if max_sentences < 1 or max_embedded < 1:
            raise ConfigError(f"max_sentences and max_embedded must be >= 1, got {max_sentences} and {max_embedded}")
        for label, value in (("min_similarity", min_similarity), ("relative_cutoff", relative_cutoff),
                             ("min_confidence", min_confidence)):
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{label} must be in [0, 1], got {value}")
        if isinstance(embedding, str) and embedding != "default":
            raise ConfigError(f"embedding must be an Embeddings model, 'default' or None, got {embedding!r}")
        self._embedding_spec = embedding
        self._embedding: Embeddings | None = None
        self.max_sentences = max_sentences
        self.min_similarity = min_similarity
        self.relative_cutoff = relative_cutoff
        self.min_confidence = min_confidence
        self.max_embedded = max_embedded
        self.passage_lines = passage_lines

    def __repr__(self) -> str:
        return f"ExtractiveAnswerer(max_sentences={self.max_sentences}, min_confidence={self.min_confidence})"

    def describe(self) -> str:
        return "the offline extractive fallback (quotes the context; no language model)"

    @property
    def embedding(self) -> Embeddings | None:
        if self._embedding is None and self._embedding_spec is not None:
            self._embedding = scoring_embeddings() if self._embedding_spec == "default" else self._embedding_spec
        return self._embedding

    # ------------------------------------------------------------------ scoring
    def _cosines(self, question: str, units: Sequence[Unit]) -> np.ndarray | None:
        if self.embedding is None or not units:
            return None
        texts = [f"{u.metadata['title']}: {u.text}" if u.metadata.get("title") else u.text for u in units]
        vectors = np.asarray(self.embedding.embed_documents(texts), dtype=float)
        query = np.asarray(self.embedding.embed_query(question), dtype=float)
        norms = np.linalg.norm(vectors, axis=1) * (np.linalg.norm(query) or 1.0)
        return vectors @ query / np.where(norms == 0, 1.0, norms)

    def rank(self, question: str, docs: Sequence[Document], *, candidates_only: bool = True) -> list[Scored]:
        """The candidate units (every unit with `candidates_only=False`), scored, best first (see the module
        docstring)."""
        units = context_units(docs)
        if not units:
            return []
        key = list(dict.fromkeys(tokenize(question)))
        tokens = [set(tokenize(f"{u.text} {u.terms}")) for u in units]
        if key:
            idf = idf_weights(tokens)
            unseen = max(idf.values(), default=1.0)
            weights = np.array([idf.get(t, unseen) for t in key])
            weights = weights / weights.sum()
            own = np.array([[t in toks for t in key] for toks in tokens], dtype=float)
            found = np.array([[t in toks or t in _document_terms(u.metadata) for t in key]
                              for u, toks in zip(units, tokens)], dtype=float)
            in_unit, lexical = own @ weights, found @ weights
            keep = np.sort(np.argsort(-lexical, kind="stable")[:self.max_embedded])
        else:   # a question without key terms ("What happened?"): meaning alone
            in_unit = lexical = np.zeros(len(units))
            keep = np.arange(min(len(units), self.max_embedded))
        units, in_unit, lexical = [units[j] for j in keep], in_unit[keep], lexical[keep]
        cosine = self._cosines(question, units)
        if cosine is None:
            score, candidate = lexical, in_unit > 0
        else:
            semantic = np.clip(cosine, 0.0, 1.0)
            score = 0.5 * lexical + 0.5 * semantic if key else semantic
            candidate = (in_unit > 0) | (cosine >= self.min_similarity)
        # a unit quoting the question talks about it (a benchmark's row, a FAQ heading): it does not answer it
        asked = " ".join(question.lower().split()).rstrip("?.! ")
        echo = np.array([len(asked) > 12 and asked in " ".join(u.text.lower().split()) for u in units])
        candidate = candidate & ~echo
        order = [j for j in np.argsort(-score, kind="stable") if candidate[j] or not candidates_only]
        return [Scored(float(score[j]), units[j]) for j in order]

    # ------------------------------------------------------------------ Answerer
    def answer(self, question: str, context: Sequence[Document], config: RunnableConfig | None = None) -> Answer:
        docs = [Document(page_content=context)] if isinstance(context, str) else list(context or [])
        ranked = self.rank(str(question), docs)
        closest = ranked or self.rank(str(question), docs, candidates_only=False)   # no candidate: still shown
        if not closest:
            return Answer(NO_ANSWER, refused=True, confidence=0.0, answerer=self.describe())
        best = closest[0]
        if not ranked or best.score < self.min_confidence:   # not asserted: the closest passage, with its source, beside it
            doc = docs[best.unit.source - 1]
            shown = passage(best.unit.source, shown_passage(best.unit, doc.page_content, self.passage_lines),
                            source_label(doc))
            return Answer(NOT_SURE, refused=True, confidence=best.score, passage=shown, answerer=self.describe())
        chosen = [s for s in ranked[:self.max_sentences] if s.score >= best.score * self.relative_cutoff]
        cited = sorted({n for s in chosen for n in s.unit.sources})
        return Answer(" ".join(s.quote for s in chosen), cited=cited, confidence=best.score, answerer=self.describe())

    def stream(self, question: str, context: Sequence[Document], config: RunnableConfig | None = None) -> Iterator[Any]:
        """One cited quote at a time (they join into `answer`'s text), then the whole draft (its fields)."""
        draft = self.answer(question, context, config)
        yield from _pieces(draft)
        yield draft

    async def astream(self, question: str, context: Sequence[Document],
                      config: RunnableConfig | None = None) -> AsyncIterator[Any]:
        draft = await asyncio.to_thread(self.answer, question, context, config)
        for piece in _pieces(draft):
            yield piece
        yield draft


def _pieces(draft: Answer) -> list[str]:
    parts = [p for p in re.split(r"(?<=\])\s+(?=\S)", draft.text) if p] or [draft.text]
    return [part if i == 0 else " " + part for i, part in enumerate(parts)]
