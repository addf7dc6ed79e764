"""`build_index`: a one-call front door to the knowledge base's ingest path."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import ConfigError
from rag.compose.build import build_index
from rag.indexing.autocontext import AutoContext
from rag.indexing.chunking import TokenChunker
from rag.indexing.tags import KeywordTagger, tag_filter

FAKE = DeterministicFakeEmbedding(size=16)


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "install.md").write_text("# Install\n\nRun pip install on Linux or macOS.\n\n# Usage\n\nCall rag index.")
    (root / "faq.txt").write_text("Questions about billing go to the billing team.")
    (root / "broken.pdf").write_bytes(b"%PDF junk")
    return root


def test_default_flow_loads_chunks_embeds_and_returns_a_searchable_resource(folder, caplog):
    res = build_index(folder, name="docs", embedding=FAKE)
    docs = res.retrieve("Call rag index.", search_kwargs={"k": 10})
    assert res.name == "docs" and {d.metadata["title"] for d in docs} == {"Install", "faq"}
    assert any("rag index" in d.page_content for d in docs)


def test_default_search_is_hybrid_and_dense_is_one_name_away(folder):
    hybrid = build_index(folder, embedding=FAKE)
    dense = build_index(folder, embedding=FAKE, search="dense")
    assert type(hybrid.retriever).__name__ == "HybridRetriever"
    assert type(dense.retriever).__name__ == "KnowledgeBaseRetriever"
    with pytest.raises(ConfigError, match="unknown search mode 'fuzzy'; valid: hybrid, dense, bm25"):
        build_index(folder, embedding=FAKE, search="fuzzy")


def test_chunker_kwargs_reach_the_chunker(folder):
    (folder / "guide.txt").write_text(" ".join(f"Step {i}: configure the billing export for region {i}."
                                               for i in range(40)))
    small = build_index(folder, embedding=FAKE, chunker_kwargs={"chunk_size": 16, "chunk_overlap": 0}, search="bm25")
    big = build_index(folder, embedding=FAKE, chunker=TokenChunker(chunk_size=200), search="bm25")
    assert len(small.retriever.index.get_documents()) > len(big.retriever.index.get_documents())
    with pytest.raises(ConfigError, match="either chunker or chunker_kwargs"):
        build_index(folder, embedding=FAKE, chunker=TokenChunker(), chunker_kwargs={"chunk_size": 16})


def test_tagger_step_makes_tags_filterable(folder):
    res = build_index(folder, embedding=FAKE, autocontext=AutoContext(enabled=False),
                      tagger=KeywordTagger(vocabulary=["billing", "linux"]))
    docs = res.retrieve("anything", search_kwargs={"k": 10, "filter": tag_filter("billing")})
    assert [d.metadata["source"].rsplit("/", 1)[-1] for d in docs] == ["faq.txt"]


def test_persistent_store_is_updated_without_duplicates(folder, tmp_path):
    first = build_index(folder, name="kb", embedding=FAKE, store=tmp_path / "store", search="bm25")
    count = len(first.retriever.index.get_documents())
    (folder / "faq.txt").write_text("Questions about refunds go to the billing team.")
    second = build_index(folder, name="kb", embedding=FAKE, store=tmp_path / "store", search="bm25")
    texts = [d.page_content for d in second.retriever.index.get_documents()]
    assert len(texts) == count > 0
    assert any("refunds" in t for t in texts) and not any("Questions about billing" in t for t in texts)


def test_in_memory_indexes_do_not_share_documents():
    a = build_index([Document(page_content="alpha", metadata={"source": "a"})], name="same", embedding=FAKE)
    b = build_index([Document(page_content="beta", metadata={"source": "b"})], name="same", embedding=FAKE)
    assert [d.page_content for d in a.retrieve("x", search_kwargs={"k": 5})] == ["alpha"]
    assert [d.page_content for d in b.retrieve("x", search_kwargs={"k": 5})] == ["beta"]


def test_nothing_readable_is_a_clear_error(tmp_path):
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ConfigError, match="no chunks to index"):
        build_index(tmp_path, embedding=FAKE)


def test_wrong_step_types_are_rejected(folder):
    with pytest.raises(ConfigError, match="chunker must be a TokenChunker"):
        build_index(folder, chunker="token", embedding=FAKE)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="autocontext must be"):
        build_index(folder, autocontext="yes", embedding=FAKE)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="tagger must be"):
        build_index(folder, tagger="yes", embedding=FAKE)  # type: ignore[arg-type]
