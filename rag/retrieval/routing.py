"""Document routing for shared stores: which documents is a question about?

In a store holding many documents (filings of many companies and years, tenants, manuals), chunk
search alone often lands in the wrong document. `DocumentRouter` scores every document against
the question from what identifies it: its card, the text of metadata fields such as title,
company, period, doc_name (and a summary when indexing produced one). The general signals:

- lexical: IDF-weighted overlap of the question's tokens with the card's tokens, where IDF is
  computed over the cards, so words every card shares ("annual", "report") count for little and
  names count for a lot (normalised by the best document);
- organisation aliases: an acronym-like word of the question (two capitals or more) matches a card
  token it begins ("JPM" -> "jpmorgan") or the initials of a card field's leading words ("JnJ",
  "J&J" -> "Johnson & Johnson");
- names written in words: two or three adjacent words written as names are also read joined, when
  a card holds the joined word ("Best Buy" -> ``BESTBUY_2019_10K``; `rag.retrieval.naming.compound_names`);
- periods: years in the question (``2022``, ``FY2022``, ``FY22``, ``Q2 2023``) against the years in
  the card. The latest year named counts (a report covers the years before it): a card with that
  year adds ``year_weight``, a card with another named year (or the year after) a third of it, a card
  whose years all differ loses half of it; a question naming no year slightly prefers recent cards;
- quarters: ``Q1``..``Q4``, ``2023Q2``, "second quarter" in the question against the card's quarters: a
  match adds ``quarter_weight``, another quarter loses half of it; a question naming no quarter
  slightly prefers full-period cards (no quarter);
- semantic: cosine similarity of the question and the card under the embedding model (optional).

``route(question)`` returns the documents whose score is within ``ratio`` of the best (at most
``top_n``), or nothing when no distinctive name matched, since a year alone fits too many
documents (then do not filter).
The retrieval pipeline's routing stage (`rag.compose.pipeline.search_branch`) applies the route as a
portable ``$in`` filter on the key before chunk search (no filter when routing is not confident);
`boost` re-scores candidates.

Example:
    >>> from langchain_core.documents import Document
    >>> docs = [Document(page_content="...", metadata={"doc_name": n, "title": t}) for n, t in
    ...         [("A22", "Acme annual report 2022"), ("A23", "Acme annual report 2023"), ("G23", "Globex report 2023")]]
    >>> router = DocumentRouter.from_documents(docs, key="doc_name", fields=["title"])
    >>> router.route("What was Acme's revenue in FY2023?").values
    ['A23']
    >>> router.to_filter("Globex margin")
    {'doc_name': {'$in': ['G23']}}
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from rag.base.errors import ConfigError, removed_names
from rag.base.text import idf_weights, tokenize
from rag.retrieval.naming import (
    WORD,
    alias_words,
    aliases,
    compound_names,
    initials_of,
    name_tokens,
    period_tokens,
    quarters_in,
    years_in,
)

__all__ = ["DEFAULT_ROUTING_FIELDS", "DocumentRouter", "Route", "compound_names", "name_tokens", "quarters_in",
           "years_in"]

__getattr__ = removed_names(__name__, {"RoutedRetriever": (
    "routing is a stage of the retrieval pipeline: give the resource a router (Resource(..., "
    "router=DocumentRouter(...)); KnowledgeBase.as_resource() has one) or the pipeline one (RAG(..., "
    "retrieval={'router': router}), rag.retrieve(..., router=router))")})

DEFAULT_ROUTING_FIELDS = ("title", "doc_name", "company", "period", "doc_period", "year", "source", "summary",
                          "doc_summary")
_RECENCY = 0.05     # share of year_weight that orders cards by recency when the question names no year
# a word the question writes as a name names documents only when they hold this share of the chunks using it: "LaTeX"
# in Docutils' documentation is in the LaTeX writer's pages and, a third of the time, in the configuration reference
NAME_SHARE = 0.8


@dataclass
class Route:
    """The routing decision: chosen key values (best first) and every document's score."""

    values: list[Any]
    scores: dict[Any, float] = field(default_factory=dict)
    confident: bool = True

    def within(self, allowed: Iterable[Any]) -> Route:
        """This route told only about the documents in `allowed` (the key values a filtered search returned).

        The router scores every card of the store; a filtered (tenant) request must not learn the
        names of documents its filter excludes, so what is reported is cut to the documents the
        search itself could return.

        Example:
            >>> Route(values=["a", "b"], scores={"a": 2.0, "b": 1.0, "c": 0.5}).within({"a", "c"}).values
            ['a']
        """
        keep = {_key(v) for v in allowed}
        return Route(values=[v for v in self.values if _key(v) in keep],
                     scores={v: s for v, s in self.scores.items() if _key(v) in keep}, confident=self.confident)


