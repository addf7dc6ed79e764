"""One knowledge base class, one write path: every front door that persists documents writes through
`rag.indexing.write_path` under the knowledge base's writer lock, never around it."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag import KnowledgeBase, Resource
from rag.base.errors import StoreError
from rag.evaluation.financebench import FinanceBenchData
from rag.evaluation.financebench_corpus import corpus_chunks
from rag.indexing.kb_parts import IndexTarget
from rag.indexing.locking import WriterLock
from rag.indexing.sync import Syncer
from rag.indexing.write_path import index_sources
from rag.retrieval.hybrid import HybridRetriever
from rag.stores.partitioned import PartitionedChroma
from rag.testing.financebench import write_synthetic_financebench

EMB = DeterministicFakeEmbedding(size=16)
DOCS = [Document(page_content="Paris is in France.", metadata={"source": "geo", "doc_name": "geo"}),
        Document(page_content="Rome is in Italy.", metadata={"source": "it", "doc_name": "it"})]


def test_the_knowledge_base_is_one_class_that_owns_its_storage_and_syncer(tmp_path: Path) -> None:
    assert KnowledgeBase.__mro__ == (KnowledgeBase, object)
    assert importlib.util.find_spec("rag.indexing.knowledge_base") is None   # no second class below it
    kb = KnowledgeBase("notes", tmp_path, embedding=EMB)
    assert isinstance(kb.storage, IndexTarget) and isinstance(kb.syncer, Syncer)
    assert kb.syncer.target is kb.storage
    # the storage is parts and reads, not a knowledge base: writing is the write path's job
    assert not any(hasattr(IndexTarget, m) for m in ("add_documents", "update_document", "delete_document",
                                                     "as_resource", "as_retriever"))
    kb.add_documents(DOCS)
    assert [r.source for r in kb.storage.list_documents()] == ["geo", "it"] == [r.source for r in kb.list_documents()]


def _doors(tmp_path: Path) -> dict[str, Callable[[Path], Any]]:
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nParis is in France.\n")
    fb = FinanceBenchData.load(write_synthetic_financebench(tmp_path / "fb"))
    return {
        "KnowledgeBase.add_documents": lambda d: KnowledgeBase("kb", d, embedding=EMB).add_documents(DOCS),
        "Resource.from_texts": lambda d: Resource.from_texts("notes", ["Paris is in France."], embedding=EMB,
                                                             persist_directory=d),
        "Resource.from_documents": lambda d: Resource.from_documents("notes", DOCS, embedding=EMB,
                                                                     persist_directory=d),
        "Resource.from_directory": lambda d: Resource.from_directory("notes", folder, embedding=EMB,
                                                                     persist_directory=d),
        "HybridRetriever.from_documents": lambda d: HybridRetriever.from_documents(DOCS, embedding=EMB,
                                                                                   persist_directory=d),
        "index_sources": lambda d: index_sources(IndexTarget("raw", d, embedding=EMB), DOCS),
        "PartitionedChroma through a knowledge base": lambda d: KnowledgeBase(
            "parts", d, embedding=EMB, store=PartitionedChroma("parts", EMB, partition_key="source")).add_documents(DOCS),
        "FinanceBench corpus": lambda d: corpus_chunks(fb, cache_dir=d, chunk_size=300, embeddings=EMB,
                                                       progress=lambda _msg: None),
    }


def test_every_front_door_that_persists_waits_for_the_writer_lock_and_writes_nothing_without_it(tmp_path: Path):
    for name, door in _doors(tmp_path).items():
        store = tmp_path / name.replace(" ", "-")
        with WriterLock(store):   # another process is writing this directory
            with pytest.raises(StoreError, match="only one writer at a time"):
                door(store)
            assert sorted(p.name for p in store.rglob("*")) == ["write.lock"], name   # nothing else written
        door(store)   # once the lock is free, the same call writes
        assert (store / "kb").is_dir(), name
