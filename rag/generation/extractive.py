"""The offline answerer: quotes the context sentences that best answer the question.

No model, no key, no network. The context is split into quotable units (`context_units`: whole
sentences and labelled table rows; code, headings and sentences cut by a chunk's edges are left
out, and so are the copies overlapping chunks make). Each unit is scored against the question:

- key-term overlap: the IDF-weighted share of the question's terms in the unit (a term in the
  document's title, section or file name counts as found in each of its units), and
- when an embedding model is given, the cosine similarity of the unit (prefixed with its document's
  title, when it has one) and the question.

A unit answers only if it shares a key term with the question or is close to it in meaning
(cosine >= `min_similarity`); a question with no key terms of its own ("What happened?") is
answered by the unit closest in meaning. Table rows are quoted only when the question asks for a
value, and then rank above sentences without a number. The best units (at most `max_sentences`,
each within `relative_cutoff` of the best score) are returned in score order, each followed by its
`[n]` source number; "I don't know" only when no unit answers. A comparison ("What is the difference
between X and Y?") quotes one unit about each side, or says which side the context lacks (`comparisons`). Every quoted sentence is verbatim
context (a row adds its column header in brackets), so answers are supported by construction.

Example:
    >>> from langchain_core.documents import Document
    >>> docs = [Document(page_content="The Eiffel Tower is in Paris. It opened in 1889."),
    ...         Document(page_content="Rome has the Colosseum.")]
    >>> str(ExtractiveAnswerer(max_sentences=1).answer("Which city has the Colosseum?", docs))
    'Rome has the Colosseum. [2]'
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.runnables import RunnableConfig

from rag.base.errors import ConfigError
from rag.generation.answer import NO_ANSWER, NOT_SURE, Answer, passage
from rag.generation.answerer import Answerer
from rag.generation.prompts import source_label
from rag.base.text import idf_weights, tokenize
from rag.generation.answer_kinds import kind_scores
from rag.generation.antecedents import named_unit
from rag.generation.comparisons import code_names, compare, comparison_sides, labelled_with
from rag.generation.context_units import Unit, context_units, drop_near_duplicates
from rag.generation.periods import asked_kind
from rag.generation.question_types import (
    asks_for_name,
    has_answer_of_type,
    identifiers_in,
    missing_names,
    question_type,
)
from rag.generation.relevance import context_text
from rag.generation.row_choice import document_words
from rag.generation.value_units import (
    asked_part,
    asks_for_value,
    in_period,
    period_term,
    question_years,
    value_key,
    value_scores,
)
from rag.models.embeddings import scoring_embeddings

__all__ = ["DEFAULT_MIN_CONFIDENCE", "NO_ANSWER", "Decision", "ExtractiveAnswerer", "ScoredSentence", "asks_for_value"]

#: The refusal threshold on `Decision.confidence`, chosen on the git corpus of bench/answers.py (the lowest
#: threshold with under 10% answered-and-wrong there) and checked on the diffutils and FinanceBench corpora.
DEFAULT_MIN_CONFIDENCE = 0.45

# Question words that carry no topic: "What happened?" asks about whatever the context is about.
_GENERIC_TERMS = frozenset(tokenize("happen happened happening tell say said describe explain know new news "
                                    "thing things anything something everything info information detail details "
                                    "summary summarize overview going go update updates much many", stop_words=False))
_NUMBER = re.compile(r"(?<![\w.])\(?-?[$€£]?\d[\d,]*(?:\.\d+)?%?")
_YEAR = re.compile(r"(?:19|20)\d\d")
_DATE = re.compile(r"\b(?:19|20)\d\d\b|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d{1,2}\b|"
                   r"\b(?:yesterday|today|last (?:week|month|year|quarter))\b", re.IGNORECASE)


def _has_value(text: str) -> bool:
    return any(not _YEAR.fullmatch(m.strip("($€£-%),")) for m in _NUMBER.findall(text))


def _document_terms(metadata: Mapping[str, Any]) -> frozenset[str]:
    """Terms of the document a unit comes from: title, section and file name."""
    return _terms_of(str(metadata.get("title") or ""), str(metadata.get("section") or ""),
                     str(metadata.get("source") or ""))


@functools.lru_cache(maxsize=1024)
def _terms_of(title: str, section: str, source: str) -> frozenset[str]:
    parts = [title, section]
    if source:
        path = PurePath(source)
        parts += [path.stem, path.parent.name]
    return frozenset(tokenize(" ".join(parts).replace("_", " ").replace("-", " ")))


class ScoredSentence(tuple):
    """(score, source number, sentence, all source numbers) of one context unit.

    `sources` lists every context document holding the same sentence (cited together as `[2, 4]`).
    """

    __slots__ = ()

    def __new__(cls, score: float, source: int, text: str, sources: tuple[int, ...] = ()) -> ScoredSentence:
        return super().__new__(cls, (score, source, text, sources or (source,)))

    score = property(lambda self: self[0])
    source = property(lambda self: self[1])
    text = property(lambda self: self[2])
    sources = property(lambda self: self[3])


@dataclass(frozen=True)
class Decision:
    """What `ExtractiveAnswerer.decide` chose: the units, the question type, the confidence (the
    chosen unit's key-term share, its document's title counted, and its similarity to the question, about 0..1)
    and whether it refuses, with why."""

    qtype: str
    chosen: tuple[ScoredSentence, ...]
    confidence: float
    refused: bool
    reason: str = ""
    note: str = ""   # said after the cited sentences: a comparison's side the context lacks

    @property
    def parts(self) -> list[str]:
        """The cited sentences of the answer, refusal or not (what it would say)."""
        return [f"{s.text} [{', '.join(map(str, sorted(s.sources)))}]" for s in self.chosen] + [self.note][:bool(self.note)]

    @property
    def text(self) -> str:
        return " ".join(self.parts)


def _title(unit: Unit) -> str:
    return str(unit.metadata.get("title") or "")


class ExtractiveAnswerer(Answerer):
    """Answer with the context sentences that best answer the question, each cited as `[n]`.

    Args:
        embedding: optional embedding model; adds semantic similarity to the key-term score.
            The string "default" uses the library's default model (loaded lazily, on first use).
        max_sentences: at most this many sentences in an answer.
        min_score: sentences scoring below this are never used (questions without key terms
            of their own excepted).
        min_similarity: with an embedding, a sentence without a question term answers when its
            cosine similarity to the question reaches this.
        relative_cutoff: sentences after the first must score at least this share of the best.
        min_confidence: refuse ("I don't know") when the chosen unit's confidence is below this.
        type_weight: the score added to a unit holding the kind of answer the question asks for.
        max_embedded: with an embedding, only this many units (the best by key terms) are scored by
            similarity and may answer; the answerer's time is mostly their embedding.
        label_weight: for a value question, the unit of the table signals (`rag.generation.value_units`):
            the row naming the metric, the year and period kind asked, the total row, a superlative's row.
    """

    name = "ExtractiveAnswerer"

    def __init__(self, *, embedding: Embeddings | str | None = None, max_sentences: int = 2,
                 min_score: float = 0.2, min_similarity: float = 0.5, relative_cutoff: float = 0.8,
                 min_confidence: float = DEFAULT_MIN_CONFIDENCE, type_weight: float = 0.15,
                 max_embedded: int = 16, label_weight: float = 0.3) -> None:
        if max_sentences < 1 or max_embedded < 1:
            raise ConfigError(f"max_sentences and max_embedded must be >= 1, got {max_sentences} and {max_embedded}")
        for label, value in (("min_score", min_score), ("min_similarity", min_similarity),
                             ("relative_cutoff", relative_cutoff), ("min_confidence", min_confidence),
                             ("type_weight", type_weight), ("label_weight", label_weight)):
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{label} must be in [0, 1], got {value}")
        self._embedding_spec = embedding
        self._embedding: Embeddings | None = None
        self.max_sentences = max_sentences
        self.min_score = min_score
        self.min_similarity = min_similarity
        self.relative_cutoff = relative_cutoff
        self.min_confidence = min_confidence
        self.type_weight = type_weight
        self.max_embedded = max_embedded
        self.label_weight = label_weight

    def __repr__(self) -> str:
        return f"ExtractiveAnswerer(max_sentences={self.max_sentences}, min_score={self.min_score})"

    @property
    def embedding(self) -> Embeddings | None:
        if self._embedding is None and self._embedding_spec is not None:
            if isinstance(self._embedding_spec, str):
                self._embedding = scoring_embeddings()  # NumPy MiniLM: no torch for a few sentences
            else:
                self._embedding = self._embedding_spec
        return self._embedding

    # ------------------------------------------------------------------ scoring
    def _similarities(self, question: str, units: Sequence[Unit]) -> np.ndarray | None:
        if self.embedding is None:
            return None
        # A sentence out of its document loses its subject ("License: MIT."); the title restores it.
        texts = [f"{u.metadata['title']}: {u.text}" if u.metadata.get("title") else u.text for u in units]
        vectors = np.asarray(self.embedding.embed_documents(texts), dtype=float)
        query = np.asarray(self.embedding.embed_query(question), dtype=float)
        norms = np.linalg.norm(vectors, axis=1) * (np.linalg.norm(query) or 1.0)
        return vectors @ query / np.where(norms == 0, 1.0, norms)

    def _term_scores(self, key: Sequence[str], units: Sequence[Unit],
                     titles: bool = True) -> tuple[np.ndarray, np.ndarray, dict]:
        """(share of the key terms in each unit, share in the unit or its document's title / section / file,
        the terms of the sentence before it counted half; the key terms' weights). `titles=False`: a
        question asking for a command name does not find its words in a page's name ("shows" is not git-show)."""
        tokens = [{period_term(t) for t in tokenize(f"{u.text} {u.terms}")} for u in units]
        idf = idf_weights(tokens)
        unseen = max(idf.values(), default=1.0)
        weights = {t: idf.get(t, unseen) for t in dict.fromkeys(key)}   # in question order: sums do not depend on the hash seed
        total = sum(weights.values()) or 1.0
        in_unit = np.array([sum(w for t, w in weights.items() if t in toks) / total for toks in tokens])
        doc_terms = [_document_terms(u.metadata if titles else {"section": u.metadata.get("section")})
                     for u in units]   # once per unit, not per key term; "Best Buy" names BESTBUY_2024Q2_10Q
        doc_terms = [terms | document_words(key, terms) for terms in doc_terms]
        in_doc = np.array([sum(w for t, w in weights.items() if t not in toks and t in terms) / total
                           for toks, terms in zip(tokens, doc_terms)])
        # a sentence continues the one before it ("The Colosseum is in Rome. It held 50,000 spectators."):
        # the question's terms there count half (a table row does not continue the row above it)
        before = [tokens[i - 1] if i and units[i - 1].source == u.source and u.kind == units[i - 1].kind == "sentence"
                  else set() for i, u in enumerate(units)]
        in_before = np.array([sum(w for t, w in weights.items() if t not in toks and t in prev) / total
                              for toks, prev in zip(tokens, before)])
        return in_unit, np.minimum(in_unit + in_doc + 0.5 * in_before, 1.0), weights

    def _scored(self, question: str, docs: Sequence[Document]) -> tuple[str, list[ScoredSentence], list[float]]:
        """(question type, the units that answer best first, each one's confidence)."""
        qtype = question_type(question)
        value = (asks_for_value(question) and qtype not in ("reason", "procedure")) or qtype == "number"
        units = drop_near_duplicates([u for u in context_units(docs) if value or u.kind == "sentence"])
        if not units:
            return qtype, [], []
        # a value question: the asking sentence's terms, its period words matched as the period (`value_units`)
        key = [t for t in map(period_term, tokenize(asked_part(question) if value else question)) if t not in
               _GENERIC_TERMS]
        key = value_key(key) if value else key
        table = np.zeros(len(units))   # a value question: the row labelled with its metric, in the year asked
        if key:   # only the best `max_embedded` units by key terms are embedded (the answerer's time is there)
            in_unit, lexical, weights = self._term_scores(key, units, titles=not asks_for_name(question, qtype))
            if value:
                table = self.label_weight * value_scores(weights, key, question, units)
            keep = np.sort(np.argsort(-(lexical + table), kind="stable")[:self.max_embedded])
            units, in_unit, lexical, table = [units[j] for j in keep], in_unit[keep], lexical[keep], table[keep]
        else:
            units = units[:self.max_embedded]
        cosine = self._similarities(question, units)
        if not key:  # nothing to match: the closest in meaning answers (context order without a model)
            score = np.clip(cosine, 0, 1) if cosine is not None else np.full(len(units), 0.5)
            score = score + 0.2 * np.array([bool(_DATE.search(u.text)) for u in units])   # events are dated
            answers, confidence = np.ones(len(units), dtype=bool), np.ones(len(units))
        else:
            semantic = np.zeros(len(units)) if cosine is None else np.clip(cosine, 0, 1)
            score = lexical if cosine is None else 0.5 * lexical + 0.5 * semantic
            confidence = score   # before the kind-of-answer bonus: key terms (the document's title counted) + meaning
            code = code_names(question)   # "-a" has no word to match: the entry labelled with it is about it
            answers = (in_unit > 0) | np.array([bool(code) and labelled_with(u.text, code) for u in units])
            if cosine is not None:
                answers |= cosine >= self.min_similarity
            asked = set(tokenize(question))   # a unit adding nothing to the question only echoes it, and one
            quoted = " ".join(question.lower().split()).rstrip("?.! ")   # quoting the question talks about it
            named = identifiers_in(question)   # an option it names adds to it ("-s, --short" for "the short format")
            answers &= np.array([(len(set(tokenize(u.text)) - asked) >= 1 or bool(identifiers_in(u.text) - named)) and
                                 not (len(quoted) > 12 and quoted in " ".join(u.text.lower().split())) for u in units])
        score = score + self.type_weight * kind_scores(question, qtype, [u.text for u in units],
                                                       [_title(u) for u in units])
        if value:
            score = score + 0.1 * np.array([_has_value(u.text) for u in units]) + table
        order = [j for j in np.argsort(-score, kind="stable") if answers[j]]
        period = (question_years(question), asked_kind(question)) if value else (set(), "")   # a row: one value
        cache: dict = {}   # the units of a chunk, for the sentence a unit refers back to
        return (qtype, [ScoredSentence(float(score[j]), units[j].source, in_period(
            named_unit(units[j], qtype, question, docs, cache), *period)) for j in order],
            [float(confidence[j]) for j in order])

    def rank(self, question: str, docs: Sequence[Document]) -> list[ScoredSentence]:
        """The context units that answer the question, scored, best first."""
        return self._scored(question, docs)[1]

    def decide(self, question: str, docs: Sequence[Document]) -> Decision:
        """What the answer is made of, how confident the answerer is, and whether it refuses (and why)."""
        missing, sides = missing_names(question, context_text(docs)), comparison_sides(question)
        if sides and not [m for m in missing if m not in sides.first and m not in sides.second]:
            found = compare(self, question, sides, docs)   # one unit about each side, or the side missing
            return Decision(question_type(question), found.chosen, found.confidence, not found.chosen, *found[3:])
        qtype, ranked, confidence = self._scored(question, docs)
        if missing:
            return Decision(qtype=qtype, chosen=(), confidence=0.0, refused=True,
                            reason=f"the context never mentions {', '.join(missing)}")
        if qtype == "number" and ranked:   # "How many ...?": the best unit stating a number, when it is near the best
            numbered = [i for i, item in enumerate(ranked) if has_answer_of_type(item.text, qtype, question)]
            if numbered and ranked[numbered[0]].score >= ranked[0].score * self.relative_cutoff:
                ranked, confidence = [ranked[i] for i in numbered], [confidence[i] for i in numbered]
        generic = not [t for t in tokenize(question) if t not in _GENERIC_TERMS]
        if not ranked or (ranked[0].score < self.min_score and not generic):
            return Decision(qtype=qtype, chosen=(), confidence=0.0, refused=True, reason="no unit answers")
        limit = self.max_sentences if qtype in ("open", "procedure") else 1   # one value, not three contradicting ones
        floor = max(ranked[0].score * self.relative_cutoff, 0.0 if generic else self.min_score)
        chosen: dict[str, ScoredSentence] = {}
        for item in ranked:
            if item.text in chosen:  # the same sentence in another document: cite both
                first = chosen[item.text]
                chosen[item.text] = ScoredSentence(first.score, first.source, first.text, (*first.sources, item.source))
            elif item.score >= floor and len(chosen) < limit:
                chosen[item.text] = item
        if qtype == "number" and not has_answer_of_type(ranked[0].text, qtype, question):   # "How many ...?"
            return Decision(qtype=qtype, chosen=tuple(chosen.values()), confidence=0.0, refused=True,
                            reason="no unit states a number")
        best = 1.0 if generic else confidence[0]
        low = best < self.min_confidence
        return Decision(qtype=qtype, chosen=tuple(chosen.values()), confidence=best, refused=low,
                        reason=f"confidence {best:.2f} < {self.min_confidence}" if low else "")

    def select(self, question: str, docs: Sequence[Document]) -> list[ScoredSentence]:
        """The sentences the answer is made of (none when the answerer refuses)."""
        decision = self.decide(question, docs)
        return [] if decision.refused else list(decision.chosen)

    # ------------------------------------------------------------------ Answerer
    def describe(self) -> str:
        return "the offline extractive fallback (quotes the context; no language model)"

    def answer(self, question: str, context: Sequence[Document], config: RunnableConfig | None = None) -> Answer:
        docs = [Document(page_content=context)] if isinstance(context, str) else list(context or [])
        decision = self.decide(str(question), docs)
        if not decision.refused:
            return Answer(decision.text, confidence=decision.confidence, answerer=self.describe())
        if decision.chosen:   # below the threshold: not asserted, the closest passage shown with its source
            best = decision.chosen[0]
            return Answer(NOT_SURE, refused=True, confidence=decision.confidence, answerer=self.describe(),
                          passage=passage(best.source, best.text, source_label(docs[best.source - 1])))
        return Answer(NO_ANSWER, refused=True, confidence=decision.confidence, answerer=self.describe())

    def stream(self, question: str, context: Sequence[Document], config: RunnableConfig | None = None) -> Any:
        """One cited sentence at a time, then the whole draft (its fields)."""
        draft = self.answer(question, context, config)
        parts = [p for p in re.split(r"(?<=\])\s+", draft.text) if p] or [draft.text]
        yield from (part if i == 0 else " " + part for i, part in enumerate(parts))
        yield draft

    async def astream(self, question: str, context: Sequence[Document], config: RunnableConfig | None = None) -> Any:
        import asyncio

        draft = await asyncio.to_thread(self.answer, question, context, config)
        parts = [p for p in re.split(r"(?<=\])\s+", draft.text) if p] or [draft.text]
        for i, part in enumerate(parts):
            yield part if i == 0 else " " + part
        yield draft
