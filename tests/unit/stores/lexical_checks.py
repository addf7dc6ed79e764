"""Checks every lexical index kept in an engine must pass (pgvector, Qdrant): shared by their test files."""

from __future__ import annotations

from typing import Any

from rag.base.filters import matches


def assert_filter_inside_the_query(index: Any, kb: Any, question: str, flt: Any) -> None:
    """A filtered search returns exactly the chunks of the unfiltered search (top 30) that the filter allows: the
    filter is a condition of the engine's query, nothing is filtered away after the top k."""
    found = index.search(question, k=30, filter=flt)
    assert all(matches(d.metadata, flt) for d, _ in found)
    everything = {d.id for d, _ in index.search(question, k=30)}
    allowed = {d.id for d in kb.get_documents() if matches(d.metadata, flt) and d.id in everything}
    assert {d.id for d, _ in found} == allowed
