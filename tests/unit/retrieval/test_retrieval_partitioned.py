from __future__ import annotations

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_tests.integration_tests import RetrieversIntegrationTests
from retrieval_corpus import filing_chunks

from rag.base.errors import ConfigError
from rag.stores import PartitionedChroma, PartitionedRetriever
from rag.stores.partition_index import split_partition_filter


def _store(tmp_path=None, *, keep_global=True) -> PartitionedChroma:
    chunks = filing_chunks()
    store = PartitionedChroma("filings", DeterministicFakeEmbedding(size=16), partition_key="doc_name",
                              persist_directory=tmp_path, keep_global=keep_global)
    store.add_texts([c.page_content for c in chunks], [c.metadata for c in chunks], ids=[c.id for c in chunks])
    return store


def test_split_partition_filter_extracts_pinned_values():
    assert split_partition_filter({"doc_name": {"$in": ["B", "A"]}}, "doc_name") == (["A", "B"], None)
    assert split_partition_filter({"$and": [{"doc_name": "A"}, {"doc_name": {"$in": ["A", "B"]}}]},
                                  "doc_name") == (["A"], None)
    assert split_partition_filter({"year": 2023}, "doc_name") == (None, {"year": {"$eq": 2023}})
    assert split_partition_filter({"$or": [{"doc_name": "A"}, {"year": 1}]}, "doc_name")[0] is None


def test_pinned_filter_searches_only_that_partition_with_remaining_where(tmp_path):
    store = _store(tmp_path)
    docs = store.similarity_search("revenue", k=10, filter={"doc_name": "ACME_2023_10K", "chunk_index": {"$gte": 3}})
    assert sorted(d.metadata["chunk_index"] for d in docs) == [3, 4]
    assert {d.metadata["doc_name"] for d in docs} == {"ACME_2023_10K"}


def test_unfiltered_and_unpinned_queries_use_the_global_collection(tmp_path):
    store = _store(tmp_path)
    assert store.count() == 15
    assert len(store.similarity_search("revenue", k=15)) == 15
    assert {d.metadata["year"] for d in store.similarity_search("x", k=15, filter={"year": 2022})} == {2022}


def test_without_global_collection_queries_fan_out(tmp_path):
    store = _store(tmp_path, keep_global=False)
    assert store.partition_values() == ["ACME_2022_10K", "ACME_2023_10K", "GLOBEX_2023_10K"]
    docs_scores = store.similarity_search_with_score("revenue", k=15)
    assert len(docs_scores) == 15
    assert [s for _, s in docs_scores] == sorted(s for _, s in docs_scores)


def test_reopened_store_sees_its_partitions(tmp_path):
    _store(tmp_path)
    again = PartitionedChroma("filings", DeterministicFakeEmbedding(size=16), partition_key="doc_name",
                              persist_directory=tmp_path)
    assert len(again.similarity_search("revenue", k=9, filter={"doc_name": {"$in": ["GLOBEX_2023_10K"]}})) == 5


def test_chunk_without_partition_key_is_rejected():
    store = PartitionedChroma("x", DeterministicFakeEmbedding(size=8), partition_key="tenant")
    with pytest.raises(ConfigError, match="no 'tenant' metadata"):
        store.add_texts(["a"], [{"other": 1}])
    assert store.similarity_search("a", filter={"tenant": "nobody"}) == []


def test_resource_over_a_partitioned_store_keeps_the_fast_path(tmp_path):
    from rag.compose.resource import Resource

    store = _store(tmp_path)
    resource = Resource.from_vectorstore("filings", store, {"k": 10})
    assert getattr(resource.retriever, "accepts_portable_filter", False)
    docs = resource.retrieve("revenue", search_kwargs={"filter": {"doc_name": "GLOBEX_2023_10K"}})
    assert len(docs) == 5 and all(-1 <= d.metadata["score"] <= 1 for d in docs)


class TestPartitionedRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[PartitionedRetriever]:
        return PartitionedRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"store": _store()}

    @property
    def retriever_query_example(self) -> str:
        return "revenue"
