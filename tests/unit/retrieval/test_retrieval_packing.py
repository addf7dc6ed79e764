"""Page-diverse packing (`diversify`, `retrieve(page_diversity=...)`) and blended reranking (`blend_rerank`)."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import ConfigError
from rag.compose.resource import Resource
from rag.compose.retrieve import retrieve
from rag.retrieval.lexical import BM25Retriever
from rag.retrieval.packing import diversify, page_key


def _chunk(page: int | None, text: str, doc: str = "d") -> Document:
    meta = {"doc_id": doc, "chunk_index": len(text) + ord(text[-1])}
    if page is not None:
        meta["page"] = page
    return Document(page_content=text, metadata=meta)


def test_a_second_chunk_of_a_page_yields_to_a_close_chunk_of_another_page():
    scored = [(_chunk(1, "a1"), 0.90), (_chunk(1, "a2"), 0.88), (_chunk(1, "a3"), 0.87), (_chunk(2, "b1"), 0.80),
              (_chunk(3, "c1"), 0.10)]
    order = [d.page_content for d, _ in diversify(scored, discount=0.3)]
    assert order[:2] == ["a1", "b1"]
    assert order[-1] == "c1"  # a far weaker chunk stays behind even a page's third chunk
    assert sorted(order) == sorted(d.page_content for d, _ in scored)


def test_scores_are_kept_and_zero_discount_keeps_the_order():
    scored = [(_chunk(1, "a"), 3.0), (_chunk(1, "b"), 2.0), (_chunk(2, "c"), 1.0)]
    assert diversify(scored, discount=0.0) == scored
    assert {s for _, s in diversify(scored, discount=1.0)} == {3.0, 2.0, 1.0}


def test_only_the_top_depth_is_reordered():
    scored = [(_chunk(1, "a"), 0.9), (_chunk(1, "b"), 0.8), (_chunk(2, "c"), 0.7), (_chunk(3, "d"), 0.1)]
    out = diversify(scored, discount=1.0, depth=2)
    assert [d.page_content for d, _ in out] == ["a", "b", "c", "d"]


def test_pages_of_different_documents_are_different_units():
    assert page_key(_chunk(1, "x", doc="A")) != page_key(_chunk(1, "x", doc="B"))
    assert page_key(_chunk(None, "x")) != page_key(_chunk(None, "y"))


@pytest.mark.parametrize(("kwargs", "message"), [({"discount": -0.1}, "discount must be a number >= 0"),
                                                 ({"depth": 0}, "depth must be a positive integer")])
def test_bad_settings_are_rejected_with_the_value(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        diversify([], **kwargs)


def test_retrieve_spreads_the_context_over_pages_and_records_the_step():
    texts = {1: ["revenue revenue revenue growth", "revenue revenue growth table", "revenue growth footnote"],
             2: ["revenue growth by segment"]}
    docs = [Document(page_content=t, id=f"p{p}-{i}", metadata={"doc_id": "f", "page": p, "chunk_index": 3 * p + i})
            for p, ts in texts.items() for i, t in enumerate(ts)]
    res = Resource.from_retriever("f", BM25Retriever.from_documents(docs))
    plain = retrieve("revenue growth", res, k=2, max_tokens=None)
    assert {d.metadata["page"] for d in plain.context} == {1}
    spread = retrieve("revenue growth", res, k=2, max_tokens=None, page_diversity=1.0)
    assert {d.metadata["page"] for d in spread.context} == {1, 2}
    assert "diversified" in spread.stages and "diversify" in spread.timings
    with pytest.raises(ValueError, match="page_diversity"):
        retrieve("revenue", res, page_diversity=-1)


def test_retrieve_without_diversity_has_no_diversified_stage():
    res = Resource.from_texts("n", ["alpha page", "beta page"], embedding=DeterministicFakeEmbedding(size=8))
    assert "diversified" not in retrieve("alpha", res, k=1, max_tokens=None, page_diversity=0).stages
    assert "diversified" in retrieve("alpha", res, k=1, max_tokens=None).stages   # on by default


def test_rerank_weight_blends_the_reranker_with_the_first_stage():
    from rag.retrieval.rerank import blend_rerank

    a, b, c = (Document(page_content=t, id=t) for t in "abc")
    first = [(a, 0.9), (b, 0.5), (c, 0.1)]
    reranked = [(c, 0.8), (b, 0.6), (a, 0.2)]
    assert [d.id for d, _ in blend_rerank(first, reranked, weight=1.0)] == ["c", "b", "a"]
    assert [d.id for d, _ in blend_rerank(first, reranked, weight=0.0)] == ["a", "b", "c"]
    # a candidate the reranker dropped stays, below the reranked ones
    assert [d.id for d, _ in blend_rerank(first, [(b, 1.0)], weight=0.5)] == ["b", "a", "c"]
    with pytest.raises(ConfigError, match="between 0 and 1"):
        blend_rerank(first, reranked, weight=1.5)


def test_retrieve_with_a_blended_reranker_keeps_the_first_stage_order_at_weight_zero():
    from rag.retrieval.rerank import EmbeddingReranker

    emb = DeterministicFakeEmbedding(size=8)
    res = Resource.from_texts("n", ["alpha beta", "beta gamma", "gamma delta"], embedding=emb)
    plain = retrieve("alpha beta", res, k=3, max_tokens=None)
    blended = retrieve("alpha beta", res, k=3, max_tokens=None, reranker=EmbeddingReranker(embedding=emb),
                       rerank_weight=0.0)
    assert [d.page_content for d in blended.context] == [d.page_content for d in plain.context]
    assert "reranked" in blended.stages
