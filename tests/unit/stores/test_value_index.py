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
