"""The permission keys (and Chroma's vectors) kept beside a store stay what the store holds, across writers.

`rag.stores.permission_index` (FTS5: tables in the index's file, written by triggers) and
`rag.stores.chroma_permitted` (Chroma: a file beside the collection, written after each write): every
write path (add, replace, delete, a permission-only update) is followed by a search through the
permitted chunks only, compared with the store's own filter (the plan off); a second store object on
the same files (what another process sees) answers the same; a file older than the store, or none,
is never read as current.
"""

from __future__ import annotations

import logging
import sqlite3
import tempfile
import uuid
from pathlib import Path
from typing import Any

import chromadb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.acl import Permissions, Principal
from rag.base.tracing import stage
from rag.stores import chroma_permitted
from rag.stores.chroma import new_chroma
from rag.stores.chroma_chunks import ChromaChunkStore
from rag.stores.fts_index import FTSIndex
from rag.base.filters import and_filters
from tests.unit.stores import test_permission_plan as plan_tests
from tests.unit.stores.test_permission_plan import plan_mode

_EMBEDDING = DeterministicFakeEmbedding(size=16)
GROUPS = ["team-a", "ops", "hr"]
ANN = Principal("ann", frozenset({"team-a"}))

#: one write of a store: ("add", n, group) a new chunk; ("grant", n, group) its permissions replaced (nothing
#: re-embedded); ("delete", n); ("replace", n, group) written again with new text
#: (None: a chunk without permission keys, which the file keeps no vector of until a grant gives it one)
_GROUP = st.one_of(st.sampled_from(GROUPS), st.none())
writes = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(0, 30), _GROUP),
    st.tuples(st.just("grant"), st.integers(0, 30), _GROUP),
    st.tuples(st.just("replace"), st.integers(0, 30), _GROUP),
    st.tuples(st.just("delete"), st.integers(0, 30))), min_size=1, max_size=12)


def _chunk(n: int, group: str | None, text: str = "") -> tuple[str, str, dict[str, Any]]:
    md = {"doc_id": f"d{n}", "chunk_index": 0}
    md = md if group is None else Permissions(groups=frozenset({group})).stamp(md)
    return f"{n:032x}", f"zq{n} revenue {text}growth", md


class Stores:
    """The same chunks in Chroma (in a directory) and in FTS5, written through each store's write path."""

    def __init__(self, directory: Path) -> None:
        self.client = chromadb.PersistentClient(path=str(directory / "chroma"))
        self.name = f"kb-{uuid.uuid4().hex[:8]}"
        self.chroma = ChromaChunkStore.of(new_chroma(self.name, _EMBEDDING, client=self.client))
        self.fts = FTSIndex(directory / "lexical.sqlite")
        self.held: set[str] = set()

    def apply(self, write: tuple) -> None:
        op, n = write[0], write[1]
        id_ = f"{n:032x}"
        if op == "delete":
            self.chroma.delete([id_])
            self.fts.delete([id_])
            self.held.discard(id_)
        elif op == "grant" and id_ in self.held:
            _, text, md = _chunk(n, write[2])
            self.chroma.update_metadatas([id_], [md])
            self.fts.update_metadatas([id_], [md])
        elif op in ("add", "replace"):
            _, text, md = _chunk(n, write[2], "again " if op == "replace" else "")
            vector = _EMBEDDING.embed_documents([text])
            if id_ in self.held:
                self.chroma.upsert([id_], vector, [text], [md])
            else:
                self.chroma.add([id_], vector, [text], [md])
            self.fts.add([id_], [text], [md])
            self.held.add(id_)

    def answers(self, chunks: ChromaChunkStore, fts: FTSIndex, mode: str) -> tuple[list, list, list]:
        """(Chroma's ids, FTS5's (id, score)s, the paths) of one search each as ann."""
        with plan_mode(mode), stage("search") as dense:
            got = [d.id for d, _ in chunks.search(_EMBEDDING.embed_query("revenue"), k=5, filter=ANN.filter())]
        with plan_mode(mode), stage("search") as lexical:
            words = [(d.id, s) for d, s in fts.search("revenue growth", k=5, filter=ANN.filter())]
        return got, words, [dense.attributes.get("permission_plan"), lexical.attributes.get("permission_plan")]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=writes)
