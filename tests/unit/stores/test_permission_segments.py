"""Each permission key's vectors in Chroma's permission file, in segments written in proportion to each write.

`rag.stores.permission_segments`: any sequence of writes leaves a key few segments (each more than
`RATIO` times the next) holding every entry once, and rewrites each entry a logarithmic number of
times; a write leaves the segments of keys it did not touch as they were; a key whose chunks were
mostly deleted is rewritten without them; the file of the versions before segments is copied once
(or, when stale, the collection is read) and removed. Answers are compared with Chroma's own filter.
"""

from __future__ import annotations

import logging
import math
import sqlite3
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.stores import permission_segments
from rag.stores.chroma import new_chroma
from rag.stores.chroma_chunks import ChromaChunkStore
from rag.base.tracing import stage
from tests.unit.stores.test_permission_index import _EMBEDDING, ANN, GROUPS, Stores, _chunk
from tests.unit.stores.test_permission_plan import plan_mode


def _many(numbers: range) -> tuple[list, list, list, list]:
    """Chunks `numbers` (odd: team-a, even: hr) as `add`'s ids, vectors, texts and metadata, in one write."""
    chunks = [_chunk(n, "team-a" if n % 2 else "hr") for n in numbers]
    return ([id_ for id_, _, _ in chunks], _EMBEDDING.embed_documents([text for _, text, _ in chunks]),
            [text for _, text, _ in chunks], [md for _, _, md in chunks])


def _db() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.executescript("CREATE TABLE acl_keys (key, value, n);" + permission_segments.SCHEMA)
    return db


@settings(max_examples=150, deadline=None)
@given(writes=st.lists(st.integers(1, 60), min_size=1, max_size=80))
def test_any_writes_leave_a_key_few_segments_each_entry_once_and_rewritten_a_log_number_of_times(writes):
    db = _db()
    rewritten = []
    merge = permission_segments._merge

    def counted(side, key, ids, filter_dead, whole):
        rewritten.append(sum(size for size, in side.execute(
            f"SELECT size FROM key_segments WHERE id IN ({','.join('?' * len(ids))})", ids)))
        merge(side, key, ids, filter_dead, whole)
    permission_segments._merge = counted
    try:
        start = 0
        for size in writes:
            numbers = list(range(start, start + size))
            permission_segments.append(db, {"k": (numbers, [np.full(4, 0.5, dtype=np.float32).tobytes()] * size)})
            permission_segments.settle(db, ["k"])
            start += size
            sizes = [s for s, in db.execute("SELECT size FROM key_segments WHERE key = 'k' ORDER BY id")]
            assert all(older > permission_segments.RATIO * newer for older, newer in zip(sizes, sizes[1:]))
    finally:
        permission_segments._merge = merge
    held = np.concatenate([np.frombuffer(ns, dtype=np.int64) for ns, _, _ in permission_segments.read(db, ["k"])])
    assert sorted(held.tolist()) == list(range(start))
    assert len(sizes) <= math.log2(start) + 1
    assert sum(rewritten) <= start * (math.log2(start) + 1)


def test_a_write_leaves_the_segments_of_keys_it_did_not_touch_as_they_were():
    stores = Stores(Path(tempfile.mkdtemp(prefix="acl-segments-")))
    for n in range(30):
        stores.apply(("add", n, GROUPS[n % 3]))
    db = stores.chroma.permitted()._dbs()[0]
    before = db.execute("SELECT id, key, size FROM key_segments ORDER BY id").fetchall()
    stores.apply(("add", 40, "ops"))
    after = db.execute("SELECT id, key, size FROM key_segments ORDER BY id").fetchall()
    assert [row for row in before if row[1] != "acl_g_ops"] == [row for row in after if row[1] != "acl_g_ops"]
    assert sum(size for _, key, size in after if key == "acl_g_ops") == 11


def test_a_key_whose_chunks_were_mostly_deleted_is_rewritten_without_them():
    stores = Stores(Path(tempfile.mkdtemp(prefix="acl-purge-")))
    stores.chroma.add(*_many(range(200)))
    for n in range(1, 181, 2):   # 90 of team-a's 100 deleted, one by one: past `PURGE` of the 10 left and the floor
        stores.apply(("delete", n))
    db = stores.chroma.permitted()._dbs()[0]
    held = sum(size for size, in db.execute("SELECT size FROM key_segments WHERE key = 'acl_g_team-a'"))
    dead, = db.execute("SELECT dead FROM key_dead WHERE key = 'acl_g_team-a'").fetchone()
    # (rewritten when its 65th entry died: 35 left; 25 died since, under the floor)
    assert held - dead == 10 and held <= 10 + permission_segments._PURGE_FLOOR and (held, dead) == (35, 25)
    with plan_mode("exact"), stage("search") as current:
        got = [d.id for d, _ in stores.chroma.search(_EMBEDDING.embed_query("revenue"), k=20, filter=ANN.filter())]
    assert current.attributes["permission_plan"] == "exact"
    with plan_mode("off"):
        native = [d.id for d, _ in stores.chroma.search(_EMBEDDING.embed_query("revenue"), k=20, filter=ANN.filter())]
    assert got == native and sorted(got) == [f"{n:032x}" for n in range(181, 200, 2)]


def test_the_file_of_the_versions_before_segments_is_copied_once_then_removed(caplog):
    for stale in (False, True):
        stores = Stores(Path(tempfile.mkdtemp(prefix="acl-old-")))
        for n in range(20):
            stores.apply(("add", n, GROUPS[n % 3]))
        expected = stores.answers(stores.chroma, stores.fts, "off")[0]
        side = stores.chroma.permitted()
        saved = side._dbs()[0].execute("SELECT n, id, acl, vector FROM chunks").fetchall()
        side.remove()
        if stale:   # (a write after it: its stamp is not Chroma's, so the collection is read instead)
            stores.apply(("add", 21, "team-a"))
            expected = stores.answers(stores.chroma, stores.fts, "off")[0]
            stores.chroma.permitted().remove()
        old = sqlite3.connect(side.old_path, isolation_level=None)
        old.executescript("CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                          "CREATE TABLE chunks (n INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, acl TEXT NOT NULL,"
                          " vector BLOB NOT NULL);")
        seq = side._chroma_seq() - (1 if stale else 0)
        old.executemany("INSERT INTO settings VALUES (?, ?)",
                        [("format", "rag-chroma-acl/4"), ("chroma_seq", str(seq))])
        old.executemany("INSERT INTO chunks VALUES (?, ?, ?, ?)", saved)
        old.close()
        chunks = ChromaChunkStore.of(new_chroma(stores.name, _EMBEDDING, client=stores.client))   # (a new process)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            got, _, paths = stores.answers(chunks, stores.fts, "exact")
        assert got == expected and paths[0] == "exact"
        assert ("from acl-" in caplog.text) != stale and "wrote the permission keys and vectors" in caplog.text
        assert not side.old_path.exists() and chunks.permitted().path.exists()
