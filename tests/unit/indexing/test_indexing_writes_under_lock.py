"""Nothing is written outside the writer lock: opening a knowledge base writes no file, a write waits its turn."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag import KnowledgeBase
from rag.base.errors import StoreError
from rag.indexing.locking import WriterLock


def _snapshot(directory: Path) -> dict[str, tuple[str, int]]:
    """Every file under `directory`: its bytes' hash and modification time."""
    return {str(p.relative_to(directory)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(directory.rglob("*")) if p.is_file()}


def _filled(directory: Path) -> KnowledgeBase:
    kb = KnowledgeBase("docs", directory, embedding=DeterministicFakeEmbedding(size=16), description="first")
    kb.add_documents([Document(page_content="Paris is in France.", metadata={"source": "geo"})])
    kb.close()
    return kb


@pytest.mark.parametrize("options", [{}, {"description": "another description"},
                                     {"embedding": DeterministicFakeEmbedding(size=16), "lock_timeout": 5.0}])
def test_opening_an_existing_knowledge_base_writes_no_file(tmp_path, options):
    _filled(tmp_path)
    before = _snapshot(tmp_path)
    kb = KnowledgeBase("docs", tmp_path, **options)
    again = KnowledgeBase.open("docs", tmp_path, **options)
    assert kb.exists and again.exists
    assert _snapshot(tmp_path) == before


def test_opening_a_new_knowledge_base_writes_no_file(tmp_path):
    kb = KnowledgeBase("fresh", tmp_path / "store", embedding=DeterministicFakeEmbedding(size=16), description="new")
    assert not kb.exists
    assert not (tmp_path / "store").exists()


def test_a_new_description_is_saved_by_the_next_write_under_the_lock(tmp_path):
    _filled(tmp_path)
    manifest = tmp_path / "kb" / "docs" / "manifest.json"
    with WriterLock(tmp_path):   # another writer is at work: opening must neither wait nor write
        kb = KnowledgeBase("docs", tmp_path, description="second")
        assert json.loads(manifest.read_text())["description"] == "first"
        assert kb.as_resource(search="dense").description == "second"   # (in memory already)
        with pytest.raises(StoreError, match="only one writer at a time"):
            kb.create()
        assert json.loads(manifest.read_text())["description"] == "first"
    report = kb.add_documents([Document(page_content="Paris is in France.", metadata={"source": "geo"})])
    assert report.unchanged == ["geo"]
    assert json.loads(manifest.read_text())["description"] == "second"
    assert KnowledgeBase("docs", tmp_path).manifest.description == "second"


def test_creating_waits_for_the_writer_lock(tmp_path):
    kb = KnowledgeBase("docs", tmp_path, embedding=DeterministicFakeEmbedding(size=16))
    with WriterLock(tmp_path):
        with pytest.raises(StoreError, match="only one writer at a time"):
            kb.create()
        assert not kb.exists
    assert kb.create().exists
