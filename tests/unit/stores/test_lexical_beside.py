"""Knowledge bases on a Milvus collection made elsewhere or by an earlier version (real engine: Milvus Lite) keep
their lexical index in SQLite FTS5 beside their records: written with the chunks, never rebuilt after a change, the
filter inside the query, and a knowledge base indexed before it existed is filled once from its store. (A collection
or table rag created: the engine's own index, tests/unit/stores/test_milvus_lexical.py, test_qdrant_lexical.py,
test_lance_lexical.py.)"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.kb_parts import LEXICAL_FILE
from rag.stores.fts_index import FTSIndex
from rag.stores.lexical_chunks import BESIDE, LexicalChunks
from rag.stores.milvus import open_store

EMB = DeterministicFakeEmbedding(size=16)
_labels = (f"beside{i}" for i in itertools.count())
WORDS = "revenue costs growth risk margin cash debt income".split()


def _docs(start: int = 0, n: int = 12) -> list[Document]:
    return [Document(page_content=f"{WORDS[i % len(WORDS)]} note {i} about {WORDS[(3 * i) % len(WORDS)]}",
                     metadata={"source": f"s{i}", "team": ["a", "b"][i % 2]}) for i in range(start, start + n)]


def _made_elsewhere(tmp_path: Path):
    """A Milvus collection langchain-milvus made at its first write (as rag did before 2026-11-29): no BM25."""
    from langchain_milvus import Milvus

    label = next(_labels)
    theirs = Milvus(EMB, connection_args={"uri": str(tmp_path / "milvus.db")}, collection_name=label,
                    metadata_field="metadata", index_params={"metric_type": "COSINE", "index_type": "FLAT"},
                    auto_id=False, primary_field="pk")
    theirs.add_texts(["seed"], ids=["x" * 32])
    theirs.delete(["x" * 32])
    return open_store(label, EMB, uri=str(tmp_path / "milvus.db"))   # (opened, not created)


@pytest.fixture(params=sorted(BESIDE - {"qdrant", "lancedb"}))   # (theirs made elsewhere: test_*_lexical.py)
def kb(request, tmp_path: Path) -> KnowledgeBase:
    store = _made_elsewhere(tmp_path)
    kb = KnowledgeBase("notes", tmp_path / "kbdir", embedding=EMB, store=store)
    kb.add_documents(_docs())
    return kb


def test_the_lexical_index_is_fts5_beside_the_records_written_with_the_chunks(kb: KnowledgeBase):
    chunks = kb.storage.chunks
    assert isinstance(chunks, LexicalChunks) and isinstance(chunks.lexical, FTSIndex)
    assert chunks.lexical.path == kb.home / LEXICAL_FILE and chunks.lexical.count() == chunks.count() == 12
    retriever = kb.as_resource(search="bm25").retriever
    assert {d.metadata["source"] for d in retriever.invoke("margin", k=20)} == {
        d.metadata["source"] for d in _docs() if "margin" in d.page_content}
    kb.add_documents([Document(page_content="a note on dividends", metadata={"source": "new", "team": "a"})])
    assert chunks.lexical.count() == 13
    assert [d.metadata["source"] for d in kb.as_resource(search="bm25").retriever.invoke("dividends", k=3)] == ["new"]
    assert not list(kb.home.glob("bm25*"))   # no in-process index was built or saved


def test_the_filter_runs_inside_the_lexical_query(kb: KnowledgeBase):
    index = kb.storage.chunks.lexical
    hits = index.search("note", k=50, filter={"team": "b"})
    assert hits and {d.metadata["team"] for d, _ in hits} == {"b"}
    assert len(hits) == sum(1 for d in _docs() if d.metadata["team"] == "b")


def test_a_knowledge_base_indexed_before_gets_its_index_once(kb: KnowledgeBase, caplog):
    lexical = kb.storage.chunks.lexical
    lexical.clear()   # what a knowledge base indexed before this index existed looks like
    reopened = KnowledgeBase("notes", kb.directory, embedding=EMB, store=kb.storage.chunks.inner.store)
    with caplog.at_level(logging.INFO, logger="rag.indexing.lexical_sync"):
        hits = reopened.as_resource(search="bm25").retriever.invoke("revenue", k=20)
    assert "12 chunk(s) indexed once" in caplog.text
    assert reopened.storage.chunks.lexical.count() == 12 and {d.metadata["source"] for d in hits} == {
        d.metadata["source"] for d in _docs() if "revenue" in d.page_content}
