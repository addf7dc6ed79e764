"""Named sections: when a question names a part of a document, put that part in the context.

Questions often say where the answer is: "based on the balance sheet", "from the statement of
income and the cash flow statement", "in the methods section", "see the acquisitions note". Dense
and lexical search rank chunks by what they say, and the chunk that opens such a section is often
a table whose numbers say little to an embedding model, so it ranks far down. `SectionRouter`
matches the question against the document's own headings and promotes the chunk that opens each
named section into the context, next to the best search results.

Headings come from the chunks themselves: the chunk's ``section`` metadata (as set by
`rag.indexing.chunking.TokenChunker` for markdown, or by any loader) and every line of its text
that reads like a heading (`rag.indexing.headings.is_heading_line`), for the documents whose chunks
carry no such metadata. Running page headers are left out, and so is a line found in more than 2%
of a document's chunks (and more than 3): a repeated column header is not a section. A section
opens at the first chunk (in document order) that carries its heading; a heading of numbers only
names nothing.

How a heading is matched (general rules; no list of domain terms):

- terms are the `rag.base.text.tokenize` tokens (lowercase, stop words out, Snowball stems) cut to
  their first ``prefix`` characters (5 by default), so "acquired" and "Acquisitions" meet, as do
  "statement" and "Statements"; a heading's numbering label ("Note 7.", "Item 1A.", "B.") is left out;
- a heading of one term is named when the question has that term; a longer heading only through
  its adjacent term pairs that the question also has side by side (either order): "balance sheet"
  names "Consolidated Balance Sheets", a question that merely uses "balance" and "sheet" apart
  does not;
- each term weighs its IDF among the document's chunks, so words every chunk shares (the company
  name, "year", "million") count for little;
- score = covered weight x covered share of the heading's weight: a specific phrase that is most
  of the heading scores high. A heading is named at ``min_score`` (2.0) or more; the ``top_n`` (2)
  best named sections of the searched documents are promoted. IDF grows with the document's
  length (a term in one chunk of 3 weighs 0.98, of 300 weighs 5.3), so in documents of a few
  chunks, which fit in a context anyway, little is named.

`promote` inserts each named section's opening chunk after the first ``at`` results (3), unless it
is already among them; everything else keeps its order. Defaults were chosen on the FinanceBench
development set (docs/benchmarks.md); they are settings.

Example:
    >>> from langchain_core.documents import Document
    >>> chunks = [Document(page_content=t, metadata={"doc_id": "r", "chunk_index": i}) for i, t in enumerate([
    ...     "Results of Operations\\nSales grew 4% on higher prices.",
    ...     "Liquidity\\nCash was $3.6 billion at year end.",
    ...     "Consolidated Balance Sheets\\nCash 3,655 4,564\\nInventories 4,532 4,660"])]
    >>> router = SectionRouter(chunks, min_score=1.0)      # IDF among 3 chunks is small; see min_score
    >>> [s.heading for s in router.named("What were inventories? Use the balance sheet.")]
    ['Consolidated Balance Sheets']
"""

from __future__ import annotations

import re
import threading
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from langchain_core.documents import Document

from rag.base.errors import ConfigError, removed_names
from rag.base.filters import matches, validate_filter
from rag.base.text import idf_weights, tokenize
from rag.indexing.headings import is_heading_line, running_headers
from rag.retrieval.fusion import doc_key

__all__ = ["NamedSection", "SectionRouter", "heading_name", "heading_terms"]

__getattr__ = removed_names(__name__, {"SectionRetriever": (
    "named sections are a stage of the retrieval pipeline: Resource(..., sections=SectionRouter(chunks)),"
    " KnowledgeBase.as_resource(sections={}), or RAG(..., retrieval={'sections': router})")})

_MIN_REPEATS, _REPEAT_SHARE = 3, 0.02       # detected headings in more chunks than this are not sections
_LABEL = re.compile(r"^\s*(?:(?:item|part|note|section|schedule|exhibit|chapter|article)\s+[\dIVXivx]+[A-Za-z]?[.:)]?"
                    r"|(?:\d{1,3}|[A-Za-z])[.)])\s+(?=\S)", re.IGNORECASE)

