from __future__ import annotations

import copy
import sqlite3
import threading

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import ConfigError
from rag.indexing.embedding_cache import CachedEmbeddings
from rag.models.embeddings import embedding_id


def test_only_misses_reach_the_model_and_each_distinct_text_once(recording_embedding, tmp_path):
    emb = CachedEmbeddings(recording_embedding, path=tmp_path / "cache.sqlite")
    first = emb.embed_documents(["alpha", "beta", "alpha"])
    assert recording_embedding.embedded == ["alpha", "beta"]
    second = emb.embed_documents(["beta", "gamma", "alpha"])
    assert recording_embedding.batches[-1] == ["gamma"]
    assert second[0] == first[1] and second[2] == first[0]
    assert emb.stats == {"hits": 3, "misses": 3, "query_hits": 0, "query_misses": 0}


def test_vectors_survive_reopening_the_file(recording_embedding, tmp_path):
    path = tmp_path / "sub" / "cache.sqlite"
    vectors = CachedEmbeddings(recording_embedding, path=path).embed_documents(["one", "two"])
    again = CachedEmbeddings(recording_embedding, path=path)
    assert again.embed_documents(["two", "one"]) == [vectors[1], vectors[0]]
    assert len(recording_embedding.batches) == 1
    assert len(again) == 2


def test_cached_values_equal_the_float32_rounded_model_output(tmp_path):
    model = DeterministicFakeEmbedding(size=8)
    emb = CachedEmbeddings(model, path=tmp_path / "c.sqlite")
    miss = emb.embed_documents(["text"])[0]
    hit = emb.embed_documents(["text"])[0]
    assert miss == hit
    np.testing.assert_allclose(hit, model.embed_documents(["text"])[0], rtol=1e-6)


def test_different_models_do_not_share_entries(tmp_path):
    path = tmp_path / "c.sqlite"
    small = CachedEmbeddings(DeterministicFakeEmbedding(size=4), path=path)
    large = CachedEmbeddings(DeterministicFakeEmbedding(size=6), path=path)
    assert len(small.embed_documents(["same"])[0]) == 4
    assert len(large.embed_documents(["same"])[0]) == 6
    assert large.stats["misses"] == 1


def test_queries_are_cached_apart_from_documents(recording_embedding):
    emb = CachedEmbeddings(recording_embedding)
    emb.embed_documents(["hello"])
    q1 = emb.embed_query("hello")
    q2 = emb.embed_query("hello")
    assert q1 == q2
    assert recording_embedding.queries == ["hello"]
    assert emb.stats["query_misses"] == 1 and emb.stats["query_hits"] == 1


def test_batches_misses_by_batch_size(recording_embedding):
    emb = CachedEmbeddings(recording_embedding, batch_size=2)
    emb.embed_documents([f"t{i}" for i in range(5)])
    assert [len(b) for b in recording_embedding.batches] == [2, 2, 1]


def test_empty_and_right_to_left_text_are_cached(recording_embedding, tmp_path):
    emb = CachedEmbeddings(recording_embedding, path=tmp_path / "c.sqlite")
    texts = ["", "שלום עולם", "مرحبا"]
    first = emb.embed_documents(texts)
    assert emb.embed_documents(texts) == first
    assert len(recording_embedding.batches) == 1


def test_storage_is_float32_blobs_not_pickle(tmp_path):
    path = tmp_path / "c.sqlite"
    CachedEmbeddings(DeterministicFakeEmbedding(size=4), path=path).embed_documents(["x"])
    with sqlite3.connect(path) as conn:
        dim, blob = conn.execute("SELECT dim, vector FROM embeddings").fetchone()
    assert dim == 4 and len(blob) == 16


def test_threads_share_one_cache_safely(recording_embedding, tmp_path):
    emb = CachedEmbeddings(recording_embedding, path=tmp_path / "c.sqlite")
    texts = [f"text {i}" for i in range(200)]
    results: list[list[list[float]]] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(emb.embed_documents(texts))
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(r == results[0] for r in results)
    assert len(emb) == 200


def test_model_id_matches_the_wrapped_model():
    model = DeterministicFakeEmbedding(size=12)
    assert embedding_id(CachedEmbeddings(model)) == embedding_id(model)


def test_copies_get_their_own_connection(tmp_path):
    emb = CachedEmbeddings(DeterministicFakeEmbedding(size=4), path=tmp_path / "c.sqlite")
    vec = emb.embed_documents(["x"])
    clone = copy.copy(emb)
    assert clone.embed_documents(["x"]) == vec and clone.stats["hits"] >= 1


@pytest.mark.parametrize("bad", [0, -1, True, "8"])
def test_bad_batch_size_is_rejected(bad):
    with pytest.raises(ConfigError, match="batch_size"):
        CachedEmbeddings(DeterministicFakeEmbedding(size=4), batch_size=bad)


def test_wrapping_a_non_embedding_is_rejected():
    with pytest.raises(ConfigError, match="Embeddings"):
        CachedEmbeddings("minilm")  # type: ignore[arg-type]
