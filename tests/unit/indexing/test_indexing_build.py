from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.core.errors import ConfigError
from rag.indexing.build import ChromaStore, Embedder, FileChunker, build_index
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


def test_default_flow_loads_chunks_embeds_and_returns_a_searchable_resource(folder):
    skipped: list = []
    res = build_index(folder, name="docs", chunker=FileChunker(skipped=skipped), embedder=FAKE)
    docs = res.retrieve("Call rag index.", search_kwargs={"k": 10})
    assert res.name == "docs" and {d.metadata["title"] for d in docs} == {"Install", "faq"}
    assert {d.metadata.get("section") for d in docs if d.metadata["title"] == "Install"} == {"Install", "Usage"}
    assert [s.path.rsplit("/", 1)[-1] for s in skipped] == ["broken.pdf"]


def test_step_kwargs_reach_their_step(folder):
    seen = {}

    def chunker(sources, **kwargs):
        seen["chunker"] = kwargs
        return FileChunker()(sources, **kwargs)

    def embedder(chunks, **kwargs):
        seen["embedder"] = kwargs
        return FAKE.embed_documents([c.page_content for c in chunks])

    embedder.embedding = FAKE
    build_index([folder], chunker=chunker, embedder=embedder, chunker_kwargs={"chunk_size": 32, "chunk_overlap": 0},
                embedder_kwargs={"note": 1})
    assert seen == {"chunker": {"chunk_size": 32, "chunk_overlap": 0}, "embedder": {"note": 1}}


def test_tagger_step_makes_tags_filterable(folder):
    res = build_index(folder, embedder=Embedder(FAKE, autocontext=False),
                      tagger=KeywordTagger(vocabulary=["billing", "linux"]))
    docs = res.retrieve("anything", search_kwargs={"k": 10, "filter": tag_filter("billing")})
    assert [d.metadata["source"].rsplit("/", 1)[-1] for d in docs] == ["faq.txt"]


def test_persistent_store_is_rebuilt_without_duplicates(folder, tmp_path):
    first = build_index(folder, name="kb", embedder=FAKE, store=tmp_path / "chroma")
    count = first.retriever.collection.count()
    second = build_index(folder, name="kb", embedder=FAKE, store=ChromaStore(tmp_path / "chroma"))
    assert second.retriever.collection.count() == count > 0


def test_in_memory_indexes_do_not_share_documents():
    a = build_index([Document(page_content="alpha", metadata={"source": "a"})], name="same", embedder=FAKE)
    b = build_index([Document(page_content="beta", metadata={"source": "b"})], name="same", embedder=FAKE)
    assert [d.page_content for d in a.retrieve("x", search_kwargs={"k": 5})] == ["alpha"]
    assert [d.page_content for d in b.retrieve("x", search_kwargs={"k": 5})] == ["beta"]


def test_nothing_readable_is_a_clear_error(tmp_path):
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ConfigError, match="no chunks to index"):
        build_index(tmp_path, embedder=FAKE)


def test_wrong_step_types_are_rejected():
    with pytest.raises(ConfigError, match="chunker must be callable"):
        build_index([], chunker="token", embedder=FAKE)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="autocontext must be"):
        Embedder(FAKE, autocontext="yes")  # type: ignore[arg-type]


def test_embedder_with_autocontext_embeds_the_header():
    chunk = Document(page_content="Revenue grew.", metadata={"doc_id": "d", "title": "ACME_2023"})
    (text,) = Embedder(FAKE).texts([chunk])
    assert text.startswith("ACME 2023\n") and text.endswith("\n\nRevenue grew.")