Scored = list[tuple[Document, float]]


def heading_terms(text: str, *, prefix: int = 5) -> list[str]:
    """The matching terms of `text`: stemmed tokens without stop words, cut to `prefix` characters.

    Example:
        >>> heading_terms("Acquisitions"), heading_terms("companies acquired")
        (['acqui'], ['compa', 'acqui'])
    """
    return [t[:prefix] if prefix and not t[0].isdigit() else t for t in tokenize(text)]


def heading_name(heading: str) -> str:
    """The heading without its numbering label ("Note 7.", "Item 1A.", "B.", "3)"), which no question repeats.

    Example:
        >>> heading_name("Note 7. Acquisitions"), heading_name("Item 1A. Risk Factors"), heading_name("B. Leases")
        ('Acquisitions', 'Risk Factors', 'Leases')
    """
    return _LABEL.sub("", heading, count=1) or heading


@dataclass(frozen=True)
class NamedSection:
    """A section the question names: its heading, document, score and opening chunk.

    A name can head several places of a document ("Acquisitions" in the MD&A and in the notes):
    `occurrences` lists each place's heading and chunks (document order); `heading` and `chunk`
    are the first place's. `SectionRouter.promote` promotes the place search ranks best.
    """

    heading: str
    document: Hashable
    score: float
    chunk: Document
    occurrences: tuple[tuple[str, tuple[Document, ...]], ...] = ()


@dataclass
class _Document:
    chunks: list[Document]
    headings: dict[str, list[int]]           # heading -> indices of the chunks carrying it, in order
    names: dict[tuple[str, ...], list[str]]  # matching terms of a heading's name -> the headings with it
    idf: dict[str, float] | None = None      # term -> IDF among the document's chunks (computed on first use)
    unseen: float = 1.0                      # the weight of a heading term no chunk text has (the highest IDF)


