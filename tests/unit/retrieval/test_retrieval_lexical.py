from __future__ import annotations

import json
import math

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests
from retrieval_corpus import filing_chunks

from rag.base.errors import ConfigError, FilterError, StoreError
from rag.compose.resource import Resource
from rag.retrieval.lexical import BM25Index, BM25Retriever


def test_scores_match_hand_computed_okapi_bm25():
    docs = [Document(page_content="robots robots welding"), Document(page_content="airports cargo"),
            Document(page_content="robots cargo airports terminals")]
    index = BM25Index.from_documents(docs, k1=1.2, b=0.75)
    lengths = [3, 2, 4]
    avg = sum(lengths) / 3

    def term(tf, dl, df):
        idf = math.log(1 + (3 - df + 0.5) / (df + 0.5))
        return idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avg))

    expected = [term(2, 3, 2), 0.0, term(1, 4, 2)]
    assert index.scores("robot").tolist() == pytest.approx(expected, rel=1e-5)


def test_tokenisation_matches_inflections_and_ignores_punctuation(chunks):
    retriever = BM25Retriever.from_documents(chunks, k=1)
    top = retriever.invoke("What were Globex's green bond issuances?")[0]
    assert top.metadata["doc_name"] == "GLOBEX_2023_10K" and "green bonds" in top.page_content


def test_results_carry_scores_and_are_copies(chunks):
    retriever = BM25Retriever.from_documents(chunks, k=3)
    docs = retriever.invoke("capital expenditure plant")
    assert [d.metadata["score"] for d in docs] == sorted((d.metadata["score"] for d in docs), reverse=True)
    assert docs[0].metadata["scores"] == {"bm25": docs[0].metadata["score"]}
    assert "score" not in chunks[3].metadata
    assert docs[0].id in {c.id for c in chunks}


def test_filter_is_applied_before_top_k(chunks):
    retriever = BM25Retriever.from_documents(chunks, k=2)
    docs = retriever.invoke("revenue margin", filter={"doc_name": "ACME_2022_10K", "chunk_index": {"$gte": 2}})
    assert len(docs) == 1 and docs[0].metadata["chunk_index"] == 2
    docs = retriever.invoke("revenue", filter={"year": {"$gt": 2022}}, k=5)
    assert {d.metadata["year"] for d in docs} == {2023} and len(docs) == 2


def test_bad_filter_and_settings_fail_fast(chunks):
    retriever = BM25Retriever.from_documents(chunks)
    with pytest.raises(FilterError, match="valid"):
        retriever.invoke("revenue", filter={"year": {"$gtt": 1}})
    with pytest.raises(ConfigError, match="b must be between 0 and 1"):
        BM25Index(b=2)


def test_metadata_fields_make_titles_searchable(chunks):
    plain = BM25Retriever.from_documents(chunks, k=5)
    titled = BM25Retriever.from_documents(chunks, k=5, metadata_fields=["title"])
    hits = titled.invoke("Globex annual report terminals", k=5)
    assert all(d.metadata["doc_name"] == "GLOBEX_2023_10K" for d in hits)
    # without the title, chunks that never name Globex cannot match "Globex"
    assert {d.id for d in plain.invoke("Globex", k=5)} == {"GLOBEX_2023_10K-0", "GLOBEX_2023_10K-3"}


def test_save_and_load_round_trip_without_pickle(tmp_path, chunks):
    index = BM25Index.from_documents(chunks, k1=1.2, metadata_fields=["title"])
    index.save(tmp_path / "bm25")
    meta = json.loads((tmp_path / "bm25" / "index.json").read_text())
    assert meta["k1"] == 1.2 and len(meta["texts"]) == len(chunks)
    loaded = BM25Index.load(tmp_path / "bm25")
    assert np.allclose(loaded.scores("gross margin steel"), index.scores("gross margin steel"))
    loaded.add_documents([Document(page_content="steel steel steel margin", metadata={"doc_name": "X"})])
    assert loaded.search("steel", k=1)[0][0] == len(chunks)


def test_load_of_missing_index_says_what_is_expected(tmp_path):
    with pytest.raises(StoreError, match="index.json and arrays.npz"):
        BM25Index.load(tmp_path)


def test_resource_passes_filter_to_the_retriever(chunks):
    resource = Resource.from_retriever("bm25", BM25Retriever.from_documents(chunks),
                                       search_kwargs={"filter": {"company": "ACME"}, "k": 3})
    docs = resource.retrieve("airports revenue capital expenditure")
    assert len(docs) == 3 and all(d.metadata["company"] == "ACME" for d in docs)


@pytest.mark.slow
def test_search_at_10k_chunks_ranks_by_term_matches_and_honours_the_filter():
    # speed at this size is measured by `python bench/query.py paths` (bm25 p50), not here
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(5000)]
    docs = [Document(page_content=" ".join(rng.choice(words, 60)), metadata={"doc_name": f"d{i % 100}"})
            for i in range(10_000)]
    query = ["w1", "w2", "w3", "w4"]
    index = BM25Index.from_documents(docs, stem=False)
    top = [(docs[i], s) for i, s in index.search(" ".join(query), k=10)]   # positions in insertion order
    best = max(len(set(query) & set(d.page_content.split())) for d in docs)
    assert len(top) == 10 and len(set(query) & set(top[0][0].page_content.split())) == best
    filtered = [(docs[i], s) for i, s in index.search(" ".join(query), k=10, filter={"doc_name": "d7"})]
    assert filtered and all(d.metadata["doc_name"] == "d7" for d, _ in filtered)


class TestBM25RetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[BM25Retriever]:
        return BM25Retriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"index": BM25Index.from_documents(filing_chunks())}

    @property
    def retriever_query_example(self) -> str:
        return "Acme revenue margin capital"
