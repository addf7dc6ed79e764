"""One value index serves every store that matches filters in Python (BM25, ExactVectorStore, FaissStore)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.filters import matches_canonical, validate_filter
from rag.retrieval.lexical import BM25Index
from rag.stores.faiss import FaissStore
from rag.stores.memory import ExactVectorStore
from rag.stores.value_index import ValueIndex

_values = st.one_of(st.integers(-3, 3), st.sampled_from(["x", "y", ""]), st.booleans(), st.none())


@given(st.lists(st.dictionaries(st.sampled_from(["a", "b"]), _values, max_size=2), max_size=12),
       st.lists(st.integers(-3, 3), min_size=1, max_size=4))
def test_candidates_are_every_match_once_in_order(metadatas, wanted):
    flt = validate_filter({"a": {"$in": wanted}})
    got = ValueIndex(lambda: enumerate(metadatas)).candidates(flt).tolist()
    matches = [i for i, md in enumerate(metadatas) if matches_canonical(md, flt)]
    assert got == sorted(set(got)) and set(matches) <= set(got)


def test_a_repeated_in_value_returns_each_chunk_once_in_every_store():
    docs = [Document(page_content=f"rome note {i}", metadata={"a": i % 2}, id=f"d{i}") for i in range(6)]
    flt = {"a": {"$in": [1, 1]}}
    bm25 = BM25Index.from_documents(docs)
    assert [p for p, _ in bm25.search("rome", k=10, filter=flt)] == [1, 3, 5]
    emb = DeterministicFakeEmbedding(size=8)
    for store in (ExactVectorStore.from_texts([d.page_content for d in docs], emb,
                                              [d.metadata for d in docs], ids=[d.id for d in docs]),
                  FaissStore(emb)):
        if isinstance(store, FaissStore):
            store.add_documents(docs)
        found = [d.id for d, _ in store.similarity_search_with_score("rome", k=10, filter=flt)]
        assert sorted(found) == ["d1", "d3", "d5"], type(store).__name__


_keys = st.sampled_from(["a", "b", "acl_g_x", "acl_g_y", "acl_public"])
_comparisons = st.one_of(
    st.builds(lambda k, v: {k: {"$eq": v}}, _keys, st.one_of(st.integers(-1, 1), st.booleans(), st.just("x"))),
    st.builds(lambda k, v: {k: {"$in": v}}, _keys, st.lists(st.integers(-1, 1), min_size=1, max_size=2)),
    st.builds(lambda k, v: {k: {"$ne": v}}, _keys, st.booleans()))
_filters = st.recursive(_comparisons, lambda inner: st.one_of(
    st.builds(lambda a, b: {"$or": [a, b]}, inner, inner), st.builds(lambda a, b: {"$and": [a, b]}, inner, inner)),
    max_leaves=5)


@given(st.lists(st.dictionaries(_keys, _values, max_size=4), max_size=12), _filters, st.integers(0, 2))
def test_an_exact_answer_is_exactly_the_matches(metadatas, flt, warm):
    """`exact` (what lets a store skip per-chunk matching, e.g. for a principal's filter) never differs from
    `matches`, whatever mix of booleans and numbers a key holds and in whatever order keys were indexed."""
    canon = validate_filter(flt)
    index = ValueIndex(lambda: enumerate(metadatas))
    for key in ["acl_g_x", "a", "b"][:warm]:
        index.positions(key)
    got = index.exact(canon)
    if got is not None:
        assert got.tolist() == [i for i, md in enumerate(metadatas) if matches_canonical(md, canon)]
    pool = index.candidates(canon)
    if pool is not None:
        assert {i for i, md in enumerate(metadatas) if matches_canonical(md, canon)} <= set(pool.tolist())
