"""Evidence aggregation: a chunk's score smoothed with the evidence of its page and of its document.

A chunk is scored alone, but the question is answered by a page, and the page belongs to a
document. When several candidates come from one page, or one document, that is evidence the
place is about the question, which a single look-alike chunk of another document (the same
statement in another company's filing, the same option in another command's manual page) does
not have. `aggregate_evidence` adds that evidence to every candidate's fused score:

``score = rel + page_weight * page_evidence + document_weight * document_evidence``

where `rel` is the chunk's min-max normalised score over the top `depth` candidates, a unit's
evidence is the sum of the `top` best `rel` of its candidates (the chunk itself included),
min-max normalised over the candidates. Only the order of the top `depth` changes; every candidate
is kept. A unit holding all the candidates (one document, in a single-document search) adds the
same to every chunk, so nothing moves. This is score interpolation between passage and document
(the classic passage-retrieval smoothing), not pooling: the chunk's own score still leads
(pooling a page's chunks into one page score was tried on FinanceBench and lost 5-20 points, see
`rag.retrieval.packing`).

Example:
    >>> from langchain_core.documents import Document
    >>> def chunk(doc, page, text):
    ...     return Document(page_content=text, metadata={"doc_id": doc, "page": page})
    >>> scored = [(chunk("b", 1, "look-alike"), 1.0), (chunk("a", 4, "right"), 0.9), (chunk("a", 5, "more"), 0.8),
    ...           (chunk("a", 6, "and more"), 0.7), (chunk("c", 1, "other"), 0.0)]
    >>> [d.page_content for d, _ in aggregate_evidence(scored, document_weight=0.5)]
    ['right', 'more', 'look-alike', 'and more', 'other']
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from langchain_core.documents import Document

from rag.retrieval.fusion import minmax
from rag.retrieval.packing import check_count, check_number, document_key, page_key

__all__ = ["aggregate_evidence", "document_key"]

Scored = list[tuple[Document, float]]


def _evidence(relevance: Sequence[float], keys: Sequence[Hashable], top: int) -> list[float]:
    """Per candidate: the sum of the `top` best relevances of its unit, min-max normalised."""
    by_unit: dict[Hashable, list[float]] = {}
    for rel, key in zip(relevance, keys, strict=True):
        by_unit.setdefault(key, []).append(rel)   # candidates come best first: the first `top` are the best
    totals = {key: sum(values[:top]) for key, values in by_unit.items()}
    return minmax([totals[key] for key in keys])


def _annotated(doc: Document, value: float) -> Document:
    """A copy of `doc` with ``metadata["scores"]["evidence"] = value`` (its `score` unchanged)."""
    metadata = {**doc.metadata, "scores": {**(doc.metadata.get("scores") or {}), "evidence": value}}
    return Document(page_content=doc.page_content, metadata=metadata, id=doc.id)


def aggregate_evidence(scored: Sequence[tuple[Document, float]], *, page_weight: float = 0.0,
                       document_weight: float = 0.0, depth: int = 100, top: int = 3,
                       page: Callable[[Document], Hashable] = page_key,
                       document: Callable[[Document], Hashable] = document_key) -> Scored:
    """Re-score the top `depth` candidates with their page's and document's evidence (module docstring).

    Args:
        scored: `(document, score)` pairs, best first.
        page_weight: weight of the page's evidence (0: none).
        document_weight: weight of the document's evidence (0: none).
        depth: how many top candidates are re-scored (the rest follow unchanged, below them).
        top: how many of a unit's best candidates count towards its evidence.
        page, document: the units (`page_key`, `document_key` by default).

    Returns:
        The pairs with their new scores (the normalised sum above), best first; the re-scored
        documents are copies with that score in ``metadata["scores"]["evidence"]``.

    Raises:
        ConfigError: a negative weight, or a depth or top below 1.
    """
    check_number("page_weight", page_weight)
    check_number("document_weight", document_weight)
    check_count("depth", depth)
    check_count("top", top)
    head, tail = list(scored[:depth]), list(scored[depth:])
    if (page_weight == 0 and document_weight == 0) or len(head) < 2:
        return head + tail
    relevance = minmax([s for _, s in head])
    total = list(relevance)
    for weight, unit in ((page_weight, page), (document_weight, document)):
        if weight:
            evidence = _evidence(relevance, [unit(d) for d, _ in head], top)
            total = [t + weight * e for t, e in zip(total, evidence, strict=True)]
    order = sorted(range(len(head)), key=lambda i: (-total[i], i))
    rescored = [(_annotated(head[i][0], total[i]), total[i]) for i in order]
    floor = min([0.0, *total]) - 1e-6
    return rescored + [(d, floor) for d, _ in tail]
