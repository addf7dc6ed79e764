"""A store directory is untrusted input: symlinks, edited manifests and damaged records (issue 13)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import StoreError
from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.locking import WriterLock
from rag.indexing.manifest import MAX_DIMENSION
from rag.indexing.records import RecordStore

_SLOW = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _kb(store: Path, name: str = "docs", size: int = 8) -> KnowledgeBase:
    return KnowledgeBase(name, store, embedding=DeterministicFakeEmbedding(size=size))


def _filled(store: Path, name: str = "docs", text: str = "Paris is in France.") -> KnowledgeBase:
    kb = _kb(store, name)
    kb.add_documents([Document(page_content=text, metadata={"source": f"{name}-source"})])
    return kb


# ---------------------------------------------------------------- symlinks in the store
@pytest.mark.parametrize("target_exists", [True, False])
def test_lock_file_that_is_a_symlink_is_refused_and_its_target_untouched(tmp_path, target_exists):
    victim = tmp_path / "victim.txt"
    if target_exists:
        victim.write_text("precious")
    store = tmp_path / "store"
    store.mkdir()
    (store / "write.lock").symlink_to(victim)
    with pytest.raises(StoreError, match=r"write\.lock is a symlink.*Remove the link"):
        WriterLock(store).acquire()
    with pytest.raises(StoreError, match=r"write\.lock is a symlink"):
        _kb(store).add_documents([Document(page_content="x", metadata={"source": "s"})])
    assert victim.read_text() == "precious" if target_exists else not victim.exists()


def test_lock_is_still_taken_after_a_refused_symlink_is_removed(tmp_path):
    (tmp_path / "write.lock").symlink_to(tmp_path / "elsewhere")
    lock = WriterLock(tmp_path)
    with pytest.raises(StoreError):
        lock.acquire()
    (tmp_path / "write.lock").unlink()
    with lock:
        assert lock.held


@pytest.mark.parametrize("relative", ["kb/docs/records.sqlite", "kb/docs/records.sqlite-wal", "embeddings.sqlite",
                                      "chroma.sqlite3", "kb/docs/manifest.json", "kb/docs"])
def test_store_files_that_are_symlinks_are_refused_naming_the_file(tmp_path, relative):
    store = tmp_path / "store"
    _filled(store).close()
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    link = store / relative
    if link.is_dir():
        os.rename(link, tmp_path / "moved-kb")
        link.symlink_to(tmp_path / "moved-kb")
    else:
        link.unlink(missing_ok=True)
        link.symlink_to(victim)
    with pytest.raises(StoreError, match=f"{link.name} is a symlink"):
        kb = _kb(store)
        kb.add_documents([Document(page_content="Rome is in Italy.", metadata={"source": "it"})])
    assert victim.read_bytes() == b"precious"


@pytest.mark.parametrize("what", ["segment folder", "segment file"])
def test_a_chroma_segment_that_is_a_symlink_is_refused(tmp_path, what):
    """A segment folder (or a file in it) linked to another store's would search that store's vectors."""
    store, other = tmp_path / "store", tmp_path / "other"
    _filled(store).close()
    _filled(other, text="Rome is in Italy.").close()
    (segment,) = [p for p in store.iterdir() if p.is_dir() and p.name != "kb"]
    (foreign,) = [p for p in other.iterdir() if p.is_dir() and p.name != "kb"]
    if what == "segment folder":
        os.rename(segment, tmp_path / "moved")
        segment.symlink_to(foreign, target_is_directory=True)
        name = segment.name
    else:
        victim = segment / "header.bin"
        victim.unlink()
        victim.symlink_to(foreign / "header.bin")
        name = victim.name
    with pytest.raises(StoreError, match=f"{name} is a symlink"):
        _kb(store).get_documents()


def test_planted_temporary_manifest_link_is_not_written_through(tmp_path):
    store = tmp_path / "store"
    kb = _filled(store)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (kb.home / f"manifest.json.tmp{os.getpid()}").symlink_to(victim)
    kb.manifest.description = "changed"
    kb.manifest.save(kb.manifest_path)
    assert victim.read_text() == "precious"
    assert json.loads(kb.manifest_path.read_text())["description"] == "changed"


# ---------------------------------------------------------------- manifests that redirect
_OTHER = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{2,20}", fullmatch=True).filter(lambda n: n != "docs")


@_SLOW
@given(other=_OTHER, field=st.sampled_from(["collection", "name"]))
def test_manifest_naming_another_collection_never_reads_its_data(tmp_path_factory, other, field):
    store = tmp_path_factory.mktemp("store")
    _filled(store, "docs", "Our own text about Paris.").close()
    _filled(store, "secret", "Secret text of another knowledge base.").close()
    path = store / "kb" / "docs" / "manifest.json"
    data = json.loads(path.read_text())
    if field == "collection":
        data["store"]["collection"] = "secret" if other[0] in "aeiou" else other
    else:
        data["name"] = other
    path.write_text(json.dumps(data))
    with pytest.raises(StoreError, match=r"manifest .* names .*expected 'docs'.*another knowledge base"):
        _kb(store).as_retriever().invoke("secret")


@_SLOW
@given(size=st.integers(min_value=MAX_DIMENSION + 1, max_value=10**12))
def test_manifest_naming_a_giant_embedding_is_refused_without_allocating(tmp_path_factory, size):
    store = tmp_path_factory.mktemp("store")
    _filled(store).close()
    path = store / "kb" / "docs" / "manifest.json"
    data = json.loads(path.read_text())
    data["embedding"] = {"id": f"DeterministicFakeEmbedding(size={size})", "dimension": size}
    path.write_text(json.dumps(data))
    with pytest.raises(StoreError, match=r"manifest .* is damaged .*dimension"):
        KnowledgeBase("docs", store)  # the manifest's model, which would allocate size * 8 bytes per vector


@pytest.mark.parametrize("content", [b"", b"{", b"\xff\xfe not utf-8", b"[]", b'{"name": 1}', b"[" * 100_000])
def test_damaged_manifest_is_a_store_error_with_the_fix(tmp_path, content):
    store = tmp_path / "store"
    _filled(store).close()
    (store / "kb" / "docs" / "manifest.json").write_bytes(content)
    with pytest.raises(StoreError, match=r"manifest .* is damaged .*index the documents again"):
        _kb(store)


# ---------------------------------------------------------------- damaged records
# what SQLite can hold: another program cannot write an integer beyond 64 bits either
_GARBAGE = st.one_of(st.text(max_size=20), st.integers(min_value=-2**63, max_value=2**63 - 1),
                     st.floats(allow_nan=False), st.binary(max_size=20), st.none())


@_SLOW
@given(column=st.sampled_from(["chunk_ids", "size", "doc_id", "state", "pages", "title"]), value=_GARBAGE)
def test_garbage_in_the_records_table_is_a_store_error_or_harmless(tmp_path_factory, column, value):
    store = tmp_path_factory.mktemp("store")
    _filled(store).close()
    with sqlite3.connect(store / "kb" / "docs" / "records.sqlite") as conn:
        # the same columns without their constraints, as another program might have written them
        conn.executescript("CREATE TABLE loose AS SELECT * FROM documents; DROP TABLE documents; "
                           "ALTER TABLE loose RENAME TO documents;")
        conn.execute(f"UPDATE documents SET {column} = ?", (value,))
    kb = _kb(store)
    try:
        docs = kb.list_documents()
        report = kb.add_documents([Document(page_content="Paris is in France.", metadata={"source": "docs-source"})])
    except StoreError as exc:
        assert "records.sqlite is damaged" in str(exc) and "index the documents again" in str(exc)
    else:  # the value was valid for its column: the store still works
        assert report.added or report.updated or report.unchanged
        assert all(isinstance(c, str) for d in docs for c in d.chunk_ids)


@pytest.mark.parametrize("damage", ["drop_column", "not_a_database", "other_table"])
def test_records_file_with_a_wrong_schema_or_format_is_a_store_error(tmp_path, damage):
    path = tmp_path / "records.sqlite"
    if damage == "not_a_database":
        path.write_bytes(b"SQLite format 3\x00" + os.urandom(4000))
    else:
        with sqlite3.connect(path) as conn:
            if damage == "drop_column":
                conn.execute("CREATE TABLE documents (source TEXT PRIMARY KEY, doc_id TEXT)")
            else:
                conn.execute("CREATE TABLE documents (x INTEGER)")
    with pytest.raises(StoreError, match=r"record file .* is damaged"):
        RecordStore(path).all()


# ---------------------------------------------------------------- opening is not creating
def test_reading_a_knowledge_base_that_was_never_written_lists_the_existing_ones(tmp_path):
    _filled(tmp_path, "docs").close()
    typo = _kb(tmp_path, "dcos")
    for read in (typo.count, typo.list_documents, typo.get_documents, typo.as_retriever, typo.as_resource,
                 lambda: typo.delete_document("x")):
        with pytest.raises(StoreError, match=r"no knowledge base 'dcos' in .*existing: docs"):
            read()
    assert not (tmp_path / "kb" / "dcos").exists()
    with pytest.raises(StoreError, match=r"no knowledge base 'dcos'.*existing: docs"):
        KnowledgeBase.open("dcos", tmp_path)


def test_opening_in_a_missing_directory_creates_nothing(tmp_path):
    missing = tmp_path / "nowhere"
    kb = _kb(missing)
    with pytest.raises(StoreError, match=r"no such directory.*existing: \(none\)"):
        kb.as_retriever()
    assert not missing.exists()


def test_construct_then_add_documents_creates_the_knowledge_base(tmp_path):
    kb = _kb(tmp_path / "new")
    assert not kb.exists
    assert kb.add_documents([Document(page_content="Paris is in France.", metadata={"source": "geo"})]).added == ["geo"]
    assert kb.exists and kb.count() == 1
    assert KnowledgeBase.open("docs", tmp_path / "new").count() == 1
