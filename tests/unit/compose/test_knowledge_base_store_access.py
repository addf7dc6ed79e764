"""`KnowledgeBase.client` / `.collection` are deprecated: `kb.chunks` is the way to the chunks on every backend.

The two attributes keep working (they read the store's own, on the default backend) and warn; on another
backend `collection` is the `StoreError` it was and `client` None. Nothing in `rag/` reads them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore

from rag import KnowledgeBase
from rag.base.errors import StoreError
from rag.stores.chunk_store import ChunkStore

EMB = DeterministicFakeEmbedding(size=16)
DOC = Document(page_content="Paris is in France.", metadata={"source": "geo"})


def test_client_and_collection_warn_and_read_the_default_stores_own(tmp_path):
    kb = KnowledgeBase("notes", tmp_path, embedding=EMB)
    kb.add_documents([DOC])
    assert isinstance(kb.chunks, ChunkStore)
    with pytest.warns(DeprecationWarning, match=r"KnowledgeBase.collection is deprecated: use kb.chunks"):
        collection = kb.collection
    assert collection is kb.chunks.collection and collection.count() == kb.chunks.count() == kb.count()
    with pytest.warns(DeprecationWarning, match=r"KnowledgeBase.client is deprecated"):
        client = kb.client
    assert client is kb.chunks.client
    assert collection.name in [c.name for c in client.list_collections()]


def test_on_another_backend_collection_is_a_store_error_and_client_none(tmp_path):
    kb = KnowledgeBase("notes", tmp_path, embedding=EMB, store=InMemoryVectorStore(EMB))
    kb.add_documents([DOC])
    with pytest.warns(DeprecationWarning), pytest.raises(StoreError, match="keeps its chunks in inmemory"):
        _ = kb.collection
    with pytest.warns(DeprecationWarning):
        assert kb.client is None
    assert kb.chunks.count() == 1


def test_no_library_code_reads_the_deprecated_attributes():
    root = Path(__file__).resolve().parents[3] / "rag"
    uses = [f"{path.relative_to(root)}:{n}" for path in sorted(root.rglob("*.py"))
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if "kb.collection" in line or "kb.client" in line or ".knowledge_base.collection" in line]
    assert uses == []
