"""Loaders by suffix and chunkers by file type (`rag.indexing.formats`): a user adds a format in Python."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import ConfigError
from rag.indexing.chunking import PassthroughChunker
from rag.indexing.formats import chunk_documents, loader_for
from rag.indexing.kb_parts import IndexTarget
from rag.indexing.loaders import (
    SUPPORTED_SUFFIXES,
    load_directory,
    load_file,
    register_chunker,
    register_loader,
    supported_suffixes,
    unregister_chunker,
    unregister_loader,
)
from rag.indexing.write_path import index_sources


def load_csv(path: Path, *, limits, notes) -> list[Document]:
    header, *rows = path.read_text().splitlines()
    return [Document(page_content=f"{header}\n{row}") for row in rows]


class RowChunker:
    def settings(self) -> dict:
        return {"type": "rows"}

    def split_documents(self, docs):
        return [Document(page_content=d.page_content, metadata={**d.metadata, "chunk_index": n, "row": True})
                for n, d in enumerate(docs)]


@pytest.fixture
def csv_format():
    register_loader(".csv", load_csv)
    register_chunker("csv", RowChunker())
    yield
    unregister_loader(".csv")
    unregister_chunker("csv")


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    (tmp_path / "prices.csv").write_text("item,price\ntea,3\ncoffee,4\n")
    (tmp_path / "readme.md").write_text("# Shop\n\nWe sell tea and coffee.\n")
    return tmp_path


def test_a_registered_loader_reads_its_suffix_and_gets_the_provenance_filled_in(csv_format, corpus):
    docs = load_file(corpus / "prices.csv")
    assert [d.page_content for d in docs] == ["item,price\ntea,3", "item,price\ncoffee,4"]
    assert docs[0].metadata == {"source": str(corpus / "prices.csv"), "title": "prices", "file_type": "csv"}
    assert ".csv" in supported_suffixes() and ".csv" not in SUPPORTED_SUFFIXES


def test_without_a_loader_the_suffix_is_unsupported_and_says_what_is(corpus):
    report = load_directory(corpus)
    assert report.unsupported == [str(corpus / "prices.csv")]
    assert loader_for(".csv") is None


def test_a_knowledge_base_indexes_the_new_format_with_its_chunker(csv_format, corpus):
    kb = IndexTarget("shop", None, embedding=DeterministicFakeEmbedding(size=16))
    report = index_sources(kb, [corpus])   # the one write path, as every front door calls it
    assert len(report.added) == 2 and not report.skipped
    rows = kb.get_documents(filter={"file_type": "csv"})
    assert [(c.metadata["chunk_index"], c.metadata["row"]) for c in rows] == [(0, True), (1, True)]
    assert all("row" not in c.metadata for c in kb.get_documents(filter={"file_type": "md"}))


def test_a_loader_that_returns_no_documents_list_skips_the_file_with_the_reason(corpus):
    register_loader(".csv", lambda path, *, limits, notes: "not documents")
    try:
        report = load_directory(corpus)
    finally:
        unregister_loader(".csv")
    assert [s.path for s in report.skipped] == [str(corpus / "prices.csv")]
    assert "returned str, not a list of Documents" in report.skipped[0].reason


def test_a_chunker_that_does_not_number_its_chunks_is_a_clear_error():
    class Unnumbered(RowChunker):
        def split_documents(self, docs):
            return [Document(page_content=d.page_content, metadata=d.metadata) for d in docs]

    register_chunker("csv", Unnumbered())
    try:
        with pytest.raises(ConfigError, match="doc_id and an integer chunk_index"):
            chunk_documents(PassthroughChunker(), [Document(page_content="a", metadata={"file_type": "csv",
                                                                                          "doc_id": "d"})])
    finally:
        unregister_chunker("csv")


def test_chunk_order_is_kept_across_chunkers(csv_format):
    docs = [Document(page_content=t, metadata={"file_type": ft, "doc_id": t}) for t, ft in
            (("a", "md"), ("b", "csv"), ("c", "csv"), ("d", "txt"))]
    assert [c.page_content for c in chunk_documents(PassthroughChunker(), docs)] == ["a", "b", "c", "d"]


def test_a_builtin_suffix_is_replaced_only_on_purpose():
    with pytest.raises(ConfigError, match="replace=True"):
        register_loader(".pdf", load_csv)
    register_loader(".PDF", load_csv, replace=True)
    try:
        assert loader_for(".pdf") is load_csv
    finally:
        unregister_loader(".pdf")
    assert loader_for(".pdf") is not load_csv


#: the documented forms: a suffix is the part after a file's last dot, a file type the same without it
SUFFIX = re.compile(r"\.?[A-Za-z0-9][A-Za-z0-9_+-]{0,31}")
FILE_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+-]{0,31}")


@given(st.one_of(st.text(max_size=40), st.from_regex(SUFFIX, fullmatch=True), st.integers(), st.none(),
                 st.binary(max_size=4)))
def test_a_bad_suffix_or_file_type_is_a_config_error_never_a_registration(value):
    if isinstance(value, str) and SUFFIX.fullmatch(value):
        register_loader(value, load_csv, replace=True)
        assert loader_for("." + value.lstrip(".").lower()) is load_csv
        unregister_loader(value)
    else:
        with pytest.raises(ConfigError, match="suffix is one dot"):
            register_loader(value, load_csv)
    assert set(supported_suffixes()) == set(SUPPORTED_SUFFIXES)
    if not (isinstance(value, str) and FILE_TYPE.fullmatch(value)):
        with pytest.raises(ConfigError, match="file type"):
            register_chunker(value, RowChunker())


def test_an_object_without_the_protocol_is_refused():
    with pytest.raises(ConfigError, match="callable"):
        register_loader(".xyz", "load_xyz")
    with pytest.raises(ConfigError, match="split_documents"):
        register_chunker("xyz", object())
