"""`annotate_support`: how well each answer sentence is supported by the retrieved context.

For every answer sentence (citation markers stripped) and every context chunk a support score
in [0, 1] is computed from

- lexical overlap: the IDF-weighted share of the sentence's content words (`rag.base.text`)
  found in the chunk, and
- embedding similarity: the best cosine between the sentence and the chunk's sentences
  (only when an embedding model is used; `"default"` loads the library's model lazily),

combined as `lexical_weight * lexical + (1 - lexical_weight) * max(cosine, 0)`. A sentence found
verbatim in a chunk scores 1.0. The best chunk is reported with its score and a label:
`supported` (score >= `threshold`), `partial` (>= `partial_threshold`), `unsupported`, or
`no_answer` for "I don't know" sentences, which make no claim.

Example:
    >>> from langchain_core.documents import Document
    >>> ctx = [Document(page_content="The Eiffel Tower is in Paris. It opened in 1889.")]
    >>> [(s.chunk, s.score, s.label) for s in annotate_support("It opened in 1889. [1] Cats fly.", ctx,
    ...                                                          embedding=None)]
    [(1, 1.0, 'supported'), (None, 0.0, 'unsupported')]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from pydantic import BaseModel, Field

from rag.base.errors import ConfigError
from rag.base.text import idf_weights, lexical_overlap, split_sentences, tokenize
from rag.checks.relevance import answer_relevance
from rag.checks.sentences import is_abstention, parse_answer
from rag.models.embeddings import scoring_embeddings

__all__ = ["SUPPORT_LABELS", "SentenceSupport", "SupportScorer", "annotate_support", "support_summary"]

SUPPORT_LABELS = ("supported", "partial", "unsupported", "no_answer")
Label = Literal["supported", "partial", "unsupported", "no_answer"]


class SentenceSupport(BaseModel):
    """Support of one answer sentence: best chunk (1-based, None when nothing matches) and scores."""

    sentence: str
    citations: list[int] = Field(default_factory=list)
    chunk: int | None = None
    score: float = 0.0
    lexical: float = 0.0
    semantic: float | None = None
    label: Label = "unsupported"
    quoted: bool = False                 # found verbatim in a chunk (then supported by construction)
    answers: bool | None = None          # answers the question asked (None: not checked, no question)
    relevance: float | None = None       # the relevance score behind `answers`

    @property
    def supported(self) -> bool:
        return self.label == "supported"


def _normalise(text: str) -> str:
    return " ".join(text.split()).lower()


def _resolve_embedding(embedding: Embeddings | str | None) -> Embeddings | None:
    if embedding is None or isinstance(embedding, Embeddings):
        return embedding
    if embedding == "default":   # the answer-time model: NumPy MiniLM for a few sentences, never torch
        return scoring_embeddings()
    raise ConfigError(f"embedding must be an Embeddings object, 'default' or None; got {embedding!r}")


class SupportScorer:
    """Scores sentences against a fixed list of chunks (IDF and chunk embeddings computed once).

    Args:
        chunks: the context texts, in source-number order (`[1]` is `chunks[0]`).
        embedding: an embedding model, `"default"` (lazy) or None for lexical only.
        lexical_weight: weight of lexical overlap when an embedding is used.

    Example:
        >>> SupportScorer(["Rome is in Italy."], embedding=None).score("Rome is in Italy.", 0)
        1.0
    """

    def __init__(self, chunks: Sequence[str], *, embedding: Embeddings | str | None = "default",
                 lexical_weight: float = 0.5, titles: Sequence[str] | None = None) -> None:
        if not 0.0 <= lexical_weight <= 1.0:
            raise ConfigError(f"lexical_weight must be in [0, 1], got {lexical_weight}")
        if not (embedding is None or embedding == "default" or isinstance(embedding, Embeddings)):
            raise ConfigError(f"embedding must be an Embeddings object, 'default' or None; got {embedding!r}")
        self.chunks = [str(c) for c in chunks]
        self.lexical_weight = lexical_weight
        self._embedding_spec = embedding
        self._normalised = [_normalise(c) for c in self.chunks]
        self._titles = [_normalise(t) for t in (titles or [""] * len(self.chunks))]
        # split_sentences rewrites some units (table rows, bullets), so quotes are also matched per unit.
        self._units = [{_normalise(u) for u in split_sentences(c)} for c in self.chunks]
        self._tokens = [tokenize(c) for c in self.chunks]
        self._idf = idf_weights(self._tokens) if self.chunks else {}
        self._sentence_vectors: list[np.ndarray] | None = None
        self._cache: dict[str, list[tuple[float, float, float | None]]] = {}
        self._quoted: dict[str, bool] = {}
        self._queries: dict[str, np.ndarray] = {}

    @property
    def uses_embedding(self) -> bool:
        return self._embedding_spec is not None

    def _vectors(self) -> list[np.ndarray]:
        if self._sentence_vectors is None:
            embedding = _resolve_embedding(self._embedding_spec)
            per_chunk = [split_sentences(c) or [c] for c in self.chunks]
            flat = [s for sentences in per_chunk for s in sentences]
            matrix = _unit(np.asarray(embedding.embed_documents(flat), dtype=float)) if flat else np.zeros((0, 1))
            out, start = [], 0
            for sentences in per_chunk:
                out.append(matrix[start:start + len(sentences)])
                start += len(sentences)
            self._sentence_vectors = out
        return self._sentence_vectors

    def lexical(self, sentence: str, index: int) -> float:
        return lexical_overlap(tokenize(sentence), self._tokens[index], self._idf)

    def warm(self, sentences: Sequence[str]) -> None:
        """Embed the sentences in one batch (later `scores` calls reuse the vectors)."""
        if not self.uses_embedding:
            return
        todo = [s for s in dict.fromkeys(sentences) if s not in self._queries]
        if todo:
            embedding = _resolve_embedding(self._embedding_spec)
            for text, vector in zip(todo, _unit(np.asarray(embedding.embed_documents(todo), dtype=float))):
                self._queries[text] = vector

    def semantic(self, sentence: str) -> np.ndarray:
        """Best cosine between the sentence and each chunk's sentences (one value per chunk)."""
        self.warm([sentence])
        query = self._queries[sentence]
        return np.array([float(np.max(v @ query)) if len(v) else 0.0 for v in self._vectors()])

    def scores(self, sentence: str) -> list[tuple[float, float, float | None]]:
        """(score, lexical, semantic) of the sentence against every chunk."""
        if not self.chunks:
            return []
        if sentence in self._cache:
            return self._cache[sentence]
        needle = _normalise(sentence)
        quotes = [bool(needle) and (needle in self._normalised[i] or needle in self._units[i] or
                                    _labelled_quote(needle, self._normalised[i], self._titles[i]) or
                                    _code_quote(needle, self._normalised[i])) for i in range(len(self.chunks))]
        # a quoted sentence is supported whatever its meaning: only the others cost an embedding
        semantic = self.semantic(sentence) if self.uses_embedding and not any(quotes) else None
        out = []
        self._quoted[sentence] = False
        for i in range(len(self.chunks)):
            lex = self.lexical(sentence, i)
            sem = None if semantic is None else float(np.clip(semantic[i], 0.0, 1.0))
            if quotes[i]:
                score = 1.0                     # quoted verbatim
                self._quoted[sentence] = True
            elif sem is None:
                score = lex
            else:
                score = self.lexical_weight * lex + (1 - self.lexical_weight) * sem
            out.append((round(float(score), 4), round(float(lex), 4), None if sem is None else round(sem, 4)))
        self._cache[sentence] = out
        return out

    def quoted(self, sentence: str) -> bool:
        """Whether the sentence is found verbatim in a chunk."""
        self.scores(sentence)
        return self._quoted.get(sentence, False)

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length embeddings of the texts (cached with the sentences'), one row each."""
        self.warm(texts)
        return np.stack([self._queries[t] for t in texts])

    def score(self, sentence: str, index: int) -> float:
        """Support of the sentence by one chunk (0-based index)."""
        return self.scores(sentence)[index][0]


def _labelled_quote(needle: str, chunk: str, title: str = "") -> bool:
    """A quote with its label ("-n, --new-file: if one file is missing, ...", as the extractive answerer
    quotes a definition list, or "git-stash(1): the command saves ..." naming the chunk's document):
    the sentence is in the chunk, and every label part is in the chunk or starts its document's title."""
    label, sep, quote = needle.partition(": ")
    if not (sep and quote and label) or quote not in chunk:
        return False
    return (bool(title) and title.startswith(label)) or all(part in chunk for part in label.split(", "))


def _code_quote(needle: str, chunk: str) -> bool:
    """A sentence introducing a code block quoted with the block's first line, as the extractive answerer
    quotes it ("... add your models: `register_price(...)`", "the score is `score = ...`"): the sentence and
    each code span are in the chunk."""
    intro, sep, code = needle.partition(" `")
    spans = re.findall(r"`([^`]+)`", sep + code)
    return bool(sep and intro and spans and code.rstrip().endswith("`")) and intro in chunk and \
        all(span in chunk for span in spans)


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def _label(score: float, threshold: float, partial_threshold: float) -> Label:
    if score >= threshold:
        return "supported"
    return "partial" if score >= partial_threshold else "unsupported"


def _texts(context: Sequence[Document | str] | str) -> list[str]:
    if isinstance(context, str):
        return [context]
    return [d.page_content if isinstance(d, Document) else str(d) for d in context]


def annotate_support(answer: str, context: Sequence[Document | str] | str, *,
                     embedding: Embeddings | str | None = "default", threshold: float = 0.6,
                     partial_threshold: float = 0.3, lexical_weight: float = 0.5,
                     scorer: SupportScorer | None = None, question: str | None = None,
                     context_text: str = "") -> list[SentenceSupport]:
    """Per answer sentence: the best-supporting chunk, its support score and a label.

    Args:
        answer: the answer text, possibly with `[n]` markers (they are stripped before scoring).
        context: the chunks, in source-number order.
        embedding: embedding model for semantic similarity; `"default"` (lazy) or None for lexical only.
        threshold: minimum score of a `supported` sentence.
        partial_threshold: minimum score of a `partial` one.
        lexical_weight: weight of lexical overlap in the combined score.
        scorer: a prepared `SupportScorer` over the same context (reused to save work).
        question: the question asked; when given, each claim also gets `answers` and `relevance`
            (`rag.checks.relevance`), a signal separate from support.
        context_text: the context with its titles, where the question's names are looked for.

    Returns:
        One `SentenceSupport` per sentence, in answer order.
    """
    if not 0.0 <= partial_threshold <= threshold <= 1.0:
        raise ConfigError(f"need 0 <= partial_threshold <= threshold <= 1, got {partial_threshold} and {threshold}")
    scorer = scorer or SupportScorer(_texts(context), embedding=embedding, lexical_weight=lexical_weight)
    out: list[SentenceSupport] = []
    sentences = parse_answer(answer or "")
    if scorer.chunks:
        scorer.warm([s.text for s in sentences if not is_abstention(s.text)])
    for sentence in sentences:
        if is_abstention(sentence.text):
            out.append(SentenceSupport(sentence=sentence.text, citations=sentence.citations, label="no_answer"))
            continue
        scores = scorer.scores(sentence.text) if re.search(r"\w", sentence.text) else []
        if not scores or max(s for s, _, _ in scores) <= 0.0:
            out.append(SentenceSupport(sentence=sentence.text, citations=sentence.citations))
            continue
        best = max(range(len(scores)), key=lambda i: (scores[i][0], -i))
        score, lex, sem = scores[best]
        out.append(SentenceSupport(sentence=sentence.text, citations=sentence.citations, chunk=best + 1,
                                   score=score, lexical=lex, semantic=sem, quoted=scorer.quoted(sentence.text),
                                   label=_label(score, threshold, partial_threshold)))
    if question:
        _add_relevance(out, question, scorer, context_text or "\n".join(scorer.chunks))
    return out


def _add_relevance(items: list[SentenceSupport], question: str, scorer: SupportScorer, context_text: str) -> None:
    claims = [i for i, item in enumerate(items) if item.label != "no_answer"]
    found = answer_relevance(question, [items[i].sentence for i in claims], context_text=context_text,
                             vectors=scorer.vectors if scorer.uses_embedding and scorer.chunks else None)
    for i, rel in zip(claims, found):
        items[i] = items[i].model_copy(update={"answers": rel.answers(), "relevance": round(rel.relevance, 4)})


def support_summary(annotations: Sequence[SentenceSupport | dict[str, Any]]) -> dict[str, Any]:
    """Mean support over claim-making sentences and the count per label.

    Example:
        >>> support_summary([SentenceSupport(sentence="a", score=1.0, label="supported"),
        ...                  SentenceSupport(sentence="b", score=0.0)])
        {'score': 0.5, 'sentences': 2, 'supported': 1, 'partial': 0, 'unsupported': 1, 'no_answer': 0}
    """
    items = [a if isinstance(a, SentenceSupport) else SentenceSupport.model_validate(a) for a in annotations]
    claims = [a for a in items if a.label != "no_answer"]
    counts = {label: sum(a.label == label for a in items) for label in SUPPORT_LABELS}
    score = round(sum(a.score for a in claims) / len(claims), 4) if claims else None
    out = {"score": score, "sentences": len(items), **counts}
    if any(a.answers is not None for a in claims):   # checked against the question
        out["answering"] = sum(bool(a.answers) for a in claims)
    return out
