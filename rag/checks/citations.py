"""Citations: map `[n]` to documents, drop dangling markers, and check that citations are right.

- `source_map(context)`: `[n]` -> `{"n", "source", "page", "resource", "label"}` for every chunk.
- `resolve_citations(answer, context)`: the answer with markers that point at nothing removed,
  the sources actually cited, and the dangling numbers (reported, not silently dropped).
- `check_citations(answer, context)`: for each cited sentence, whether each cited chunk supports
  it, and per answer

  * citation precision = supporting citations / all citations (a dangling one counts as wrong).
    As in ALCE, a citation supports its sentence when its chunk supports it alone, or when the
    cited chunks support it together and no longer do without this one;
  * citation recall = claim sentences supported by their cited chunks taken together / all
    claim sentences (an uncited claim counts as not supported; "I don't know" is not a claim).

Support is decided by `rag.checks.support.SupportScorer` (score >= `threshold`).

Example:
    >>> from langchain_core.documents import Document
    >>> ctx = [Document(page_content="Rome is in Italy.", metadata={"source": "it.txt"})]
    >>> r = resolve_citations("Rome is in Italy [1][7].", ctx)
    >>> r.answer, r.invalid, r.sources[0]["source"]
    ('Rome is in Italy [1].', [7], 'it.txt')
    >>> c = check_citations("Rome is in Italy [1]. Paris is in Spain [1].", ctx, embedding=None)
    >>> c.precision, c.recall
    (0.5, 0.5)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from pydantic import BaseModel, Field

from rag.checks.sentences import CITATION_PATTERN, MARKER_WITH_SPACE, is_abstention, parse_answer
from rag.checks.support import SupportScorer, _texts

__all__ = ["CitationCheck", "CitationReport", "ResolvedCitations", "check_citations", "cited_first", "resolve_citations",
           "source_label", "source_map"]


def source_label(doc: Document) -> str:
    """A short human label for a document: file name and page when known.

    Example:
        >>> source_label(Document(page_content="", metadata={"source": "/x/report.pdf", "page": 2}))
        'report.pdf, page 3'
    """
    md = doc.metadata
    source = str(md.get("source") or md.get("title") or md.get("resource") or "unknown")
    name = source.replace("\\", "/").rsplit("/", 1)[-1] or source
    if "page" in md and isinstance(md["page"], int):
        return f"{name}, page {md['page'] + 1}"
    return name


def source_map(context: Sequence[Document]) -> list[dict[str, Any]]:
    """One entry per chunk: its number `n` (1-based), source, page, resource, doc id and label."""
    out = []
    for n, doc in enumerate(context, start=1):
        md = doc.metadata or {}
        out.append({"n": n, "source": md.get("source"), "page": md.get("page"), "resource": md.get("resource"),
                    "doc_id": md.get("doc_id"), "chunk_index": md.get("chunk_index"), "label": source_label(doc)})
    return out


def cited_first(sources: Sequence[dict[str, Any]], cited: Iterable[int]) -> list[dict[str, Any]]:
    """The sources with a `cited` flag, those the answer cites first (by number), then the ones
    retrieved but not used; each keeps its number `n`, so `[n]` in the answer still finds it.

    Example:
        >>> [(s["n"], s["cited"]) for s in cited_first([{"n": 1}, {"n": 2}, {"n": 3}], [3])]
        [(3, True), (1, False), (2, False)]
    """
    used = set(cited)
    marked = [{**s, "cited": s.get("n") in used} for s in sources]
    return sorted(marked, key=lambda s: not s["cited"])


class ResolvedCitations(BaseModel):
    """The answer with dangling markers removed, the sources it cites, and the dangling numbers."""

    answer: str
    sources: list[dict[str, Any]] = Field(default_factory=list)   # cited sources, in number order
    cited: list[int] = Field(default_factory=list)
    invalid: list[int] = Field(default_factory=list)


def resolve_citations(answer: str, context: Sequence[Document]) -> ResolvedCitations:
    """Map each `[n]` to its document and remove markers that point at no retrieved chunk."""
    sources = source_map(context)
    valid = {s["n"] for s in sources}
    cited: set[int] = set()
    invalid: list[int] = []

    def fix(match: re.Match[str]) -> str:
        numbers = [int(n) for n in re.findall(r"\d+", match.group(1))]
        kept = [n for n in numbers if n in valid]
        cited.update(kept)
        invalid.extend(n for n in numbers if n not in valid and n not in invalid)
        if not kept:   # the marker goes with the spaces it leaves; the rest of the text is left as written
            return ""
        marker = CITATION_PATTERN.search(match.group(0))
        return f"{match.group(0)[:marker.start()]}[{', '.join(map(str, kept))}]{match.group(0)[marker.end():]}"

    fixed = MARKER_WITH_SPACE.sub(fix, answer or "").strip()
    return ResolvedCitations(answer=fixed, sources=[s for s in sources if s["n"] in cited],
                             cited=sorted(cited), invalid=sorted(invalid))


class CitationCheck(BaseModel):
    """Whether the chunks one sentence cites support it."""

    sentence: str
    citations: list[int] = Field(default_factory=list)
    supporting: list[int] = Field(default_factory=list)    # cited chunks that support the sentence alone
    invalid: list[int] = Field(default_factory=list)       # cited numbers with no chunk
    supported: bool = False                                 # by the cited chunks taken together
    score: float = 0.0                                      # support by the cited chunks taken together


class CitationReport(BaseModel):
    """Per-sentence checks and the answer's citation precision and recall (None when undefined)."""

    checks: list[CitationCheck] = Field(default_factory=list)
    precision: float | None = None
    recall: float | None = None


