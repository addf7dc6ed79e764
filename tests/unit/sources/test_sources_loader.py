"""`LoaderSource` with two langchain-community loaders on local data (CSVLoader by row, DirectoryLoader by file)."""

from __future__ import annotations

import json

import pytest
from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document
from source_helpers import chunk_sources

from rag.base.errors import ConfigError
from rag.sources.loader import LoaderSource
from rag.base.acl import group_key, user_key

def _acl(meta, kind: str) -> set[str]:
    """The flattened permission keys of one kind ("u" users, "g" groups) a chunk carries (rag.base.acl)."""
    return {k for k, v in meta.items() if k.startswith(f"acl_{kind}_") and v is True}




@pytest.fixture
def community():
    return pytest.importorskip("langchain_community.document_loaders", reason="needs langchain-community (the dev extra)")


def _csv(path, rows: list[tuple[str, str]]) -> None:
    path.write_text("name,description\n" + "".join(f"{n},{d}\n" for n, d in rows))


def test_csv_rows_are_items_and_one_changed_row_re_embeds_only_its_chunk(kb, tmp_path, counting, community):
    path = tmp_path / "products.csv"
    _csv(path, [("anvil", "a heavy iron block"), ("rope", "twenty metres of hemp"), ("lamp", "an oil lamp")])
    source = LoaderSource(community.CSVLoader(str(path)), key="row", name="products")
    report = kb.sync(source)
    assert sorted(report.added) == ["loader:products:0", "loader:products:1", "loader:products:2"]
    counting.texts.clear()
    assert kb.sync(source).embedded == 0
    _csv(path, [("anvil", "a heavy iron block"), ("rope", "fifty metres of nylon"), ("lamp", "an oil lamp")])
    report = kb.sync(source)
    assert report.updated == ["loader:products:1"] and report.embedded == 1
    assert all("nylon" in t for t in counting.texts)
    _csv(path, [("anvil", "a heavy iron block")])
    assert sorted(kb.sync(source).deleted) == ["loader:products:1", "loader:products:2"]


def test_a_directory_loader_by_source_file(kb, tmp_path, community):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.txt").write_text("Notes on the first meeting.")
    (folder / "b.txt").write_text("Notes on the second meeting.")
    loader = community.DirectoryLoader(str(folder), glob="*.txt", loader_cls=community.TextLoader)
    source = LoaderSource(loader, key="source", name="notes", access={"*a.txt": {"groups": ["board"]}})
    report = kb.sync(source)
    assert sorted(report.added) == [f"loader:notes:{folder}/a.txt", f"loader:notes:{folder}/b.txt"]
    chunk = kb.get_documents({"source": f"loader:notes:{folder}/a.txt"})[0]
    assert _acl(chunk.metadata, "g") == {group_key("board")}
    (folder / "b.txt").unlink()
    assert kb.sync(source).deleted == [f"loader:notes:{folder}/b.txt"]
    assert chunk_sources(kb) == [f"loader:notes:{folder}/a.txt"]


class _Keyless(BaseLoader):
    def lazy_load(self):
        yield Document(page_content="has a key", metadata={"id": "1"})
        yield Document(page_content="has none", metadata={})


def test_documents_without_the_key_are_reported_not_indexed(kb):
    report = kb.sync(LoaderSource(_Keyless(), key="id"))
    assert report.added == ["loader:_Keyless:1"]
    assert "1 document(s) without metadata key 'id'" in report.skipped[0].reason


def test_a_loader_source_checks_its_arguments():
    with pytest.raises(ConfigError, match="BaseLoader"):
        LoaderSource(object())
    with pytest.raises(ConfigError, match="name must be"):
        LoaderSource(_Keyless(), name="no spaces allowed")
