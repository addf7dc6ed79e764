from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore

from rag import ConfigError, FilterError, KnowledgeBase, Resource

TEXTS = [f"Report number {i} about topic {i % 3}." for i in range(12)]
METAS = [{"year": 2015 + i, "topic": i % 3} for i in range(12)]


class ListRetriever(BaseRetriever):
    """A retriever that knows nothing about filters: returns its documents in order."""

    docs: list[Document]
    k: int = 4

    def _get_relevant_documents(self, query, *, run_manager):
        return self.docs[: self.k]


@pytest.fixture
def chroma_resource(fake_embedding):
    return Resource.from_texts("reports", TEXTS, metadatas=METAS, embedding=fake_embedding)


def test_empty_name_is_rejected(fake_embedding):
    with pytest.raises(ValueError, match="non-empty"):
        Resource.from_texts("  ", ["x"], embedding=fake_embedding)


def test_default_k_is_four(chroma_resource):
    assert len(chroma_resource.retrieve("report")) == 4


def test_chroma_filter_is_translated_and_k_holds(chroma_resource):
    docs = chroma_resource.retrieve("report", search_kwargs={"k": 3, "filter": {"year": {"$gt": 2020}, "topic": 1}})
    assert len(docs) == 2  # only years 2022 and 2025 have topic 1 after 2020
    assert all(d.metadata["year"] > 2020 and d.metadata["topic"] == 1 for d in docs)


def test_resource_defaults_apply_and_calls_override(fake_embedding):
    res = Resource.from_texts("r", TEXTS, metadatas=METAS, embedding=fake_embedding,
                              search_kwargs={"k": 2, "filter": {"topic": 0}})
    assert [d.metadata["topic"] for d in res.retrieve("x")] == [0, 0]
    assert len(res.retrieve("x", search_kwargs={"k": 3})) == 3
    assert {d.metadata["topic"] for d in res.retrieve("x", search_kwargs={"filter": {"topic": 2}})} == {2}


def test_in_memory_store_is_filtered_natively(fake_embedding):
    store = InMemoryVectorStore(fake_embedding)
    store.add_texts(TEXTS, metadatas=METAS)
    res = Resource.from_vectorstore("mem", store)
    assert type(res.retriever).__name__ == "NativeFilterRetriever"
    docs = res.retrieve("report", search_kwargs={"k": 3, "filter": {"topic": 2}})
    assert len(docs) == 3 and all(d.metadata["topic"] == 2 for d in docs)


def test_plain_retriever_is_paged_and_filtered_in_python():
    docs = [Document(page_content=t, metadata=m) for t, m in zip(TEXTS, METAS)]
    res = Resource.from_retriever("plain", ListRetriever(docs=docs))
    got = res.retrieve("q", search_kwargs={"k": 2, "filter": {"topic": 1}})
    assert [d.metadata["year"] for d in got] == [2016, 2019]


def test_unknown_search_kwarg_lists_valid_ones(chroma_resource):
    with pytest.raises(ConfigError, match="unknown key.*'kk'.*valid: max_chunks, k, filter"):
        chroma_resource.retrieve("x", search_kwargs={"kk": 3})


@pytest.mark.parametrize("k", [0, -1, "3", True, 2.5])
def test_k_must_be_a_positive_integer(chroma_resource, k):
    with pytest.raises(ConfigError, match="positive integer"):
        chroma_resource.retrieve("x", search_kwargs={"k": k})


def test_bad_filter_fails_before_searching(chroma_resource):
    with pytest.raises(FilterError, match=r"\$gtt"):
        chroma_resource.retrieve("x", search_kwargs={"filter": {"year": {"$gtt": 1}}})


def test_texts_and_metadatas_must_match(fake_embedding):
    with pytest.raises(ConfigError, match="2 texts but 1 metadatas"):
        Resource.from_texts("r", ["a", "b"], metadatas=[{}], embedding=fake_embedding)


