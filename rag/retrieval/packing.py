"""Page-aware packing of a ranked list: spread a fixed context budget over more pages.

Within one page, chunks are often near-duplicates in what they say about a question (a statement
title, its rows, its footnotes), so the top of a ranking can spend a token budget on three chunks
of one page while the page that answers the question waits at rank 20. The remedy works on
the fused scores, before the budget cuts the list: `diversify`, a greedy re-order in which a chunk
loses `discount` (on min-max normalised scores) for every better chunk already taken from its
page (maximal-marginal-relevance style, with the page as the unit of redundancy).

It keeps every candidate (only the order changes) and works on any metadata: the page key is
`(doc_id | doc_name | source, page)`; chunks without a page are their own unit. (Pooling a page's
chunk scores into one page score was tried on FinanceBench and lost 5-20 points: a page with
many mediocre chunks, such as a long table, beats the page with the one right chunk.)

Example:
    >>> from langchain_core.documents import Document
    >>> def chunk(page, text):
    ...     return Document(page_content=text, metadata={"doc_id": "d", "page": page})
    >>> scored = [(chunk(1, "a"), 0.9), (chunk(1, "b"), 0.85), (chunk(2, "c"), 0.8)]
    >>> [d.page_content for d, _ in diversify(scored, discount=0.5)]
    ['a', 'c', 'b']
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from langchain_core.documents import Document

from rag.base.errors import ConfigError
from rag.retrieval.fusion import doc_key, minmax

__all__ = ["check_count", "check_number", "diversify", "document_key", "page_key"]

Scored = list[tuple[Document, float]]


def _document(doc: Document) -> Hashable | None:
    meta = doc.metadata
    return meta.get("doc_id", meta.get("doc_name", meta.get("source")))


def document_key(doc: Document) -> Hashable:
    """The document a chunk belongs to: `doc_id`, else `doc_name`, else `source` (else the chunk itself).

    Example:
        >>> document_key(Document(page_content="x", metadata={"source": "a.pdf", "page": 2}))
        'a.pdf'
    """
    document = _document(doc)
    return ("chunk", doc_key(doc)) if document is None else document


def page_key(doc: Document) -> Hashable:
    """`(document, page)` of a chunk: the unit `diversify` groups by.

    The document is `doc_id`, else `doc_name`, else `source`; a chunk without a `page` is a unit
    of its own (`rag.retrieval.fusion.doc_key`: its id, or doc_id and chunk_index, or its text).

    Example:
        >>> page_key(Document(page_content="x", metadata={"doc_id": "d1", "page": 3}))
        ('d1', 3)
    """
    page = doc.metadata.get("page")
    return ("chunk", doc_key(doc)) if page is None else (_document(doc), page)


def check_number(name: str, value: float, upper: float | None = None) -> None:
    """Raise `ConfigError` unless `value` is a number >= 0 (and <= `upper` when given); bools are not numbers."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or (upper and value > upper):
        bound = f" and <= {upper}" if upper else ""
        raise ConfigError(f"{name} must be a number >= 0{bound}, got {value!r}")


def check_count(name: str, value: int) -> None:
    """Raise `ConfigError` unless `value` is an integer >= 1 (bools are not integers)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")


def diversify(scored: Sequence[tuple[Document, float]], *, discount: float = 0.3, depth: int = 40,
              key: Callable[[Document], Hashable] = page_key) -> Scored:
    """Re-order the top `depth` candidates so one page does not take the whole context.

    Args:
        scored: `(document, score)` pairs, best first.
        discount: what a chunk loses (on the 0..1 normalised scale of the top `depth`) for every
            better chunk already taken from its page; 0 keeps the order.
        depth: how many top candidates are re-ordered (the rest follow unchanged).
        key: the unit of redundancy; `page_key` by default.

    Returns:
        The same pairs with their original scores, re-ordered.

    Raises:
        ConfigError: a negative discount or a depth below 1.
    """
    check_number("discount", discount)
    check_count("depth", depth)
    head, tail = list(scored[:depth]), list(scored[depth:])
    if discount == 0 or len(head) < 2:
        return head + tail
    relevance = minmax([s for _, s in head])
    keys = [key(d) for d, _ in head]
    taken: dict[Hashable, int] = {}
    left = list(range(len(head)))
    out = []
    while left:
        best = max(left, key=lambda j: (relevance[j] - discount * taken.get(keys[j], 0), -j))
        left.remove(best)
        out.append(head[best])
        taken[keys[best]] = taken.get(keys[best], 0) + 1
    return out + tail