def _key(value: Any) -> Any:
    return value if isinstance(value, Hashable) else str(value)


class DocumentRouter:
    """Score documents (one card per key value) against a question; see the module docstring.

    Args:
        cards: key value -> the card text identifying that document.
        key: the metadata key that names a document (``doc_name``, ``doc_id``, ``tenant``...).
        embedding: optional model for the semantic signal.
        top_n: at most this many documents per route.
        ratio: keep documents scoring at least ``ratio * best``.
        weights: ``{"lexical": 1.0, "year": 0.5, "quarter": 0.3, "semantic": 0.5}`` by default.
        names_only: route only when a word the question writes as a name (`name_tokens`: capitalised,
            an acronym, letters with digits) matches a distinctive card token; an ordinary word
            shared by the question and a card ("server", "index") then never restricts the search.
            What a knowledge base's router does: its cards (title, file name, summary) are made
            of ordinary words, unlike a filing's company and period. Only documents a name matched
            are routed to, and the question's other words only order them (they weigh a tenth).
        mentions: with `names_only`, a word of the question -> how many chunks of each document
            (key value) use it (a knowledge base's router counts them in its BM25 index). A word
            written as a name is a name only when the documents it names hold at least half of
            those chunks; otherwise the corpus uses it everywhere ("URL" in a documentation set)
            and it routes nothing. None: every name counts.
    """

    def __init__(self, cards: dict[Any, str], *, key: str = "doc_name", embedding: Embeddings | None = None,
                 top_n: int = 5, ratio: float = 0.85, weights: dict[str, float] | None = None,
                 names_only: bool = False, mentions: Callable[[str], Mapping[Any, int]] | None = None) -> None:
        if not cards:
            raise ConfigError("a DocumentRouter needs at least one document card")
        unknown = sorted(set(weights or {}) - {"lexical", "year", "quarter", "semantic"})
        if unknown:
            raise ConfigError(f"unknown routing weight(s) {unknown}; valid: lexical, year, quarter, semantic")
        if not 0 < ratio <= 1:
            raise ConfigError(f"ratio must be in (0, 1], got {ratio!r}")
        self.key, self.embedding, self.top_n, self.ratio = key, embedding, top_n, ratio
        self.names_only, self.mentions = names_only, mentions
        self.weights = {"lexical": 1.0, "year": 0.5, "quarter": 0.3, "semantic": 0.5, **(weights or {})}
        self.values = list(cards)
        self.cards = [cards[v] for v in self.values]
        self._tokens = [set(tokenize(c.replace("_", " "))) for c in self.cards]
        self._idf = idf_weights(self._tokens)
        df: dict[str, int] = {}
        for toks in self._tokens:
            for t in toks:
                df[t] = df.get(t, 0) + 1
        # a token shared by every card, or by more than half of many cards, does not tell documents apart
        n = len(self.cards)
        self._distinctive = {t for t, c in df.items() if (c < n or n == 1) and c <= max(2, n // 2)}
        self._years = [years_in(c) for c in self.cards]
        self._quarters = [quarters_in(c) for c in self.cards]
        self._initial_words = [self._leading_words(c) for c in self.cards]
        # each card field's distinctive tokens: a question holding all of one names that document
        self._parts = [[set(tokenize(p.replace("_", " "))) & self._distinctive for p in c.split("|")]
                       for c in self.cards]
        self._vectors: np.ndarray | None = None

    @classmethod
    def from_documents(cls, documents: Sequence[Document], *, key: str = "doc_name",
                       fields: Sequence[str] = DEFAULT_ROUTING_FIELDS, **settings: Any) -> DocumentRouter:
        """Build cards from the metadata of chunks (the first chunk of each key value that has the fields)."""
        cards: dict[Any, list[str]] = {}
        for doc in documents:
            value = doc.metadata.get(key)
            if value is None:
                continue
            parts = cards.setdefault(value, [])
            for f in fields:
                text = doc.metadata.get(f)
                if text is not None and str(text) not in parts:
                    parts.append(str(text))
        if not cards:
            raise ConfigError(f"no document has the routing key {key!r} in its metadata")
        return cls({v: " | ".join(p) for v, p in cards.items()}, key=key, **settings)

    def _leading_words(self, card: str) -> dict[str, set[str]]:
        """Initials of each card field's leading words -> the distinctive tokens they stand for.

        Only distinctive words count, so "annual report" never reads as "ar".
        """
        out: dict[str, set[str]] = {}
        for part in card.replace("_", " ").split("|"):
            words = []
            for word in WORD.findall(part):
                if word == "&":
                    continue
                if not word.isalpha():
                    break
                words.append(word)
                toks = set(tokenize(" ".join(words))) & self._distinctive
                if len(words) >= 2 and toks:
                    out.setdefault("".join(w[0].lower() for w in words), set()).update(toks)
        return out

    def _semantic(self, question: str) -> np.ndarray:
        if self.embedding is None or not self.weights["semantic"]:
            return np.zeros(len(self.values))
        if self._vectors is None:
            m = np.asarray(self.embedding.embed_documents(self.cards), dtype=np.float32)
            self._vectors = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
        q = np.asarray(self.embedding.embed_query(question), dtype=np.float32)
        return self._vectors @ (q / max(float(np.linalg.norm(q)), 1e-12))

    def scores(self, question: str) -> tuple[np.ndarray, bool]:
        """Every document's score, and whether a distinctive name matched at all.

        An acronym-like word of the question (two capitals or more: "JPM", "JnJ") also matches a
        longer card token it begins ("jpmorgan") or the initials of a card field's leading words
        ("Johnson & Johnson"), at 80% of those tokens' weight. A period alone never makes the route
        confident: many documents share a period. With `names_only`, only the question's names
        (`names`) score; its other words weigh a tenth, to order documents a name matched.
        """
        total, _named_hit, matched, _names = self._scored(question)
        return total, matched

    def names(self, question: str) -> set[str]:
        """The question's tokens that name documents here: with `names_only` the words it writes as names
        (`name_tokens`) that are names in this corpus, not words its text uses everywhere (`mentions`: a
        name's documents hold at least `NAME_SHARE` (80%) of the chunks that use the word; "URL", "HTTP", "ID" in
        most documentation sets are common words); else every token.
        """
        if not self.names_only:
            return set(tokenize(question)) | set(self._compounds(question))
        compounds = self._compounds(question)
        named = name_tokens(question) | set(compounds)
        if self.mentions is None or not named:
            return named
        prefixes, initials = aliases(question)
        keep = set()
        for word in {w for w in WORD.findall(question) if set(tokenize(w)) & named} | set(compounds.values()):
            tokens = set(tokenize(word))
            hits = {self.values[i] for i, toks in enumerate(self._tokens) if tokens & toks & self._distinctive}
            low = word.lower()
            hits |= {self.values[i] for i, toks in enumerate(self._tokens) if low in prefixes and
                     any(t.startswith(low) for t in toks & self._distinctive)}
            hits |= {self.values[i] for i, w in enumerate(self._initial_words)
                     if (low in initials and low in w) or (initials_of(word) in initials and initials_of(word) in w)}
            if not hits:   # it names no document: nothing to check (and no index lookup)
                keep |= tokens & named
                continue
            counts = self.mentions(word)
            used = sum(counts.values())
            if not used or sum(counts.get(v, 0) for v in hits) >= NAME_SHARE * used:
                keep |= tokens & named
        return keep

    def _compounds(self, question: str) -> dict[str, str]:
        """`compound_names` of the question that are distinctive tokens of a card."""
        return {t: w for t, w in compound_names(question).items() if t in self._distinctive}

    def _scored(self, question: str) -> tuple[np.ndarray, np.ndarray, bool, np.ndarray]:
        """(every document's score, whether a name matched it, whether any did, and what decides a names-only route:
        the weight of the names each document matched (aliases at 80%), normalised by the best, with the period
        signals; the question's other words only order such a route)."""
        q_tokens = set(tokenize(question)) | set(self._compounds(question))
        named = self.names(question)
        prefixes, initials = aliases(question)
        if self.names_only:   # an acronym the corpus uses everywhere is no alias either
            prefixes, initials = aliases(question, [w for w in alias_words(question)
                                                     if set(tokenize(w)) & named or w.lower() in named])
        lexical = np.zeros(len(self.values))
        name_weight = np.zeros(len(self.values))
        hit = np.zeros(len(self.values), dtype=bool)
        for i, toks in enumerate(self._tokens):
            exact = (q_tokens & toks) - period_tokens(q_tokens)  # periods are scored by the period signals
            names = exact & named & self._distinctive
            partial = {c for c in toks - names if c in self._distinctive and any(c.startswith(p) for p in prefixes)}
            for alias in initials:
                partial |= self._initial_words[i].get(alias, set()) - names
            name_weight[i] = sum(self._idf[t] for t in names) + 0.8 * sum(self._idf[t] for t in partial)
            partial -= exact
            hit[i] = bool(((exact & named) | partial) & self._distinctive)   # aliases are names
            other = 0.1 if self.names_only else 1.0   # names_only: the names decide, other words order
            lexical[i] = (sum(self._idf[t] * (1.0 if t in named else other) for t in exact)
                          + 0.8 * sum(self._idf[t] for t in partial))
            if self.names_only and hit[i]:   # "Merge" names git-merge better than git-merge-base
                own = toks & self._distinctive
                lexical[i] += 0.1 * sum(self._idf[t] for t in own & named) / sum(self._idf[t] for t in own)
        if lexical.max() > 0:
            lexical = lexical / lexical.max()
        name_weight = np.where(hit, name_weight, 0.0)
        if name_weight.max() > 0:
            name_weight = name_weight / name_weight.max()
        periods = (self.weights["year"] * self._year_signal(question)
                   + self.weights["quarter"] * self._quarter_signal(question))
        total = self.weights["lexical"] * lexical + periods
        return (total + self.weights["semantic"] * self._semantic(question), hit, bool(hit.any()),
                self.weights["lexical"] * name_weight + periods)

    def _year_signal(self, question: str) -> np.ndarray:
        q_years = years_in(question)
        year = np.zeros(len(self.values))
        if not q_years:
            # no year named: the most recent documents are the likeliest subject, by a small margin
            latest = [max(ys) for ys in self._years if ys]
            if latest and max(latest) > min(latest):
                lo, hi = min(latest), max(latest)
                for i, ys in enumerate(self._years):
                    year[i] = _RECENCY * (max(ys) - lo) / (hi - lo) if ys else 0.0
            return year
        # a report covers the years before it, so the latest year named decides
        last = max(q_years)
        for i, ys in enumerate(self._years):
            if last in ys:
                year[i] = 1.0
            elif ys & q_years or last + 1 in ys:
                year[i] = 1 / 3
            elif ys:
                year[i] = -0.5
        return year

    def _quarter_signal(self, question: str) -> np.ndarray:
        q_quarters = quarters_in(question)
        quarter = np.zeros(len(self.values))
        for i, qs in enumerate(self._quarters):
            if q_quarters:
                quarter[i] = 1.0 if qs & q_quarters else -0.5 if qs else 0.0
            elif qs:
                quarter[i] = -0.2   # no quarter named: a full-period document fits better
        return quarter

    def route(self, question: str) -> Route:
        """The documents the question is about (empty and not confident when nothing matched).

        With `names_only`, only documents a name of the question matched are routed to (the best,
        as without it), and with them every document one of whose card fields (title, file name) the
        question spells out in full in any case, so the document a question is about stays in the
        route when another word of it names other documents.
        """
        total, hit, matched, core = self._scored(question)
        order = np.argsort(-total, kind="stable")
        scores = {self.values[i]: float(total[i]) for i in order}
        if not matched:
            return Route(values=[], scores=scores, confident=False)
        named = [i for i in order if hit[i]] if self.names_only else list(order)
        best = total[named[0]]
        chosen = [self.values[i] for i in named[: self.top_n] if total[i] >= self.ratio * best - 1e-9]
        if self.names_only:
            # every document the names match as well as the best one's stays in (other words only order: "Jinja"
            # names all ten Jinja pages, not the two whose titles also say "template")
            top = max(core[i] for i in named)
            chosen += [self.values[i] for i in named if self.values[i] not in chosen and core[i] >= top - 1e-9]
            # and a page the question names in lower case ("git fetch ... over HTTP")
            words = set(tokenize(question))
            chosen += [self.values[i] for i in order if self.values[i] not in chosen
                       and any(part and part <= words for part in self._parts[i])]
        return Route(values=chosen, scores=scores)

    def to_filter(self, question: str) -> dict[str, Any] | None:
        """A portable filter selecting the routed documents, or None when routing is not confident."""
        route = self.route(question)
        return {self.key: {"$in": route.values}} if route.values else None

    def boost(self, question: str, scored: Sequence[tuple[Document, float]], *,
              weight: float = 0.5) -> list[tuple[Document, float]]:
        """Add ``weight * normalised document score`` to each candidate's score and re-sort."""
        total, _ = self.scores(question)
        lo, hi = float(total.min()), float(total.max())
        norm = {v: (float(s) - lo) / (hi - lo) if hi > lo else 0.0 for v, s in zip(self.values, total, strict=True)}
        out = [(doc, score + weight * norm.get(doc.metadata.get(self.key), 0.0)) for doc, score in scored]
        return sorted(out, key=lambda pair: -pair[1])
