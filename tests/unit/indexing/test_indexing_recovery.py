"""Moved folders, kill -9 in an update, and a full disk (issue 13): real processes, a real tmpfs."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.compose.knowledge_base import KnowledgeBase
from tests.unit.disks import private_tmpfs_available

ROOT = Path(__file__).resolve().parents[3]
_ENV = {**os.environ, "PYTHONPATH": str(ROOT), "ANONYMIZED_TELEMETRY": "False"}


def _kb(store: Path) -> KnowledgeBase:
    return KnowledgeBase("docs", store, embedding=DeterministicFakeEmbedding(size=8))


def _corpus(folder: Path, files: int, words: int = 60) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(files):
        body = " ".join(f"word{(n * 7919 + i) % 1009}" for i in range(words))
        (folder / f"doc{n}.md").write_text(f"# Document {n}\n\n{body}\n")


def _snapshot(kb: KnowledgeBase) -> list[tuple[str, str, int]]:
    return sorted((d.metadata["source"], d.metadata["title"], d.metadata["chunk_index"]) for d in kb.get_documents())


# ---------------------------------------------------------------- moving a folder
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.integers(1, 6), rename=st.booleans(), changed=st.integers(0, 1))
def test_moved_folder_is_re_pointed_not_duplicated(tmp_path_factory, files, rename, changed):
    root = tmp_path_factory.mktemp("move")
    _corpus(root / "old", files)
    kb = _kb(root / "store")
    kb.add_documents(str(root / "old"))
    chunks = kb.count()
    new = root / "new"
    shutil.move(root / "old", new)
    if rename:
        (new / "doc0.md").rename(new / "renamed.md")
    if changed and files > 1:  # a moved file that also changed is indexed again, not moved
        (new / "doc1.md").write_text("# Changed\n\nnew words here")
    # a changed file cannot be told from a new one: "full" removes its old copy, "incremental" keeps it
    report = kb.add_documents(str(new), cleanup="full" if changed else "incremental")
    moved = files - (1 if changed and files > 1 else 0)
    assert len(report.moved) == moved and report.embedded <= (1 if changed and files > 1 else 0)
    assert len(kb.list_documents()) == files
    sources = {d.metadata["source"] for d in kb.get_documents()}
    assert all(s.startswith(str(new)) for s in sources)
    if not (changed and files > 1):
        assert kb.count() == chunks and report.chunks_added == 0
    if rename:
        titles = {d.metadata["title"] for d in kb.get_documents() if d.metadata["source"].endswith("renamed.md")}
        assert titles == {"Document 0"}  # the heading title, not the file name
    again = kb.add_documents(str(new), cleanup="incremental")
    assert not again.changed
    fresh = _kb(root / "fresh")
    fresh.add_documents(str(new))
    assert _snapshot(kb) == _snapshot(fresh)


def test_moved_txt_file_title_follows_the_new_name(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "notes.txt").write_text("plain text without a heading")
    kb = _kb(tmp_path / "store")
    kb.add_documents(str(tmp_path / "a"))
    (tmp_path / "a" / "notes.txt").rename(tmp_path / "a" / "minutes.txt")
    report = kb.add_documents(str(tmp_path / "a"), cleanup="full")
    assert [Path(new).name for _, new in report.moved] == ["minutes.txt"] and not report.deleted
    assert {d.metadata["title"] for d in kb.get_documents()} == {"minutes"}
    assert "moved 1" in report.summary()


def test_copy_is_not_a_move(tmp_path):
    _corpus(tmp_path / "a", 2)
    kb = _kb(tmp_path / "store")
    kb.add_documents(str(tmp_path / "a"))
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    report = kb.add_documents(str(tmp_path / "b"))
    assert not report.moved and len(report.added) == 2 and len(kb.list_documents()) == 4


# ---------------------------------------------------------------- kill -9 in the middle of an update
_BLOCKING_INDEXER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from rag.compose.knowledge_base import KnowledgeBase

    def progress(event, amount):
        if event == "embeddings":  # records are marked, vectors computed, chunks not yet written
            Path(sys.argv[3]).write_text("embedding")
            time.sleep(600)

    kb = KnowledgeBase("docs", sys.argv[1], embedding=DeterministicFakeEmbedding(size=8))
    kb.add_documents(sys.argv[2], progress=progress)
""")


