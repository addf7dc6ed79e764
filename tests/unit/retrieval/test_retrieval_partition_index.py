from __future__ import annotations

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from retrieval_corpus import filing_chunks

from rag.base.errors import ConfigError
from rag.retrieval.hybrid import dense_search
from rag.stores import PartitionedChroma
from rag.stores.partition_index import PartitionIndex

EMB = DeterministicFakeEmbedding(size=16)


def _vectors(n: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def _brute_force(vectors: np.ndarray, ids: list[str], query: np.ndarray, k: int) -> list[str]:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    sims = unit @ (query / np.linalg.norm(query))
    return [ids[i] for i in np.argsort(-sims)[:k]]


def _filing_store(tmp_path=None, **options) -> PartitionedChroma:
    chunks = filing_chunks()
    store = PartitionedChroma("filings", EMB, partition_key="doc_name", persist_directory=tmp_path, **options)
    store.add_texts([c.page_content for c in chunks], [c.metadata for c in chunks], ids=[c.id for c in chunks])
    return store


# ---------------------------------------------------------------------------- PartitionIndex
def test_partition_search_is_exact_and_returns_cosine_distances(tmp_path):
    vecs, ids = _vectors(200), [f"c{i}" for i in range(200)]
    index = PartitionIndex(tmp_path)
    index.upsert("p", "doc-A", vecs, ids)
    query = _vectors(1, seed=9)[0]
    hits = index.search(["p"], query, k=5)
    assert [i for i, _ in hits] == _brute_force(vecs, ids, query, 5)
    first = vecs[int(hits[0][0][1:])]
    expected = 1 - first @ query / (np.linalg.norm(first) * np.linalg.norm(query))
    assert hits[0][1] == pytest.approx(expected, abs=1e-5)


def test_partitions_are_plain_npy_files_without_pickle(tmp_path):
    index = PartitionIndex(tmp_path)
    index.upsert("p", {"tenant": 1}, _vectors(3), ["a", "b", "c"])
    vec_file, ids_file, meta_file = index.files("p")
    assert np.load(vec_file, allow_pickle=False).shape == (3, 8)
    assert np.load(ids_file, allow_pickle=False).tolist() == ["a", "b", "c"]
    assert PartitionIndex(tmp_path).values() == {"p": {"tenant": 1}}
    assert meta_file.suffix == ".json"


def test_upsert_replaces_existing_ids_and_remove_drops_them(tmp_path):
    index = PartitionIndex(tmp_path)
    index.upsert("p", "A", np.eye(3, dtype=np.float32), ["x", "y", "z"])
    index.upsert("p", "A", np.array([[0, 0, 1]], dtype=np.float32), ["x"])
    assert sorted(index.load("p")[1].tolist()) == ["x", "y", "z"]
    assert index.search(["p"], [0, 0, 1], k=2) == [("z", 0.0), ("x", 0.0)]
    index.remove("p", ["x", "nope"])
    assert PartitionIndex(tmp_path).load("p")[1].tolist() == ["y", "z"]


def test_allow_list_restricts_results_and_several_partitions_are_merged():
    index = PartitionIndex(None)
    index.upsert("a", "A", np.eye(4, dtype=np.float32)[:2], ["a0", "a1"])
    index.upsert("b", "B", np.eye(4, dtype=np.float32)[2:], ["b2", "b3"])
    assert [i for i, _ in index.search(["a", "b", "missing"], [0.1, 0, 0.2, 1], k=3)] == ["b3", "b2", "a0"]
    assert [i for i, _ in index.search(["a", "b"], [0.1, 0, 0.2, 1], k=3, allowed={"a0", "a1"})] == ["a0", "a1"]


def test_cache_is_bounded_in_bytes_and_evicted_partitions_reload_from_disk(tmp_path):
    one = _vectors(100).nbytes + np.asarray([f"0-{i}" for i in range(100)]).nbytes  # vectors + ids
    index = PartitionIndex(tmp_path, cache_bytes=int(2.5 * one))
    for p in range(5):
        index.upsert(f"p{p}", p, _vectors(100, seed=p), [f"{p}-{i}" for i in range(100)])
    assert index._cached_bytes <= 2.5 * one and len(index._cache) == 2
    assert "p0" not in index._cache
    assert index.search(["p0"], _vectors(100, seed=0)[7], k=1)[0][0] == "0-7"
    assert list(index._cache)[-1] == "p0"


def test_query_with_wrong_dimension_names_both_sizes():
    index = PartitionIndex(None)
    index.upsert("p", "A", _vectors(2), ["a", "b"])
    with pytest.raises(ConfigError, match="3 dimensions, partition 'p' has 8"):
        index.search(["p"], [1.0, 0.0, 0.0], k=1)


def test_negative_cache_size_is_rejected():
    with pytest.raises(ConfigError, match="cache_bytes must be >= 0"):
        PartitionIndex(None, cache_bytes=-1)


# ---------------------------------------------------------------------------- PartitionedChroma layout
def test_filtered_search_uses_partition_arrays_not_extra_collections(tmp_path):
    store = _filing_store(tmp_path)
    assert [c.name for c in store._client.list_collections()] == ["filings.all"]
    assert len(store.partitions.values()) == 3
    query = EMB.embed_query("revenue")
    hits = store.search_by_vector(query, k=3, filter={"doc_name": "ACME_2023_10K"})
    chunks = [c for c in filing_chunks() if c.metadata["doc_name"] == "ACME_2023_10K"]
    expected = _brute_force(np.array(EMB.embed_documents([c.page_content for c in chunks])),
                            [c.id for c in chunks], np.array(query), 3)
    assert [d.id for d, _ in hits] == expected
    assert all(d.page_content and d.metadata["doc_name"] == "ACME_2023_10K" for d, _ in hits)


def test_missing_partition_arrays_are_rebuilt_from_the_global_collection(tmp_path):
    store = _filing_store(tmp_path)
    name = store.partition_name("GLOBEX_2023_10K")
    for path in store.partitions.files(name):
        path.unlink()
    again = PartitionedChroma("filings", EMB, partition_key="doc_name", persist_directory=tmp_path)
    docs = again.similarity_search("revenue", k=10, filter={"doc_name": "GLOBEX_2023_10K"})
    assert len(docs) == 5 and all(p.exists() for p in again.partitions.files(name))
    for path in again.partitions.files(name):
        path.unlink()
    assert again.index_partitions() == 3
    assert len(PartitionedChroma("filings", EMB, partition_key="doc_name",
                                 persist_directory=tmp_path).partition_values()) == 3


def test_re_added_chunk_moves_to_its_new_partition():
    store = _filing_store()
    chunk = filing_chunks()[0]
    old = chunk.metadata["doc_name"]
    store.add_texts([chunk.page_content], [{**chunk.metadata, "doc_name": "OTHER"}], ids=[chunk.id])
    assert chunk.id not in {d.id for d in store.similarity_search("x", k=20, filter={"doc_name": old})}
    assert [d.id for d in store.similarity_search("x", k=20, filter={"doc_name": "OTHER"})] == [chunk.id]
    assert store.count() == len(filing_chunks())


def test_delete_removes_chunks_from_search_with_and_without_filter(tmp_path):
    store = _filing_store(tmp_path)
    gone = [c.id for c in filing_chunks() if c.metadata["doc_name"] == "GLOBEX_2023_10K"][:2]
    assert store.delete(gone)
    assert store.count() == len(filing_chunks()) - 2
    assert not {d.id for d in store.similarity_search("x", k=20, filter={"doc_name": "GLOBEX_2023_10K"})} & set(gone)
    assert not {d.id for d in store.similarity_search("x", k=20)} & set(gone)


def test_dense_search_on_plain_chroma_matches_langchain_chroma(chunks):
    from rag.stores.chroma import new_chroma

    store = new_chroma("plain", EMB)
    store.add_documents(chunks, ids=[c.id for c in chunks])
    query = EMB.embed_query("operating income")
    ours = dense_search(store, query, k=5, filter={"year": 2023})
    theirs = store.similarity_search_by_vector_with_relevance_scores(query, k=5, filter={"year": {"$eq": 2023}})
    assert [d.id for d, _ in ours] == [d.id for d, _ in theirs]
    assert [s for _, s in ours] == pytest.approx([1 - dist for _, dist in theirs])
    assert all(d.metadata["scores"] == {"dense": s} for d, s in ours)


def test_rest_of_filter_reaches_candidates_beyond_the_first_batch():
    vecs = _vectors(300, dim=16, seed=4)
    store = PartitionedChroma("big", EMB, partition_key="doc_name")
    store.add_embeddings(vecs, metadatas=[{"doc_name": "D", "chunk_index": i} for i in range(300)],
                         ids=[f"c{i}" for i in range(300)])
    query = _vectors(1, dim=16, seed=5)[0]
    hits = store.search_by_vector(query, k=5, filter={"doc_name": "D", "chunk_index": {"$gte": 290}})
    allowed = list(range(290, 300))
    expected = _brute_force(vecs[allowed], [f"c{i}" for i in allowed], query, 5)
    assert [d.id for d, _ in hits] == expected
