"""Checks every lexical index kept in an engine must pass (pgvector, Qdrant, LanceDB): shared by their test files."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest

from rag.base.filters import matches


def assert_filter_inside_the_query(index: Any, kb: Any, question: str, flt: Any) -> None:
    """A filtered search returns exactly the chunks of the unfiltered search (top 30) that the filter allows: the
    filter is a condition of the engine's query, nothing is filtered away after the top k."""
    found = index.search(question, k=30, filter=flt)
    assert all(matches(d.metadata, flt) for d, _ in found)
    everything = {d.id for d, _ in index.search(question, k=30)}
    allowed = {d.id for d in kb.get_documents() if matches(d.metadata, flt) and d.id in everything}
    assert {d.id for d, _ in found} == allowed


def assert_the_engine_index_is_searched(kb: Any, kind: type, count: int) -> Any:
    """`kb`'s lexical index is the engine's own (`kind`), holds its `count` chunks, nothing is kept beside it, and the
    BM25 retriever searches it: every chunk holding a word is found. Returns the index."""
    lexical = kb.storage.chunks.lexical
    assert isinstance(lexical, kind) and lexical.count() == kb.count() == count
    assert not (kb.home / "lexical.sqlite").exists() and not list(kb.home.glob("bm25*"))
    index = kb.as_resource(search="bm25").retriever.index
    assert index is lexical
    assert {d.metadata["source"] for d, _ in index.search("margin", k=50)} == {
        d.metadata["source"] for d in kb.get_documents() if "margin" in d.page_content}
    return lexical


def okapi_bm25(lexical: Any, docs: list[Any], query: str, *, avg: float | None = None) -> dict[str, float]:
    """Chunk id -> Okapi BM25 of `query` (k1 = 1.2, b = 0.75, idf ln(1 + (N - n + 0.5) / (n + 0.5))) over `docs`
    tokenised as `lexical` does, for the chunks holding a query token; `avg`: the average length (default: the mean)."""
    tokens = {d.id: lexical.tokens(d.page_content, d.metadata) for d in docs}
    n = len(tokens)
    avg = avg if avg is not None else sum(map(len, tokens.values())) / n
    terms = set(lexical.tokens(query))
    df = {t: sum(t in toks for toks in tokens.values()) for t in terms}

    def bm25(toks: list[str]) -> float:
        tf = Counter(toks)
        return sum(math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) * tf[t] * 2.2
                   / (tf[t] + 1.2 * (0.25 + 0.75 * len(toks) / avg)) for t in terms if tf[t])

    return {i: bm25(toks) for i, toks in tokens.items() if terms & set(toks)}


def assert_scores_are_okapi_bm25(lexical: Any, docs: list[Any], queries: list[str], *, avg: float | None = None,
                                 rel: float = 1e-5) -> None:
    """Every chunk holding a query token is found, with `okapi_bm25`'s score, best first."""
    for query in queries:
        expected = okapi_bm25(lexical, docs, query, avg=avg)
        found = lexical.search(query, k=50)
        assert len(found) == len(expected)
        for doc, score in found:
            assert score == pytest.approx(expected[doc.id], rel=rel) and doc.metadata["scores"] == {"bm25": score}
        assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)
