"""The Python filter for retrievers that take no filter: page until `k` chunks match.

A store or retriever with no native filter (see `rag.stores.registry`) is asked for more and more
candidates (`2k`, then four times as many each round) until `k` of them match the portable filter
or it returns fewer than asked, i.e. it has nothing more to give. So a selective filter never
returns fewer than `k` chunks when `k` exist; the price is a bigger search on such stores, which
is why every backend in `rag.stores` translates filters natively instead.

Example:
    >>> from langchain_core.documents import Document
    >>> docs = [Document(page_content=str(i), metadata={"n": i}) for i in range(100)]
    >>> asked = []
    >>> def fetch(n):
    ...     asked.append(n)
    ...     return docs[:n]
    >>> [d.page_content for d in page_filtered(fetch, {"n": {"$gte": 90}}, k=3)], asked
    (['90', '91', '92'], [6, 24, 96])
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.documents import Document

from rag.base.filters import matches_canonical

__all__ = ["FIRST_PAGE", "GROWTH", "apage_filtered", "page_filtered"]

FIRST_PAGE = 2   # the first request asks for FIRST_PAGE * k candidates
GROWTH = 4       # each further request asks for GROWTH times as many


def page_filtered(fetch: Callable[[int], list[Any]], flt: dict[str, Any] | None, k: int,
                  *, doc: Callable[[Any], Document] = lambda hit: hit) -> list[Any]:
    """The first `k` hits of `fetch(n)` whose document matches the canonical filter `flt`.

    Args:
        fetch: returns the best `n` hits, best first (documents, or tuples read with `doc`).
        flt: a canonical filter (`validate_filter`), or None for the first `k` hits.
        k: how many matching hits to return.
        doc: the document of a hit.
    """
    n = k if flt is None else FIRST_PAGE * k
    while True:
        hits = fetch(n)
        kept = _kept(hits, flt, doc)
        if flt is None or len(kept) >= k or len(hits) < n:
            return kept[:k]
        n *= GROWTH


async def apage_filtered(fetch: Callable[[int], Awaitable[list[Any]]], flt: dict[str, Any] | None, k: int,
                         *, doc: Callable[[Any], Document] = lambda hit: hit) -> list[Any]:
    """Async `page_filtered`."""
    n = k if flt is None else FIRST_PAGE * k
    while True:
        hits = await fetch(n)
        kept = _kept(hits, flt, doc)
        if flt is None or len(kept) >= k or len(hits) < n:
            return kept[:k]
        n *= GROWTH


def _kept(hits: list[Any], flt: dict[str, Any] | None, doc: Callable[[Any], Document]) -> list[Any]:
    return list(hits) if flt is None else [hit for hit in hits if matches_canonical(doc(hit).metadata, flt)]
