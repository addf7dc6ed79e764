"""A pgvector table rag creates has an HNSW index, and a search through it returns what an exact search returns
(real PostgreSQL + pgvector): `k` rows past pgvector's default candidate list, and `k` rows under a filter that drops
most of the index's first candidates (iterative scans), each passing the filter, in distance order."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.stores import pg_ann
from rag.stores.pgvector import PGVectorChunks, _in_one_transaction, _inner, _rows, open_store

DIM = 16
EMB = DeterministicFakeEmbedding(size=DIM)
_tables = (f"ann{i}" for i in itertools.count())
N = 3000


@pytest.fixture(scope="module")
def table(pg_url):
    """A table rag created, with N random unit vectors; every 50th row is in team "rare" (2%)."""
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(N, DIM))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    chunks = PGVectorChunks(open_store(pg_url, next(_tables), EMB, create=True))
    ids = [f"{i:032x}" for i in range(N)]
    teams = ["rare" if i % 50 == 0 else "common" for i in range(N)]
    chunks.add(ids, vectors.tolist(), [f"row {i}" for i in range(N)], [{"team": t, "i": i} for i, t in enumerate(teams)])
    return chunks, vectors, teams


def _exact(vectors: np.ndarray, query: np.ndarray, allowed: list[bool], k: int) -> list[int]:
    order = np.argsort(-(vectors @ query), kind="stable")
    return [int(i) for i in order if allowed[i]][:k]


def _plan(chunks: PGVectorChunks, vector: list[float], k: int, where: str = "") -> str:
    vs = _inner(chunks.store)
    sql = (f'EXPLAIN SELECT 1 FROM "{vs.schema_name}"."{vs.table_name}" {where} '
           f"ORDER BY embedding <=> CAST(:v AS vector) LIMIT {k}")
    rows = chunks.store._engine._run_as_sync(_rows(vs, sql, {"v": str(vector)}))
    return "\n".join(str(next(iter(r.values()))) for r in rows)


def test_a_table_rag_creates_has_an_hnsw_index_that_searches_use(table):
    chunks, vectors, _ = table
    vs = _inner(chunks.store)
    found = chunks.store._engine._run_as_sync(_rows(
        vs, "SELECT indexdef FROM pg_indexes WHERE tablename = :t AND indexname = :i",
        {"t": vs.table_name, "i": pg_ann.index_name(vs.table_name)}))
    assert len(found) == 1 and "USING hnsw (embedding vector_cosine_ops)" in found[0]["indexdef"]
    assert pg_ann.index_name(vs.table_name) in _plan(chunks, vectors[0].tolist(), 10)


def test_more_rows_than_pgvectors_default_candidate_list_are_all_returned(table):
    chunks, vectors, teams = table
    query = vectors[7]
    got = chunks.search(query.tolist(), k=150, filter=None)
    assert len(got) == 150                        # (the index alone, at ef_search 40, stops at 40)
    exact = _exact(vectors, query, [True] * N, 150)
    assert len({d.metadata["i"] for d, _ in got} & set(exact)) >= 140
    scores = [s for _, s in got]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("seed", range(4))
def test_a_filter_that_drops_most_candidates_still_gets_k_rows_in_order(table, seed):
    chunks, vectors, teams = table
    query = vectors[random.Random(seed).randrange(N)]
    got = chunks.search(query.tolist(), k=20, filter={"team": "rare"})
    assert len(got) == 20 and all(d.metadata["team"] == "rare" for d, _ in got)
    exact = _exact(vectors, query, [t == "rare" for t in teams], 20)
    assert len({d.metadata["i"] for d, _ in got} & set(exact)) >= 18
    scores = [s for _, s in got]
    assert scores == sorted(scores, reverse=True)


def test_the_settings_last_one_transaction(table):
    """A search's settings are its own: the next statement on a pooled connection sees the server's defaults."""
    chunks, vectors, _ = table
    chunks.search(vectors[0].tolist(), k=300, filter={"team": "rare"})
    vs = _inner(chunks.store)
    shown = chunks.store._engine._run_as_sync(_rows(vs, "SELECT current_setting('hnsw.ef_search') AS ef", {}))
    assert shown[0]["ef"] == "40"


def test_a_table_made_elsewhere_is_searched_as_it_is(pg_url):
    """No index is added to a table rag opens but did not create (an existing table is never altered)."""
    from langchain_postgres import PGEngine

    name = next(_tables)
    engine = PGEngine.from_connection_string(pg_url)
    engine.init_vectorstore_table(name, DIM)
    chunks = PGVectorChunks(open_store(pg_url, name, EMB))
    chunks.add(["a" * 32], [[1.0] + [0.0] * (DIM - 1)], ["one"], [{"team": "rare"}])
    vs = _inner(chunks.store)
    assert not chunks.store._engine._run_as_sync(_rows(
        vs, "SELECT 1 FROM pg_indexes WHERE tablename = :t AND indexdef LIKE '%hnsw%'", {"t": name}))
    assert [d.page_content for d, _ in chunks.search([1.0] + [0.0] * (DIM - 1), k=5, filter={"team": "rare"})] == ["one"]


def _hnsw_indexes(chunks: PGVectorChunks) -> list:
    vs = _inner(chunks.store)
    return chunks.store._engine._run_as_sync(_rows(
        vs, "SELECT indexname FROM pg_indexes WHERE tablename = :t AND indexdef LIKE '%USING hnsw%'",
        {"t": vs.table_name}))


def test_a_bulk_load_can_create_its_table_without_the_index_and_add_it_afterwards(pg_url, monkeypatch):
    """`vector_index: none` (config) / `vector_index="none"`: no index is kept current row by row during a bulk
    load; `CREATE INDEX` afterwards gives the same index, which searches then use."""
    from rag.config.stores import PGVectorResourceConfig

    monkeypatch.setenv("RAG_PG_URL", pg_url)
    name = next(_tables)
    config = PGVectorResourceConfig(name=name, kind="pgvector", url_env="RAG_PG_URL", create=True, vector_index="none")
    chunks = PGVectorChunks(config.open(EMB))
    assert _hnsw_indexes(chunks) == []
    chunks.add(["b" * 32], [[0.0, 1.0] + [0.0] * (DIM - 2)], ["two"], [{"team": "rare"}])
    vs = _inner(chunks.store)
    chunks.store._engine._run_as_sync(_in_one_transaction(vs, [pg_ann.create_index_sql(vs)]))
    assert [r["indexname"] for r in _hnsw_indexes(chunks)] == [pg_ann.index_name(name)]
    assert [d.page_content for d, _ in chunks.search([0.0, 1.0] + [0.0] * (DIM - 2), k=3, filter=None)] == ["two"]


def test_an_unknown_vector_index_is_refused_with_the_valid_ones(pg_url):
    from rag.base.errors import ConfigError
    from rag.config.stores import PGVectorResourceConfig

    with pytest.raises(ConfigError, match="'hnsw' or 'none'"):
        open_store(pg_url, next(_tables), EMB, create=True, vector_index="ivfflat")
    with pytest.raises(ValueError, match="hnsw"):
        PGVectorResourceConfig(name="x", kind="pgvector", url_env="RAG_PG_URL", vector_index="ivfflat")
