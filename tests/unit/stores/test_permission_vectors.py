"""Chroma's two ways of answering a principal from its permission file (`rag.stores.permission_vectors`).

The exact path's ranking must be the full sort whatever part of it is read; the over-fetch path must
give Chroma's own filtered answer also when its first list held too few of the principal's chunks;
the cost model must pick the exact path below one share and the list above it; a store searched from many threads opens a bounded number of
connections to its file. The answers of both paths against Chroma's filter over generated corpora,
permissions and filters are in tests/unit/stores/test_permission_plan.py (mode "over-fetch") and
tests/unit/stores/test_permission_index.py (after every write).
"""

from __future__ import annotations

import threading

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.base.acl import Permissions, Principal
from rag.base.tracing import stage
from rag.stores import chroma_permitted, permission_vectors
from tests.unit.stores.test_permission_plan import _EMBEDDING, _chroma, plan_mode


@settings(max_examples=200, deadline=None)
@given(chunks=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 5)), min_size=0, max_size=120),
       copies=st.lists(st.integers(1, 3), min_size=41, max_size=41), first=st.integers(1, 30))
def test_the_ranking_read_in_parts_is_the_whole_sort(chunks, copies, first):
    """Chunks of several keys come once per key, with the same distance; ties are broken by number."""
    numbers = [n for n, _ in chunks for _ in range(copies[n])]
    dists = [d / 4 for n, d in chunks for _ in range(copies[n])]
    numbers, dists = np.array(numbers, dtype=np.int64), np.array(dists, dtype=np.float32)
    whole = {}
    for n, d in zip(numbers.tolist(), dists.tolist(), strict=True):
        whole[n] = min(d, whole.get(n, d))
    expected = sorted(whole.items(), key=lambda item: (item[1], item[0]))
    got = [(int(n), float(d)) for part_n, part_d in permission_vectors.ranked(numbers, dists, first)
           for n, d in zip(part_n, part_d, strict=True)]
    assert got == expected


@settings(max_examples=300, deadline=None)
@given(k=st.integers(1, 200), stored=st.integers(1_000, 2_000_000), dim=st.sampled_from([32, 64, 384, 768, 1536]))
def test_the_cost_model_picks_exact_below_one_share_and_the_list_above(k, stored, dim):
    shares = [i / 200 for i in range(1, 201)]
    picks = [permission_vectors.choose(k=k, permitted=round(s * stored), stored=stored, dim=dim) for s in shares]
    flips = sum(a != b for a, b in zip(picks, picks[1:]))
    assert flips <= 1 and (flips == 0 or picks[0] == "exact")


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