def test_every_write_keeps_the_permitted_set_current_for_this_store_and_another(history):
    stores = Stores(Path(tempfile.mkdtemp(prefix="acl-keys-")))
    other_chroma = ChromaChunkStore.of(new_chroma(stores.name, _EMBEDDING, client=stores.client))
    other_fts = FTSIndex(stores.fts.path)   # (its own connections: what another process reads)
    for write in history:
        stores.apply(write)
        for chunks, fts in ((stores.chroma, stores.fts), (other_chroma, other_fts)):
            got, words, paths = stores.answers(chunks, fts, "exact")
            native, native_words, _ = stores.answers(chunks, fts, "off")
            assert got == native and words == native_words
            assert paths == ["exact", "exact"]
            over, _, paths = stores.answers(chunks, fts, "over-fetch")   # (Chroma's list, checked in the file)
            assert over == native and paths[0] == "over-fetch"
    side = stores.chroma.permitted()
    if side is not None and side.current():   # a chunk without keys has no copy of its vector in the file
        rows = side._dbs()[0].execute("SELECT acl, length(vector) FROM chunks").fetchall()
        assert all((acl == "{}") == (size == 0) for acl, size in rows), rows


def test_a_write_the_file_did_not_see_is_never_read_as_current(caplog):
    """A chunk written to Chroma directly (another tool): the file is stale; the next search builds it again (once per
    `REBUILD_EVERY` seconds) or, meanwhile, the plan's other paths answer: never the stale file."""
    stores = Stores(Path(tempfile.mkdtemp(prefix="acl-stale-")))
    for n in range(12):
        stores.apply(("add", n, "team-a" if n % 4 == 0 else "hr"))
    assert stores.answers(stores.chroma, stores.fts, "exact")[2][0] == "exact"
    id_, text, md = _chunk(99, "team-a", "revenue revenue ")
    stores.chroma.collection.add(ids=[id_], embeddings=_EMBEDDING.embed_documents([text]), documents=[text],
                                 metadatas=[md])   # (behind the file's back)
    side = stores.chroma.permitted()
    assert side is not None and not side.current()
    side._built_at = float("inf")   # (built a moment ago: not again yet)
    got, _, paths = stores.answers(stores.chroma, stores.fts, "exact")
    assert paths[0] != "exact" and id_ in got and got == stores.answers(stores.chroma, stores.fts, "off")[0]
    side._built_at = -chroma_permitted.REBUILD_EVERY
    with caplog.at_level(logging.WARNING):
        got, _, paths = stores.answers(stores.chroma, stores.fts, "exact")
    assert paths[0] == "exact" and id_ in got and "wrote the permission keys and vectors" in caplog.text


def test_a_store_written_before_the_keys_gets_them_once_and_loses_nothing(caplog):
    directory = Path(tempfile.mkdtemp(prefix="acl-migrate-"))
    stores = Stores(directory)
    for n in range(20):
        stores.apply(("add", n, GROUPS[n % 3]))
    expected = stores.answers(stores.chroma, stores.fts, "off")[:2]
    stores.fts.close()
    old = sqlite3.connect(stores.fts.path, isolation_level=None)   # (what a version before the keys wrote)
    for name, kind in old.execute("SELECT name, type FROM sqlite_master WHERE name LIKE 'acl%'").fetchall():
        if kind in ("table", "trigger"):
            old.execute(f"DROP {kind.upper()} IF EXISTS {name}")
    old.execute("DELETE FROM settings WHERE key = 'permission_keys'")
    old.close()
    side = stores.chroma.permitted()
    side.remove()
    with caplog.at_level(logging.WARNING):
        fts = FTSIndex(stores.fts.path)
        chunks = ChromaChunkStore.of(new_chroma(stores.name, _EMBEDDING, client=stores.client))
        got, words, paths = stores.answers(chunks, fts, "exact")
    assert (got, words) == expected and paths == ["exact", "exact"]
    assert "indexed the permission keys of its 20 chunks" in caplog.text
    assert "wrote the permission keys and vectors of its 20 chunks" in caplog.text