def test_rerun_after_kill_9_in_an_update_reports_updated(tmp_path):
    _corpus(tmp_path / "docs", 3)
    kb = _kb(tmp_path / "store")
    kb.add_documents(str(tmp_path / "docs"))
    kb.close()
    (tmp_path / "docs" / "doc1.md").write_text("# Changed\n\nchanged body words")
    (tmp_path / "docs" / "new.md").write_text("# New\n\nnew body words")
    script, marker = tmp_path / "indexer.py", tmp_path / "marker"
    script.write_text(_BLOCKING_INDEXER)
    child = subprocess.Popen([sys.executable, str(script), str(tmp_path / "store"), str(tmp_path / "docs"),
                              str(marker)], env=_ENV, cwd=ROOT, stderr=subprocess.PIPE)
    try:
        for _ in range(1200):
            if marker.exists() or child.poll() is not None:
                break
            time.sleep(0.1)
        assert marker.exists(), child.stderr.read().decode() if child.poll() is not None else "no marker"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    report = _kb(tmp_path / "store").add_documents(str(tmp_path / "docs"))
    assert [Path(p).name for p in report.updated] == ["doc1.md"]
    assert [Path(p).name for p in report.added] == ["new.md"]


# ---------------------------------------------------------------- a full disk (a real, tiny tmpfs)
_FILL_AND_INDEX = textwrap.dedent("""
    import shutil, sys
    from pathlib import Path
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from rag.base.errors import StoreError
    from rag.compose.knowledge_base import KnowledgeBase

    mount, corpus, cache = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "cache"
    kb = KnowledgeBase("docs", mount / "store", embedding=DeterministicFakeEmbedding(size=64), cache=cache)
    kb.add_documents(str(corpus / "doc0.md"))
    filler = mount / "filler"
    filler.write_bytes(b"x" * max(0, shutil.disk_usage(mount).free - 16384))
    try:
        kb.add_documents(str(corpus))
        print("FULL-DISK: no error")
    except StoreError as exc:
        print("FULL-DISK:", exc)
    filler.unlink()
    kb = KnowledgeBase("docs", mount / "store", embedding=DeterministicFakeEmbedding(size=64), cache=cache)
    report = kb.add_documents(str(corpus))
    records = kb.list_documents()
    ids = sorted(c for r in records for c in r.chunk_ids)
    print("RERUN:", len(records), kb.count(), ids == sorted(kb.chunks.collection.get(include=[])["ids"]),
          len(report.added) + len(report.unchanged) + len(report.updated))
""")


@pytest.mark.skipif(not private_tmpfs_available(), reason="needs unshare -rm to mount a private tmpfs")
@pytest.mark.parametrize("cache", ["cache", "nocache"])
def test_full_disk_is_a_store_error_naming_the_cause_and_the_rerun_completes(tmp_path, cache):
    _corpus(tmp_path / "corpus", 12, words=1500)
    mount = tmp_path / "mnt"
    mount.mkdir()
    (tmp_path / "run.py").write_text(_FILL_AND_INDEX)
    command = (f"mount -t tmpfs -o size=48m tmpfs {mount} && "
               f"{sys.executable} {tmp_path / 'run.py'} {mount} {tmp_path / 'corpus'} {cache}")
    done = subprocess.run(["unshare", "-rm", "sh", "-c", command], env=_ENV, cwd=ROOT, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)
    assert "is full" in lines["FULL-DISK"] and "Free some space" in lines["FULL-DISK"], lines
    assert "cannot rollback" not in lines["FULL-DISK"]
    records, chunks, consistent, documents = lines["RERUN"].split()
    assert (records, consistent, documents) == ("12", "True", "12") and int(chunks) > 12