class SectionRouter:
    """Finds the sections of the searched documents that a question names (see the module docstring).

    Args:
        chunks: every chunk of the documents, with `key` in their metadata (one document when
            absent) and, ideally, `chunk_index` (document order; else the given order).
        key: the metadata field naming a chunk's document ("doc_id"; "doc_name" for FinanceBench).
        field: the metadata field holding a chunk's section heading(s), " / "-separated; None to
            use only the heading lines found in the text.
        min_score: the score a heading needs to be named.
        top_n: how many named sections (the best over all searched documents) are promoted.
        prefix: characters a term is cut to (0 = whole stems).
        detect: take heading lines from the chunk text too: "auto" (default) for the documents
            whose chunks carry no `field` metadata, True for all, False for none.
        at: how many results stay ahead of the promoted chunks (`promote`'s default).

    Raises:
        ConfigError: a negative min_score, a top_n below 1 or a negative prefix.
    """

    def __init__(self, chunks: Iterable[Document], *, key: str = "doc_id", field: str | None = "section",
                 min_score: float = 2.0, top_n: int = 2, prefix: int = 5, detect: bool | str = "auto",
                 at: int = 3) -> None:
        if isinstance(min_score, bool) or not isinstance(min_score, int | float) or min_score < 0:
            raise ConfigError(f"min_score must be a number >= 0, got {min_score!r}")
        for name, value, low in (("top_n", top_n, 1), ("prefix", prefix, 0), ("at", at, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
        if detect not in (True, False, "auto"):
            raise ConfigError(f"detect must be True, False or 'auto', got {detect!r}")
        self.key, self.field = key, field
        self.min_score, self.top_n, self.prefix, self.detect, self.at = float(min_score), top_n, prefix, detect, at
        grouped: dict[Hashable, list[Document]] = {}
        for chunk in chunks:
            grouped.setdefault(_hashable(chunk.metadata.get(key)), []).append(chunk)
        self._documents = {name: self._outline(docs) for name, docs in grouped.items()}
        self._lock = threading.Lock()

    @classmethod
    def from_source(cls, source: Any, **settings: Any) -> SectionRouter:
        """A router over every chunk of a chunk source (`BM25Index`, Chroma store, `KnowledgeBase`).

        Raises:
            ConfigError: the source cannot list its chunks.
        """
        getter = getattr(source, "get_documents", None)
        if getter is None:
            raise ConfigError(f"{type(source).__name__} cannot list its chunks (no get_documents()); "
                              "pass the chunks to SectionRouter(chunks) instead")
        return cls(getter(), **settings)

    def __len__(self) -> int:
        return len(self._documents)

    def headings(self, document: Hashable = None) -> list[str]:
        """The headings known for `document`, in document order."""
        outline = self._documents.get(_hashable(document))
        return list(outline.headings) if outline else []

    # ------------------------------------------------------------------ matching
    def named(self, question: str, documents: Iterable[Hashable] | None = None, *,
              filter: dict[str, Any] | None = None) -> list[NamedSection]:
        """The sections `question` names among `documents` (all when None), best first, at most `top_n`.

        With a portable `filter`, a section opens at its first chunk that passes the filter, and a
        section with none is not named: promotion never widens a search's filter.
        """
        flt = validate_filter(filter)
        terms = heading_terms(question, prefix=self.prefix)
        if not terms:
            return []
        pairs = set(pairwise(terms))
        pairs |= {(b, a) for a, b in pairs}
        present = set(terms)
        names = self._documents if documents is None else dict.fromkeys(_hashable(d) for d in documents)
        found: list[NamedSection] = []
        for name in names:
            outline = self._documents.get(name)
            if outline is None:
                continue
            idf = self._idf(outline)
            for terms, headings in outline.names.items():
                score = self._score(terms, present, pairs, idf, outline.unseen)
                if score < self.min_score:
                    continue
                occurrences = []
                for heading in headings:
                    carriers = tuple(outline.chunks[i] for i in outline.headings[heading]
                                     if flt is None or matches(outline.chunks[i].metadata, flt))
                    if carriers:
                        occurrences.append((heading, carriers))
                if occurrences:
                    found.append(NamedSection(heading=occurrences[0][0], document=name, score=score,
                                              chunk=occurrences[0][1][0], occurrences=tuple(occurrences)))
        found.sort(key=lambda s: -s.score)
        return found[: self.top_n]

    @staticmethod
    def _score(heading: Sequence[str], present: set[str], pairs: set[tuple[str, str]], idf: dict[str, float],
               unseen: float) -> float:
        if not heading:
            return 0.0
        if len(heading) == 1:
            covered = set(heading) & present
        else:
            covered = {t for a, b in pairwise(heading) if (a, b) in pairs for t in (a, b)}
        if not covered:
            return 0.0
        total = sum(idf.get(t, unseen) for t in set(heading))
        weight = sum(idf.get(t, unseen) for t in covered)
        return weight * weight / total

    def promote(self, question: str, scored: Sequence[tuple[Document, float]], *, at: int | None = None,
                within: int | None = None, documents: Iterable[Hashable] | None = None, from_top: int = 10,
                filter: dict[str, Any] | None = None) -> tuple[Scored, list[NamedSection]]:
        """Insert the opening chunk of every named section after the first `at` results.

        Args:
            question: the user question.
            scored: `(chunk, score)` pairs, best first.
            at: how many results stay ahead of the promoted chunks (None: the router's `at`).
            within: for a context of the top `within` results: promote after ``min(at, within - top_n)``
                results instead, so every promoted chunk is inside it.
            documents: where to look for sections; by default the documents of the top `from_top`
                results (search has already found the documents a question is about).
            from_top: see `documents`.
            filter: the search's portable metadata filter; only chunks that pass it are promoted.

        Returns:
            The re-ordered pairs (a promoted chunk carries the score of the result before it and
            ``metadata["section_match"]``), and the named sections.
        """
        at = self.at if at is None else at
        if isinstance(at, bool) or not isinstance(at, int) or at < 0:
            raise ConfigError(f"at must be an integer >= 0, got {at!r}")
        if within is not None:
            at = min(at, max(0, within - self.top_n))
        scored = list(scored)
        if documents is None:
            documents = [d.metadata.get(self.key) for d, _ in scored[:from_top]]
        sections = self.named(question, documents, filter=filter)
        if not sections:
            return scored, []
        head = scored[:at]
        seen = {doc_key(d) for d, _ in head}
        floor = head[-1][1] if head else (scored[0][1] if scored else 0.0)
        rank = {}
        for position, (doc, _) in enumerate(scored):
            rank.setdefault(doc_key(doc), position)
        promoted: list[tuple[Document, float]] = []
        for section in sections:
            heading, chunk = self._place(section, rank)
            key = doc_key(chunk)
            if key in seen:
                continue
            seen.add(key)
            meta = {**chunk.metadata, "section_match": {"heading": heading, "score": round(section.score, 4)}}
            promoted.append((Document(page_content=chunk.page_content, metadata=meta, id=chunk.id), floor))
        rest = [(d, s) for d, s in scored[at:] if doc_key(d) not in seen]
        return head + promoted + rest, sections

    def _place(self, section: NamedSection, rank: dict[Hashable, int]) -> tuple[str, Document]:
        """The occurrence of a name whose chunks search ranked best (the first one when none was found)."""
        occurrences = section.occurrences or ((section.heading, (section.chunk,)),)
        missing = len(rank)

        def best(occurrence: tuple[str, tuple[Document, ...]]) -> int:
            return min((rank.get(doc_key(c), missing) for c in occurrence[1]), default=missing)

        heading, chunks = min(occurrences, key=best)
        return heading, chunks[0]

    # ------------------------------------------------------------------ building
    def _outline(self, chunks: list[Document]) -> _Document:
        chunks = sorted(chunks, key=lambda c: _order(c.metadata.get("chunk_index")))
        texts = [c.page_content for c in chunks]
        labelled_any = bool(self.field) and any(c.metadata.get(self.field) for c in chunks)
        detect = self.detect is True or (self.detect == "auto" and not labelled_any)
        furniture = running_headers(texts) if detect and len(texts) >= 3 else set()
        headings: dict[str, list[int]] = {}
        for index, chunk in enumerate(chunks):
            labelled = chunk.metadata.get(self.field) if self.field else None
            found = str(labelled).split(" / ") if labelled else []
            if detect:
                found += [line for line in (" ".join(raw.split()) for raw in chunk.page_content.splitlines())
                          if line and line not in furniture and is_heading_line(line)]
            for heading in dict.fromkeys(" ".join(h.split()) for h in found):
                if heading:
                    headings.setdefault(heading, []).append(index)
        if detect:
            # a line printed in many chunks is a column header or page furniture ("Year Ended"), not a section
            limit = max(_MIN_REPEATS, int(_REPEAT_SHARE * len(chunks)))
            headings = {h: where for h, where in headings.items() if len(where) <= limit}
        names: dict[tuple[str, ...], list[str]] = {}
        for heading in headings:
            terms = tuple(heading_terms(heading_name(heading), prefix=self.prefix))
            if terms and not all(t[0].isdigit() for t in terms):
                names.setdefault(terms, []).append(heading)
        return _Document(chunks=chunks, headings=headings, names=names)

    def _idf(self, outline: _Document) -> dict[str, float]:
        if outline.idf is None:
            idf = idf_weights(heading_terms(chunk.page_content, prefix=self.prefix) for chunk in outline.chunks)
            with self._lock:
                outline.idf, outline.unseen = idf, max(idf.values(), default=1.0)
        return outline.idf


def _hashable(value: Any) -> Hashable:
    return value if isinstance(value, Hashable) else str(value)


def _order(index: Any) -> tuple[int, float]:
    return (0, float(index)) if isinstance(index, int | float) and not isinstance(index, bool) else (1, 0.0)
