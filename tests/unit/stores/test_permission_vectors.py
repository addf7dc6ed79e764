"""Chroma's two ways of answering a principal from its permission file (`rag.stores.permission_vectors`).

The exact path's ranking (int8 estimates, then float32 vectors) must be the full sort whatever part of it is read; the over-fetch path must
give Chroma's own filtered answer also when its first list held too few of the principal's chunks;
the cost model must pick the exact path below one share and the list above it; a store searched from many threads opens a bounded number of
connections to its file. The answers of both paths against Chroma's filter over generated corpora,
permissions and filters are in tests/unit/stores/test_permission_plan.py (mode "over-fetch") and
tests/unit/stores/test_permission_index.py (after every write).
"""

from __future__ import annotations

import sqlite3
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.base.acl import Permissions, Principal
from rag.base.tracing import stage
from rag.stores import chroma_permitted, permission_segments, permission_vectors
from tests.unit.stores.test_permission_plan import _EMBEDDING, _chroma, plan_mode


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), count=st.integers(0, 150), dim=st.sampled_from([3, 16, 64]),
       keys=st.lists(st.sets(st.integers(0, 3), min_size=1), min_size=150, max_size=150),
       dead=st.sets(st.integers(0, 149)), twins=st.integers(0, 20), first=st.integers(1, 40))
def test_the_exact_ranking_from_quantized_segments_is_the_whole_sort(seed, count, dim, keys, dead, twins, first):
    """Chunks of several keys come once per key, chunks the file no longer holds are in segments, equal vectors tie
    (broken by number): the ranking, read round by round from the int8 estimates, is the float32 sort of the live
    chunks, and every estimate is within its bound of the truth."""
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((count, dim)).astype(np.float32)
    vectors[:twins] = vectors[0] if count else vectors[:twins]
    units = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    query = rng.standard_normal(dim).astype(np.float32)
    query /= np.linalg.norm(query)
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.executescript("CREATE TABLE acl_keys (key, value, n);" + permission_segments.SCHEMA)
    db.execute("CREATE TABLE chunks (n INTEGER PRIMARY KEY, vector BLOB NOT NULL)")
    db.executemany("INSERT INTO chunks VALUES (?, ?)", [(n, units[n].tobytes()) for n in range(count) if n not in dead])
    for key in range(4):   # (one segment per key and write of a few chunks)
        mine = [n for n in range(count) if key in keys[n]]
        for start in range(0, len(mine), 7):
            permission_segments.append(db, {f"k{key}": (mine[start:start + 7],
                                                        [units[n].tobytes() for n in mine[start:start + 7]])})
    numbers, sims, slack = permission_vectors.estimates(
        permission_segments.read(db, [f"k{key}" for key in range(4)]), query)
    truth = np.einsum("ij,j->i", units[numbers], query) if len(numbers) else np.zeros(0)
    assert np.all(np.abs(sims - truth) <= slack)
    live = np.array([n for n in range(count) if n not in dead], dtype=np.int64)
    found, dists = permission_vectors._exact(db, live, query)
    order = np.lexsort((found, dists))
    expected = list(zip(found[order].tolist(), dists[order].tolist(), strict=True))
    got = [(int(n), float(d)) for part_n, part_d in permission_vectors.exactly(db, numbers, sims, slack, query, first)
           for n, d in zip(part_n, part_d, strict=True)]
    assert got == expected


@settings(max_examples=300, deadline=None)
@given(k=st.integers(1, 200), stored=st.integers(1_000, 2_000_000), dim=st.sampled_from([32, 64, 384, 768, 1536]))
def test_the_cost_model_picks_exact_below_one_share_and_the_list_above(k, stored, dim):
    shares = [i / 200 for i in range(1, 201)]
    picks = [permission_vectors.choose(k=k, permitted=round(s * stored), stored=stored, dim=dim) for s in shares]
    flips = sum(a != b for a, b in zip(picks, picks[1:]))
    assert flips <= 1 and (flips == 0 or picks[0] == "exact")


