"""`ExactVectorStore` / `ExactRetriever`: exact cosine neighbours, portable filters, several vectors per chunk."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import ConfigError, FilterError
from rag.compose.resource import Resource
from rag.compose.retrieve import retrieve
from rag.retrieval.hybrid import HybridRetriever
from rag.retrieval.lexical import BM25Index
from rag.stores.memory import ExactRetriever, ExactVectorStore

EMB = DeterministicFakeEmbedding(size=8)
TEXTS = ["Revenue grew 8% in 2023.", "Margins fell on steel prices.", "The dividend was raised.",
         "Capital expenditure was $520 million.", "Acme bought a plant in Mexico.", "Litigation is in note 14."]


def chunks() -> list[Document]:
    return [Document(page_content=t, id=f"d{i % 2}#{i // 2}",
                     metadata={"doc_id": f"d{i % 2}", "chunk_index": i // 2, "year": 2022 + i % 3})
            for i, t in enumerate(TEXTS)]


def store_of(docs: list[Document], vectors: np.ndarray) -> ExactVectorStore:
    store = ExactVectorStore(EMB)
    store.add_embeddings([d.page_content for d in docs], vectors, metadatas=[d.metadata for d in docs],
                         ids=[d.id for d in docs])
    return store


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), k=st.integers(1, 8), year=st.sampled_from([None, 2022, 2023, 2024]))
def test_neighbours_are_the_exact_cosine_top_k_among_the_allowed_chunks(seed, k, year):
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(len(TEXTS), 5))
    query = rng.normal(size=5)
    docs = chunks()
    hits = store_of(docs, vectors).search_by_vector(query, k=k, filter=None if year is None else {"year": year})
    allowed = [i for i, d in enumerate(docs) if year is None or d.metadata["year"] == year]
    cosine = vectors @ query / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(query))
    expected = sorted(allowed, key=lambda i: -cosine[i])[:k]
    assert [d.id for d, _ in hits] == [docs[i].id for i in expected]
    assert [s for _, s in hits] == pytest.approx([cosine[i] for i in expected], abs=1e-5)


def test_filters_of_every_kind_are_honoured():
    store = ExactVectorStore.from_texts(TEXTS, EMB, metadatas=[d.metadata for d in chunks()])
    for flt in ({"doc_id": {"$in": ["d1"]}}, {"year": {"$gte": 2023}}, {"$or": [{"year": 2022}, {"chunk_index": 2}]},
                {"doc_id": "d0", "year": {"$ne": 2022}}, {"doc_id": "nowhere"}):
        found = store.similarity_search_with_score("revenue", k=10, filter=flt)
        expected = {d.id for d in store.get_documents(flt)}
        assert {d.id for d, _ in found} == expected and len(found) == len(expected), flt
    with pytest.raises(FilterError):
        store.similarity_search("revenue", filter={"year": {"$near": 2}})


def test_view_weights_mix_the_cosines_of_two_vectors_per_chunk():
    rng = np.random.default_rng(7)
    text, context = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    query = rng.normal(size=4)
    store = ExactVectorStore(EMB, views={"text": 0.5, "context": 0.5})
    store.add_embeddings(TEXTS, {"text": text, "context": context}, ids=[str(i) for i in range(6)])

    def cos(m: np.ndarray) -> np.ndarray:
        return m @ query / (np.linalg.norm(m, axis=1) * np.linalg.norm(query))

    for weights in ({"text": 0.5, "context": 0.5}, {"context": 1.0}, {"text": 0.2, "context": 0.8}):
        view = store if weights == store.views else store.with_weights(weights)
        expected = sum(w * cos(text if name == "text" else context) for name, w in weights.items())
        got = {d.id: s for d, s in view.search_by_vector(query, k=6)}
        assert [got[str(i)] for i in range(6)] == pytest.approx(expected.tolist(), abs=1e-5)
    reweighted = store.with_weights({"text": 1.0})
    store.add_embeddings(["new"], {"text": text[:1], "context": context[:1]}, ids=["n"])
    assert len(reweighted) == len(store) == 7        # same chunks, not a copy


def test_adding_texts_embeds_every_view_from_its_own_texts():
    store = ExactVectorStore.from_texts(TEXTS[:2], EMB, views={"text": 1.0, "context": 0.0},
                                        view_texts={"context": [f"Acme 2023 / {t}" for t in TEXTS[:2]]})
    top = store.with_weights({"context": 1.0}).similarity_search_with_score(f"Acme 2023 / {TEXTS[1]}", k=1)
    assert top[0][0].page_content == TEXTS[1] and top[0][1] == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ConfigError, match="view 'context' needs its texts"):
        ExactVectorStore.from_texts(TEXTS, EMB, views={"text": 1.0, "context": 1.0})


@pytest.mark.parametrize(("call", "message"), [
    (lambda s: s.add_embeddings(["a"], np.ones((2, 8))), "expected 1 vectors"),
    (lambda s: s.add_embeddings(["a"], np.ones((1, 3))), "holds 8-d vectors"),
    (lambda s: s.add_embeddings(["a"], np.ones((1, 8)), ids=["d0#0"]), "already in the store"),
    (lambda s: s.add_embeddings(["a"], {"other": np.ones((1, 8))}), "vectors must be given for the views"),
    (lambda s: s.with_weights({"context": 1.0}), "unknown view"),
    (lambda s: s.with_weights({"text": 0.0}), "at least one view weight must be positive"),
    (lambda s: s.search_by_vector([1.0] * 8, k=0), "k must be a positive integer"),
])
def test_mistakes_are_config_errors_that_say_what_is_valid(call, message):
    docs = chunks()
    store = store_of(docs, np.ones((len(docs), 8)))
    with pytest.raises(ConfigError, match=message):
        call(store)
    assert len(store) == len(docs)          # nothing was half-added


def test_delete_and_read_back_by_id():
    docs = chunks()
    store = store_of(docs, np.eye(8)[: len(docs)])
    store.delete(["d0#0", "d1#1"])
    assert len(store) == len(docs) - 2 and not store.get_by_ids(["d0#0"])
    assert [d.page_content for d in store.get_by_ids(["d1#0"])] == [TEXTS[1]]
    assert "d0#0" not in {d.id for d, _ in store.search_by_vector(np.eye(8)[0], k=10)}


def test_the_retriever_takes_k_and_filter_per_call_and_is_the_same_async():
    store = ExactVectorStore.from_texts(TEXTS, EMB, metadatas=[d.metadata for d in chunks()])
    retriever = store.as_retriever(k=2)
    docs = retriever.invoke("dividend", k=3, filter={"doc_id": "d1"})
    assert len(docs) == 3 and {d.metadata["doc_id"] for d in docs} == {"d1"}
    assert all(d.metadata["scores"]["dense"] == d.metadata["score"] for d in docs)
    assert [d.id for d in asyncio.run(retriever.ainvoke("dividend", k=3, filter={"doc_id": "d1"}))] == [d.id for d in docs]
    assert len(retriever.invoke("dividend")) == 2
    with pytest.raises(ConfigError, match="unknown search setting"):
        retriever.invoke("dividend", lambda_mult=0.3)


def test_a_hybrid_retriever_and_neighbour_expansion_work_over_the_store():
    docs = chunks()
    store = ExactVectorStore(EMB)
    store.add_documents(docs, ids=[d.id for d in docs])
    hybrid = HybridRetriever(vectorstore=store, bm25=BM25Index.from_documents(docs), fusion="convex", k=2)
    found = hybrid.invoke("steel margins", filter={"doc_id": "d1"})
    assert found and all(d.metadata["doc_id"] == "d1" and "dense" in d.metadata["scores"] for d in found)
    result = retrieve("dividend raised", Resource.from_retriever("r", ExactRetriever(store=store)), k=1, expand=1,
                      filter={"doc_id": "d0"}, token_counter="chars")
    window = result.context[0]
    assert window.metadata["doc_id"] == "d0" and len(window.metadata["chunk_indices"]) >= 2