def _joint_score(sentence: str, texts: list[str]) -> float:
    return SupportScorer(["\n".join(texts)], embedding=None).score(sentence, 0) if texts else 0.0


def check_citations(answer: str, context: Sequence[Document | str], *,
                    embedding: Embeddings | str | None = "default", threshold: float = 0.6,
                    scorer: SupportScorer | None = None) -> CitationReport:
    """Check every citation of the answer against the chunk it points to.

    Args:
        answer: answer text with `[n]` markers.
        context: the chunks in source-number order.
        embedding: as in `annotate_support` (None for lexical only).
        threshold: support score at which a chunk counts as supporting a sentence.
        scorer: a prepared `SupportScorer` over the same context.
    """
    texts = _texts(context)
    scorer = scorer or SupportScorer(texts, embedding=embedding)
    checks: list[CitationCheck] = []
    total = good = claims = recalled = 0
    sentences = parse_answer(answer or "")
    if texts:
        scorer.warm([s.text for s in sentences if s.citations and not is_abstention(s.text)])
    for sentence in sentences:
        if is_abstention(sentence.text):
            continue
        claims += 1
        valid = [n for n in sentence.citations if 1 <= n <= len(texts)]
        invalid = [n for n in sentence.citations if n not in valid]
        scores = scorer.scores(sentence.text) if valid else []
        supporting = [n for n in valid if scores[n - 1][0] >= threshold]
        together = max((scores[n - 1][0] for n in valid), default=0.0)
        if together < threshold and len(valid) > 1:
            together = max(together, _joint_score(sentence.text, [texts[n - 1] for n in valid]))
            if together >= threshold:
                # Needed for the joint support: without this chunk the others fall short.
                for n in valid:
                    rest = [texts[m - 1] for m in valid if m != n]
                    if n not in supporting and _joint_score(sentence.text, rest) < threshold:
                        supporting.append(n)
                supporting.sort(key=valid.index)
        supported = together >= threshold
        total += len(sentence.citations)
        good += len(supporting)
        recalled += supported
        checks.append(CitationCheck(sentence=sentence.text, citations=sentence.citations, supporting=supporting,
                                    invalid=invalid, supported=supported, score=round(together, 4)))
    return CitationReport(checks=checks,
                          precision=round(good / total, 4) if total else None,
                          recall=round(recalled / claims, 4) if claims else None)