#: Where the two paths' costs differed by more than 1 ms CPU in both of two `bench/acl.py --paths --paths-k 100 20 8`
#: runs (session 40, 100,000 chunks, load 3.8-6.0; bench/results/acl.txt), the path measured cheaper: (dim, k, the
#: principal's keys' count sum, path). The rows at 50,210 (43% readable) at 384 dimensions differed by 0.04-2.2 ms
#: CPU, either way: not listed.
MEASURED = ([(dim, k, permitted, "exact") for dim in (64, 384) for k in (100, 20, 8)
             for permitted in (1_970, 2_900, 11_330, 21_010)]
            + [(dim, k, 196_210, "over-fetch") for dim in (64, 384) for k in (100, 20, 8)]
            + [(64, 100, 50_210, "exact")])


@pytest.mark.parametrize(("dim", "k", "permitted", "cheaper"), MEASURED)
def test_the_cost_model_chooses_the_path_measured_cheaper(dim, k, permitted, cheaper):
    assert permission_vectors.choose(k=k, permitted=permitted, stored=100_000, dim=dim) == cheaper


def test_a_first_list_with_too_few_of_the_principals_chunks_is_read_deeper():
    """Each readable chunk carries the principal's three groups: the keys' counts say 3x what it may read, so the
    first list is a third as deep as needed; the answer is still Chroma's own filter's."""
    readable = set(range(0, 120, 12))
    corpus = [(f"{i:032x}", f"zq{i} revenue growth",
               Permissions(groups=frozenset({"a", "b", "c"} if i in readable else {"hr"}))
               .stamp({"doc_id": f"d{i}", "chunk_index": 0})) for i in range(120)]
    chunks = _chroma(corpus, directory=True)
    ann = Principal("ann", frozenset({"a", "b", "c"}))
    vector = _EMBEDDING.embed_query("revenue")
    depth = permission_vectors.over_fetch_depth(8, 3 * len(readable), len(corpus))
    assert depth * len(readable) / len(corpus) < 8   # (the first list holds fewer than k of them)
    with plan_mode("over-fetch"), stage("search") as current:
        got = [d.id for d, _ in chunks.search(vector, k=8, filter=ann.filter())]
    with plan_mode("off"):
        native = [d.id for d, _ in chunks.search(vector, k=8, filter=ann.filter())]
    assert got == native and len(got) == 8 and current.attributes["permission_plan"] == "over-fetch"
    assert current.attributes["permission_candidates"] > depth


def test_searches_on_new_threads_share_a_bounded_set_of_connections():
    """The pipeline runs each request's search on a new thread: the file's connections are reused, not opened per
    thread, and at most `_POOL` stay open when many threads searched at once."""
    corpus = [(f"{i:032x}", f"zq{i} revenue", Permissions(groups=frozenset({"a" if i % 3 else "hr"}))
               .stamp({"doc_id": f"d{i}", "chunk_index": 0})) for i in range(40)]
    chunks = _chroma(corpus, directory=True)
    side = chunks.permitted()
    opened = []
    open_ = side._open
    side._open = lambda: opened.append(1) or open_()
    ann = Principal("ann", frozenset({"a"}))
    answers = []

    def search() -> None:
        answers.append([d.id for d, _ in chunks.search(_EMBEDDING.embed_query("revenue"), k=3, filter=ann.filter())])

    with plan_mode("exact"):
        for _ in range(10):   # one after another, each on its own thread
            thread = threading.Thread(target=search)
            thread.start()
            thread.join()
        assert len(opened) <= 1 and len(answers) == 10 and all(a == answers[0] for a in answers)
        threads = [threading.Thread(target=search) for _ in range(12)]   # at once
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(answers) == 22 and all(a == answers[0] for a in answers)
    assert len(side._pool) <= chroma_permitted._POOL
