"""Reading a whole collection: Chroma binds one SQL variable per record, so rag reads in pages."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from rag.stores import chroma_collection
from rag.stores.chroma import get_documents, get_ids, get_vectors, open_client, open_collection


def _collection(n: int, tmp_path):
    coll = open_collection(open_client(tmp_path), f"c{uuid.uuid4().hex[:8]}")
    rng = np.random.default_rng(0)
    for start in range(0, n, 5000):
        ids = [f"id{i}" for i in range(start, min(n, start + 5000))]
        coll.add(ids=ids, embeddings=rng.normal(size=(len(ids), 4)).astype(np.float32),
                 documents=[f"chunk {i}" for i in range(start, start + len(ids))],
                 metadatas=[{"doc_id": f"d{i % 7}", "chunk_index": i} for i in range(start, start + len(ids))])
    return coll


@pytest.mark.slow
def test_a_collection_larger_than_sqlites_variable_limit_is_read_whole(tmp_path):
    coll = _collection(33_000, tmp_path)                     # SQLite allows 32,766 variables per statement
    docs = get_documents(coll)
    assert len(docs) == 33_000 and len({d.id for d in docs}) == 33_000
    assert len(get_ids(coll, where={"doc_id": "d3"})) == len([i for i in range(33_000) if i % 7 == 3])
    assert len(get_vectors(coll, [f"id{i}" for i in range(0, 33_000, 2)])) == 16_500


@pytest.mark.parametrize("n", [0, 1, 6, 7, 8, 20, 21])
def test_pages_cover_every_record_once_at_every_boundary(tmp_path, monkeypatch, n):
    coll = _collection(n, tmp_path)
    monkeypatch.setattr(chroma_collection, "GET_PAGE", 7)   # (the pages are read there)
    assert sorted(d.id for d in get_documents(coll)) == sorted(f"id{i}" for i in range(n))
    wanted = [f"id{i}" for i in range(n) if i % 3 == 0] + ["missing"]
    assert sorted(d.id for d in get_documents(coll, ids=wanted)) == sorted(wanted[:-1])
    assert sorted(get_ids(coll, where={"doc_id": "d1"})) == sorted(f"id{i}" for i in range(n) if i % 7 == 1)
    assert sorted(get_vectors(coll, wanted)) == sorted(wanted[:-1])
