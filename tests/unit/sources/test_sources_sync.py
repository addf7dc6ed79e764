"""`KnowledgeBase.sync(source)`: adds new items, replaces changed ones, deletes vanished ones, does nothing otherwise.

A real knowledge base on disk (Chroma, records, lock) and an in-memory `Source`; the embedder is a
counting fake, so "embeds 0 chunks" is counted, not inferred.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding
from source_helpers import CountingEmbedding, DictSource, chunk_sources

from rag.base.errors import ConfigError
from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.folder_source import FolderSource
from rag.sources.base import Access, IncompleteListing, SourceItem
from rag.base.acl import group_key, user_key

TEXTS = {f"item{n}": f"Item {n} says that the number {n} follows {n - 1}." for n in range(6)}

def _acl(meta, kind: str) -> set[str]:
    """The flattened permission keys of one kind ("u" users, "g" groups) a chunk carries (rag.base.acl)."""
    return {k for k, v in meta.items() if k.startswith(f"acl_{kind}_") and v is True}



def test_first_sync_adds_every_item_and_a_second_fetches_and_embeds_nothing(kb, counting):
    source = DictSource(dict(TEXTS))
    first = kb.sync(source)
    assert sorted(first.added) == sorted(source.prefix + k for k in TEXTS)
    assert counting.texts and first.embedded == len(counting.texts)
    source.fetched.clear()
    counting.texts.clear()
    second = kb.sync(source)
    assert (second.added, second.updated, second.deleted, second.embedded) == ([], [], [], 0)
    assert len(second.unchanged) == len(TEXTS)
    assert source.fetched == [] and counting.texts == []   # not even fetched


def test_a_changed_item_is_fetched_and_re_embedded_alone(kb, counting):
    source = DictSource(dict(TEXTS))
    kb.sync(source)
    before = {s: n for s, n in _chunks_per_source(kb).items()}
    source.texts["item3"] = "Item three now talks about something else entirely."
    source.fetched.clear()
    counting.texts.clear()
    report = kb.sync(source)
    assert report.updated == [source.prefix + "item3"] and source.fetched == ["item3"]
    assert counting.texts and all("something else" in t for t in counting.texts)
    after = _chunks_per_source(kb)
    assert after == before   # one chunk per item still, nothing duplicated
    assert any("something else" in d.page_content for d in kb.get_documents({"source": source.prefix + "item3"}))


def test_a_vanished_item_is_deleted_with_its_chunks(kb):
    source = DictSource(dict(TEXTS))
    kb.sync(source)
    del source.texts["item2"]
    report = kb.sync(source)
    assert report.deleted == [source.prefix + "item2"] and report.chunks_deleted >= 1
    assert source.prefix + "item2" not in chunk_sources(kb)
    assert kb.get_documents({"source": source.prefix + "item2"}) == []


def test_deletion_stays_under_the_source_prefix(kb, tmp_path):
    other = DictSource({"keep": "Another source's item stays."}, prefix="mem://other/")
    kb.sync(other)
    kb.add_documents(str(_folder(tmp_path)))
    source = DictSource(dict(TEXTS))
    kb.sync(source)
    source.texts.clear()
    report = kb.sync(source)
    assert len(report.deleted) == len(TEXTS)
    kept = set(chunk_sources(kb))
    assert "mem://other/keep" in kept and any(s.endswith("a.md") for s in kept)


def test_an_item_that_fails_is_skipped_with_its_reason_and_the_run_goes_on(kb):
    source = DictSource(dict(TEXTS))
    source.errors["item1"] = "response over the size limit"
    source.bad_keys["../../etc/passwd"] = "key '../../etc/passwd' is a path traversal"
    report = kb.sync(source)
    assert len(report.added) == len(TEXTS) - 1
    reasons = {s.path: s.reason for s in report.skipped}
    assert "response over the size limit" in reasons[source.prefix + "item1"]
    assert "path traversal" in reasons[source.prefix + "../../etc/passwd"]
    # once it can be fetched, the next run takes it
    del source.errors["item1"]
    assert kb.sync(source).added == [source.prefix + "item1"]


def test_a_failing_item_keeps_its_indexed_version(kb):
    source = DictSource(dict(TEXTS))
    kb.sync(source)
    source.texts["item1"] = "Changed but unreachable."
    source.errors["item1"] = "HTTP 503"
    report = kb.sync(source)
    assert report.deleted == [] and len(report.skipped) == 1
    assert kb.get_documents({"source": source.prefix + "item1"})[0].page_content.startswith("Item 1")


class _Cut(DictSource):
    """Lists two items, then stops: a listing that could not finish."""

    def items(self):
        listed = super().items()
        yield next(listed)
        yield next(listed)
        raise IncompleteListing("mem://box/: listing not finished within max_seconds=1")


def test_an_incomplete_listing_deletes_nothing(kb):
    kb.sync(DictSource(dict(TEXTS)))
    report = kb.sync(_Cut(dict(TEXTS)))
    assert report.deleted == [] and len(report.unchanged) == 2
    assert "nothing deleted" in report.skipped[0].reason
    assert len(set(chunk_sources(kb))) == len(TEXTS)


def test_items_read_as_files_go_through_the_loader_of_their_suffix(kb):
    source = DictSource({"guide": "FILE:# The guide\n\nInstall it with pip and run rag index.\n"})
    report = kb.sync(source)
    assert report.added == ["mem://box/guide"]
    chunk = kb.get_documents()[0]
    assert chunk.metadata["source"] == "mem://box/guide"
    assert chunk.metadata["title"] == "The guide" and chunk.metadata["file_type"] == "md"


def test_access_travels_to_every_chunk_and_a_change_of_access_re_embeds_nothing(kb, counting):
    source = DictSource(dict(TEXTS), access={"item0": Access(users=("ann",), groups=("eng",))})
    kb.sync(source)
    chunk = kb.get_documents({"source": source.prefix + "item0"})[0]
    assert _acl(chunk.metadata, "u") == {user_key("ann")} and _acl(chunk.metadata, "g") == {group_key("eng")}
    assert chunk.metadata["acl_public"] is False
    assert not _acl(kb.get_documents({"source": source.prefix + "item1"})[0].metadata, "u")
    source.access["item0"] = Access(groups=("eng", "ops"))
    counting.texts.clear()
    report = kb.sync(source)
    assert report.updated == [source.prefix + "item0"] and report.embedded == 0   # (the embedding cache)
    chunk = kb.get_documents({"source": source.prefix + "item0"})[0]
    assert _acl(chunk.metadata, "g") == {group_key("eng"), group_key("ops")}


def test_an_access_map_applies_to_items_the_source_says_nothing_about(kb):
    source = DictSource(dict(TEXTS))
    source.access_map = {"mem://box/item[01]": Access(public=True)}
    kb.sync(source)
    assert kb.get_documents({"source": "mem://box/item1"})[0].metadata["acl_public"] is True
    assert "acl_public" not in kb.get_documents({"source": "mem://box/item2"})[0].metadata


class _Interrupt(BaseException):
    """A kill in the middle of a run (not an Exception: nothing catches it on the way out)."""


class _DyingEmbedding(CountingEmbedding):
    def __init__(self, die_after: int) -> None:
        super().__init__()
        self.die_after = die_after

    def embed_documents(self, texts):
        if len(self.texts) + len(texts) > self.die_after:
            raise _Interrupt()
        return super().embed_documents(texts)


def test_a_run_killed_in_the_middle_is_completed_by_the_next_with_nothing_duplicated(tmp_path):
    # 6,000 one-chunk items: a first group of 5,000 is written and committed, the run dies in the second
    texts = {f"doc{n:04d}": f"Document {n} holds the word w{n} and nothing else." for n in range(6000)}
    source = DictSource(texts)
    dying = KnowledgeBase("sources", tmp_path / "store", embedding=_DyingEmbedding(die_after=5500))
    with pytest.raises(_Interrupt):
        dying.sync(source)
    partial = dying.count()
    assert 0 < partial < len(texts)
    states = {r.state for r in dying.records.all().values()}
    assert states == {"ok", "pending"}   # the second group's records say it was not finished
    dying.close()
    again = KnowledgeBase("sources", tmp_path / "store", embedding=_DyingEmbedding(die_after=10**9))
    report = again.sync(source)
    assert len(report.added) == len(texts) - partial and len(report.unchanged) == partial
    assert report.chunks_added == len(texts) - partial and report.embedded < len(texts) - partial   # (cache)
    assert chunk_sources(again) == sorted(source.prefix + k for k in texts)   # each once
    assert again.sync(source).embedded == 0


def test_sync_refuses_what_is_not_a_source(kb):
    with pytest.raises(ConfigError, match="expected a rag.sources.Source"):
        kb.sync("s3://bucket/prefix")


def test_a_folder_source_is_the_folder_path_of_add_documents(kb, tmp_path, counting):
    folder = _folder(tmp_path)
    kb.add_documents(str(folder))
    counting.texts.clear()
    report = kb.sync(FolderSource(folder))
    assert report.embedded == 0 and len(report.unchanged) == 2 and report.added == []
    (folder / "b.md").unlink()
    report = kb.sync(FolderSource(folder))
    assert [p.rsplit("/", 1)[-1] for p in report.deleted] == ["b.md"]
    assert [item.name for item in FolderSource(folder).items()] == ["a.md"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.dictionaries(st.sampled_from([f"k{n}" for n in range(8)]),
                                      st.sampled_from(["alpha text", "beta text", "gamma text", "delta"]),
                                      max_size=8), min_size=1, max_size=4))
def test_after_any_sequence_of_syncs_the_store_holds_exactly_the_last_listing(tmp_path_factory, steps):
    kb = KnowledgeBase("sources", tmp_path_factory.mktemp("seq"), embedding=DeterministicFakeEmbedding(size=8))
    source = DictSource({})
    for texts in steps:
        source.texts = dict(texts)
        kb.sync(source)
        held = {d.metadata["source"]: d.page_content for d in kb.get_documents()}
        assert held == {source.prefix + k: v for k, v in texts.items()}
    assert kb.sync(source).changed is False


def test_a_source_item_digest_changes_with_version_access_and_metadata():
    base = SourceItem("x", version="1")
    assert base.digest() != SourceItem("x", version="2").digest()
    assert base.digest() != SourceItem("x", version="1", access=Access(public=True)).digest()
    assert base.digest() != SourceItem("x", version="1", metadata={"a": 1}).digest()
    assert base.digest() == SourceItem("y", version="1").digest()


def _chunks_per_source(kb: KnowledgeBase) -> dict[str, int]:
    counts: dict[str, int] = {}
    for source in chunk_sources(kb):
        counts[source] = counts.get(source, 0) + 1
    return counts


def _folder(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir(exist_ok=True)
    (folder / "a.md").write_text("# A\n\nThe first file.\n")
    (folder / "b.md").write_text("# B\n\nThe second file.\n")
    return folder


_KILLED_SCRIPT = '''
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from source_helpers import DictSource
from langchain_core.embeddings import DeterministicFakeEmbedding
from rag.compose.knowledge_base import KnowledgeBase

class Stalling(DeterministicFakeEmbedding):
    def embed_documents(self, texts):
        done = getattr(self, "done", 0) + len(texts)
        object.__setattr__(self, "done", done)
        if done > 5500:
            Path(sys.argv[2]).write_text("stalled")
            time.sleep(600)
        return super().embed_documents(texts)

texts = {f"doc{n:04d}": f"Document {n} holds the word w{n} and nothing else." for n in range(6000)}
KnowledgeBase("sources", sys.argv[1], embedding=Stalling(size=8)).sync(DictSource(texts))
'''


@pytest.mark.slow
def test_a_sync_killed_with_sigkill_is_completed_by_the_next(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    here = Path(__file__).parent
    marker = tmp_path / "stalled"
    env = {**os.environ, "PYTHONPATH": str(here.parents[2]), "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_SCRIPT, str(tmp_path / "store"), str(marker), str(here)],
                            env=env)
    try:
        for _ in range(1200):   # (the first group of 5,000 is written first: up to two minutes on a loaded machine)
            if marker.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert marker.exists(), "the sync never reached its second group"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()

    class Stalling(DeterministicFakeEmbedding):   # (the same model id as the killed run's)
        pass

    texts = {f"doc{n:04d}": f"Document {n} holds the word w{n} and nothing else." for n in range(6000)}
    kb = KnowledgeBase("sources", tmp_path / "store", embedding=Stalling(size=8))
    before = kb.count()
    report = kb.sync(DictSource(texts))
    assert 0 < before < len(texts) and len(report.added) == len(texts) - before
    assert chunk_sources(kb) == sorted(f"mem://box/{k}" for k in texts)   # every item once


def test_a_records_file_written_before_source_state_opens_and_keeps_its_rows(tmp_path):
    """Records gained `source_state` (what a source keeps per item between syncs): an older file gets the column."""
    import sqlite3

    from rag.indexing.records import DocumentRecord, RecordStore

    path = tmp_path / "records.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE documents (source TEXT PRIMARY KEY, doc_id TEXT NOT NULL, content_hash TEXT NOT NULL, "
                 "size INTEGER NOT NULL DEFAULT -1, mtime_ns INTEGER NOT NULL DEFAULT -1, chunk_ids TEXT NOT NULL "
                 "DEFAULT '[]', pages INTEGER NOT NULL DEFAULT 0, title TEXT NOT NULL DEFAULT '', summary TEXT NOT "
                 "NULL DEFAULT '', state TEXT NOT NULL DEFAULT 'ok', updated_at REAL NOT NULL DEFAULT 0)")
    conn.execute("INSERT INTO documents (source, doc_id, content_hash, chunk_ids) VALUES ('a.md', 'd1', 'h', '[\"c1\"]')")
    conn.commit()
    conn.close()
    records = RecordStore(path)
    assert records.get("a.md").chunk_ids == ["c1"] and records.get("a.md").source_state == ""
    records.put(DocumentRecord(source="https://x/p", doc_id="d2", content_hash="h2", source_state='{"etag":"e"}'))
    records.close()
    assert RecordStore(path).get("https://x/p").source_state == '{"etag":"e"}'