def test_only_a_principal_of_keys_that_must_be_true_in_a_directory_is_searched_over_its_chunks():
    """An in-memory collection keeps no file; a knowledge base public by default (a missing key passes) is not a
    set of keys: both are answered by the plan's other paths, the same answers."""
    assert ChromaChunkStore.of(new_chroma("kb", _EMBEDDING)).permitted() is None
    stores = Stores(Path(tempfile.mkdtemp(prefix="acl-shape-")))
    for n in range(10):
        stores.apply(("add", n, GROUPS[n % 3]))
    whole = ANN.filter(public_by_default=True)
    for search in (lambda: stores.chroma.search(_EMBEDDING.embed_query("revenue"), k=3, filter=whole),
                   lambda: stores.fts.search("revenue", k=3, filter=whole)):
        with plan_mode("exact"), stage("search") as current:
            got = [d.id for d, _ in search()]
        with plan_mode("off"):
            assert got == [d.id for d, _ in search()]
        assert current.attributes["permission_plan"] != "exact"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(corpus=plan_tests.corpora(), principal=plan_tests.principals, flt=plan_tests.request_filters,
       k=st.integers(1, 12), question=st.lists(st.sampled_from([*plan_tests.WORDS, "zq3", "zq17"]), min_size=1,
                                               max_size=3).map(" ".join))
def test_fts5s_ranking_of_the_permitted_chunks_is_fts5s_to_the_bit(corpus, principal, flt, k, question):
    """The exact path's scores are FTS5's own bm25() (its statistics, its formula), the order FTS5's, for any
    corpus, principal (odd permission values included), request filter and question."""
    index = plan_tests._fts(corpus)
    whole = and_filters(flt, principal.filter())
    with plan_mode("exact"), stage("search") as current:
        got = [(d.id, s) for d, s in index.search(question, k=k, filter=whole)]
    with plan_mode("off"):
        native = [(d.id, s) for d, s in index.search(question, k=k, filter=whole)]
    assert current.attributes.get("permission_plan") == "exact"
    assert got == native


def test_a_permission_file_that_is_a_link_is_never_opened(tmp_path):
    """A store copied from elsewhere with ``permitted-<collection>.sqlite`` linked to another file: nothing is written
    there, and searches are answered by the plan's other paths, the same answers."""
    stores = Stores(tmp_path)
    elsewhere = tmp_path / "elsewhere.sqlite"
    elsewhere.write_bytes(b"")
    side = stores.chroma.permitted()
    side.remove()
    side.path.symlink_to(elsewhere)
    chunks = ChromaChunkStore.of(new_chroma(stores.name, _EMBEDDING, client=stores.client))
    for n in range(8):
        id_, text, md = _chunk(n, GROUPS[n % 3])
        chunks.add([id_], _EMBEDDING.embed_documents([text]), [text], [md])
    got, _, paths = stores.answers(chunks, stores.fts, "exact")
    assert paths[0] != "exact" and got == stores.answers(chunks, stores.fts, "off")[0] and len(got) == 3
    assert elsewhere.read_bytes() == b""


def test_a_chunk_granted_its_first_key_gets_its_vector_and_is_found():
    stores = Stores(Path(tempfile.mkdtemp(prefix="acl-grant-")))
    for write in [("add", 1, None), ("add", 2, "ops"), ("grant", 1, "team-a")]:
        stores.apply(write)
    got, words, paths = stores.answers(stores.chroma, stores.fts, "exact")
    assert got == [f"{1:032x}"] and [i for i, _ in words] == [f"{1:032x}"] and paths == ["exact", "exact"]
    rows = dict(stores.chroma.permitted()._dbs()[0].execute("SELECT id, length(vector) FROM chunks").fetchall())
    assert rows[f"{1:032x}"] == 16 * 4 and rows[f"{2:032x}"] == 16 * 4