def test_two_in_memory_resources_with_one_name_do_not_share_documents(fake_embedding):
    a = Resource.from_texts("same", ["alpha"], embedding=fake_embedding)
    b = Resource.from_texts("same", ["beta"], embedding=fake_embedding)
    assert [d.page_content for d in a.retrieve("x")] == ["alpha"]
    assert [d.page_content for d in b.retrieve("x")] == ["beta"]


def test_persistent_store_does_not_duplicate_on_reindex(tmp_path, fake_embedding):
    for _ in range(2):
        res = Resource.from_texts("p", TEXTS, metadatas=METAS, embedding=fake_embedding, persist_directory=tmp_path)
    assert KnowledgeBase.open("rag-p", tmp_path, embedding=fake_embedding).count() == len(TEXTS)
    assert len(res.retrieve("report", search_kwargs={"k": 20})) == len(TEXTS)


def test_a_persistent_resource_is_a_knowledge_base_that_reopens(tmp_path, fake_embedding):
    Resource.from_texts("reports", TEXTS, metadatas=METAS, embedding=fake_embedding, persist_directory=tmp_path)
    kb = KnowledgeBase.open("reports", tmp_path)   # its manifest names the embedding model
    assert len(kb.list_documents()) == len(TEXTS)
    docs = kb.as_resource(search="dense").retrieve("report", search_kwargs={"k": 3, "filter": {"topic": 1}})
    assert len(docs) == 3 and {d.metadata["topic"] for d in docs} == {1}
    assert {d.page_content for d in docs} <= set(TEXTS)   # stored as given: no AutoContext, no chunking


def test_cosine_space_is_set_explicitly(chroma_resource):
    col = chroma_resource.retriever.vectorstore._collection
    assert col.configuration_json["hnsw"]["space"] == "cosine"


def test_from_directory_loads_supported_files_and_skips_bad_ones(tmp_path, fake_embedding, caplog):
    (tmp_path / "a.md").write_text("# Title\n\nChroma stores vectors. It is local.")
    (tmp_path / "b.txt").write_text("Plain text about retrieval.")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "bin.txt").write_bytes(b"\x00\x01\x02binary")
    res = Resource.from_directory("dir", tmp_path, embedding=fake_embedding)
    sources = {d.metadata["source"].rsplit("/", 1)[-1] for d in res.retrieve("x", search_kwargs={"k": 10})}
    assert sources == {"a.md", "b.txt"}
    assert "empty.txt" in caplog.text and "bin.txt" in caplog.text


def test_from_directory_with_nothing_readable_is_an_error(tmp_path, fake_embedding):
    (tmp_path / "x.bin").write_bytes(b"\x00")
    with pytest.raises(ConfigError, match="no readable documents"):
        Resource.from_directory("dir", tmp_path, embedding=fake_embedding)


def test_a_skipped_symlink_is_logged_with_its_path_once(tmp_path, caplog):
    """`docs/notebooks: docs/notebooks: symlink ...` was the path twice: the reason already names the file."""
    import logging

    from langchain_core.embeddings import DeterministicFakeEmbedding

    from rag.compose.resource import Resource

    docs, outside = tmp_path / "docs", tmp_path / "notebooks"
    docs.mkdir()
    outside.mkdir()
    (docs / "a.md").write_text("# A\n\nSome text.")
    (outside / "b.md").write_text("# B\n\nOther text.")
    (docs / "notebooks").symlink_to(outside)
    with caplog.at_level(logging.WARNING, logger="rag"):
        Resource.from_directory("docs", docs, embedding=DeterministicFakeEmbedding(size=8),
                                persist_directory=tmp_path / "store")
    (line,) = [r.getMessage() for r in caplog.records if "symlink" in r.getMessage()]
    assert line.count(str(docs / "notebooks")) == 1 and line.startswith(f"skipped {docs / 'notebooks'}: symlink"), line
