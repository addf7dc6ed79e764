"""Records reconciled against the store (issue 37, item 7): the product's own recovery advice loses nothing.

A store whose files were moved aside (what the error for an unrepairable Chroma store says to do), or
restored from an older copy, lacks chunks its records list: the next `rag index` indexes those
documents again and says so, instead of reporting them unchanged over an empty store.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.reconcile import STAMP_FILE, lacking

ROOT = Path(__file__).resolve().parents[3]
_ENV = {**os.environ, "PYTHONPATH": str(ROOT), "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1"}
CITIES = ["Paris", "Rome", "Lisbon", "Vienna"]


def _rag(*args: str) -> subprocess.CompletedProcess:
    """`rag ARGS` in a new process, as a user runs it (each command its own process and Chroma client)."""
    return subprocess.run([sys.executable, "-m", "rag.cli", *args], env=_ENV, cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)


def _corpus(folder: Path, names: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / f"{name}.md").write_text(f"# {name}\n\n{name} is a capital city.\n")
    return folder


def _store_files(store: Path) -> list[Path]:
    return [p for p in store.iterdir() if p.name.startswith("chroma.sqlite3") or p.name.count("-") == 4]


def test_following_the_damaged_store_advice_then_rag_index_loses_nothing(tmp_path):
    corpus, store = _corpus(tmp_path / "corpus", CITIES), tmp_path / "store"
    assert _rag("index", str(corpus), "--store", str(store), "--embedding", "fake").returncode == 0
    db = sqlite3.connect(store / "chroma.sqlite3")   # damage Chroma cannot even drop the collection through
    db.execute("UPDATE segments SET type = 'urn:chroma:segment/unknown'")
    db.commit()
    db.close()
    damaged = _rag("ask", "capital city", "--store", str(store), "--search", "bm25")
    assert damaged.returncode == 2 and "damaged" in damaged.stderr and "rag index" in damaged.stderr
    refused = _rag("index", str(corpus), "--store", str(store), "--embedding", "fake")
    assert refused.returncode == 2
    assert "move the store directory's chroma.sqlite3 and its segment folders aside" in refused.stderr
    aside = tmp_path / "aside"   # the advice, followed
    aside.mkdir()
    for path in _store_files(store):
        shutil.move(path, aside / path.name)
    rerun = _rag("index", str(corpus), "--store", str(store), "--embedding", "fake")
    assert rerun.returncode == 0, rerun.stderr
    assert "updated 4" in rerun.stderr and "4 chunk(s) in total" in rerun.stderr, rerun.stderr
    assert rerun.stderr.count("its chunks were missing from the store") == 4
    asked = _rag("ask", "capital city", "--store", str(store), "--search", "dense", "--k", "4")
    assert asked.returncode == 0, asked.stderr
    assert all(f"{city}.md" in asked.stdout for city in CITIES), asked.stdout
    again = _rag("index", str(corpus), "--store", str(store), "--embedding", "fake")   # and then it is settled
    assert "unchanged 4" in again.stderr and "missing" not in again.stderr, again.stderr


def _kb(store: Path) -> KnowledgeBase:
    return KnowledgeBase("docs", store, embedding=DeterministicFakeEmbedding(size=8))


def _release(kb: KnowledgeBase) -> None:
    """Close it: its Chroma client too, as a process that ends does (files are swapped next)."""
    kb.close()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.integers(1, 5), later=st.integers(0, 4), changed=st.sets(st.integers(0, 4), max_size=3),
       restore=st.sampled_from(["older copy", "older copy in place", "moved aside"]))
@example(first=2, later=2, changed={0}, restore="older copy in place")   # the same inode: only the write log differs
def test_a_store_restored_or_moved_aside_is_indexed_again_in_full(tmp_path_factory, first, later, changed, restore):
    base = tmp_path_factory.mktemp("kb")
    names = [f"Town{n}" for n in range(first + later)]
    corpus, store = _corpus(base / "corpus", names[:first]), base / "store"
    kb = _kb(store)
    kb.add_documents(corpus)
    _release(kb)
    backup = base / "backup"
    backup.mkdir()
    for path in _store_files(store):
        (shutil.copytree if path.is_dir() else shutil.copy2)(path, backup / path.name)
    _corpus(corpus, names[first:])   # written after the copy: new documents, and changed ones
    for n in changed:
        if n < len(names):
            (corpus / f"{names[n]}.md").write_text(f"# {names[n]}\n\n{names[n]} changed its name.\n")
    kb = _kb(store)
    kb.add_documents(corpus)
    _release(kb)
    database = store / "chroma.sqlite3"
    inode = database.stat().st_ino
    for path in _store_files(store):
        if restore == "older copy in place" and path == database:   # written over: the file keeps its inode
            with open(path, "r+b") as out:
                out.truncate(0)
                out.write((backup / path.name).read_bytes())
            continue
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    if restore == "older copy in place":
        assert database.stat().st_ino == inode
        for path in backup.iterdir():
            if path != backup / database.name:
                (shutil.copytree if path.is_dir() else shutil.copy2)(path, store / path.name)
    if restore == "older copy":
        for path in backup.iterdir():
            (shutil.copytree if path.is_dir() else shutil.copy2)(path, store / path.name)
    kb = _kb(store)
    report = kb.add_documents(corpus)
    records = kb.list_documents()
    assert len(records) == len(names)
    assert not lacking(kb.storage.chunks, records)   # every chunk the records list is in the store
    assert kb.count() >= sum(len(r.chunk_ids) for r in records)
    found = {d.metadata["source"] for d in kb.as_retriever(k=50).invoke("town")}
    assert found == {r.source for r in records}
    missing = {note.path for note in report.notes if "missing from the store" in note.note}
    assert missing == set(report.updated)   # said so, for each one indexed again
    if later or changed:   # the copy lacks what was written after it
        assert missing
    _release(kb)


def test_a_no_op_run_neither_opens_the_store_nor_rewrites_the_stamp(tmp_path):
    corpus, store = _corpus(tmp_path / "corpus", CITIES), tmp_path / "store"
    _kb(store).add_documents(corpus)
    stamp = store / "kb" / "docs" / STAMP_FILE
    written = stamp.stat().st_mtime_ns
    kb = _kb(store)
    report = kb.add_documents(corpus)
    assert len(report.unchanged) == 4 and not report.notes
    assert kb.storage._chunks is None   # the store was never opened
    assert stamp.stat().st_mtime_ns == written


def test_the_check_reads_ids_in_batches_never_texts():
    class Store:   # a ChunkStore that holds the first chunk of every document
        def __init__(self):
            self.asked = []

        def get_ids(self, flt):
            self.asked.append(len(flt["doc_id"]["$in"]))
            return [f"{d}-0" for d in flt["doc_id"]["$in"]]

    from rag.indexing.records import DocumentRecord

    records = [DocumentRecord(source=f"s{n}", doc_id=f"d{n}", content_hash="h",
                              chunk_ids=[f"d{n}-{i}" for i in range(1 + n % 2)]) for n in range(1200)]
    store = Store()
    assert [r.doc_id for r in lacking(store, records, batch=500)] == [f"d{n}" for n in range(1200) if n % 2]
    assert store.asked == [500, 500, 200]


def test_a_stamp_replaced_by_a_link_a_fifo_or_a_huge_file_reads_as_none_without_stalling(tmp_path):
    # `read_stamp` reads back a file the knowledge base wrote: whatever stands in its place, the answer is
    # "no stamp" (the store is then checked in full), never a read that does not end.
    from rag.indexing.reconcile import MAX_STAMP_BYTES, read_stamp, save_stamp

    save_stamp(tmp_path, "dev:ino:42")
    assert read_stamp(tmp_path) == "dev:ino:42"
    stamp = tmp_path / STAMP_FILE
    cases = {
        "link to /dev/zero": lambda: stamp.symlink_to("/dev/zero"),
        "link to a valid stamp": lambda: (tmp_path / "elsewhere.json").write_text('{"store": "dev:ino:42"}')
        or stamp.symlink_to(tmp_path / "elsewhere.json"),
        "fifo": lambda: os.mkfifo(stamp),
        "huge": lambda: stamp.write_text('{"store": "' + "x" * MAX_STAMP_BYTES + '"}'),
        "deeply nested": lambda: stamp.write_text("[" * 3000),
        "not json": lambda: stamp.write_bytes(b"\xff\xfe"),
        "not an object": lambda: stamp.write_text('["dev:ino:42"]'),
    }
    for name, make in cases.items():
        stamp.unlink(missing_ok=True)
        make()
        assert read_stamp(tmp_path) is None, name


def test_chunks_no_record_lists_are_replaced_not_kept_with_their_old_metadata(tmp_path):
    """A store holding chunks its records do not list (a write cut short before its records, a store copied from
    another folder) gets them written again: Chroma's `add` would keep the stored chunk and its old metadata (on
    FinanceBench, another `source`: a filter by the filing's path found nothing for 32 of 92 questions)."""
    emb = DeterministicFakeEmbedding(size=16)
    folder = _corpus(tmp_path / "cities", CITIES[:2])
    kb = KnowledgeBase("cities", tmp_path / "store", embedding=emb)
    kb.add_documents([str(p) for p in sorted(folder.glob("*.md"))])
    ids = kb.storage.chunks.get_ids({})
    kb.storage.chunks.update_metadatas(ids, [{"source": "elsewhere/old.md", "stale": True}] * len(ids))
    (kb.home / "records.sqlite").unlink()   # no record of them: the same chunk ids are written as new
    kb = KnowledgeBase("cities", tmp_path / "store", embedding=emb)
    kb.add_documents([str(p) for p in sorted(folder.glob("*.md"))])
    assert sorted(kb.storage.chunks.get_ids({})) == sorted(ids)
    for path in sorted(folder.glob("*.md")):
        found = kb.get_documents({"source": str(path)})
        assert found and all("stale" not in d.metadata for d in found)
    assert not kb.get_documents({"source": "elsewhere/old.md"})
