"""A relative store path means the directory it names now, also after the process changed directory.

Chroma keeps one client per path string in a process, so a relative path used in two working
directories would reach the first directory's store (or a deleted one) unless it is resolved.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.compose.knowledge_base import KnowledgeBase
from rag.compose.resource import Resource


def _kb_in(directory: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> KnowledgeBase:
    directory.mkdir()
    monkeypatch.chdir(directory)
    kb = KnowledgeBase("notes", ".rag", embedding=DeterministicFakeEmbedding(size=16))
    kb.add_documents([Document(page_content=text, metadata={"source": f"{text}.txt"})])
    return kb


def test_knowledge_base_with_a_relative_path_opens_the_store_of_the_current_directory(tmp_path, monkeypatch):
    _kb_in(tmp_path / "a", monkeypatch, "alpha")
    second = _kb_in(tmp_path / "b", monkeypatch, "beta")
    assert [d.page_content for d in second.as_resource().retrieve("x", search_kwargs={"k": 5})] == ["beta"]
    assert (tmp_path / "b" / ".rag" / "chroma.sqlite3").exists()


def test_chroma_resource_with_a_relative_path_writes_in_the_current_directory(tmp_path, monkeypatch):
    embedding = DeterministicFakeEmbedding(size=16)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        resource = Resource.from_texts("news", [f"text {name}"], embedding=embedding, persist_directory=".rag")
    assert [d.page_content for d in resource.retrieve("text", search_kwargs={"k": 5})] == ["text b"]
    assert (tmp_path / "b" / ".rag" / "chroma.sqlite3").exists()
