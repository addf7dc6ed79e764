"""Every config in configs/ loads and builds into a working RAG (fake embeddings, real stores)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.compose.generator import RAG
from rag.config.rag_config import load_config, parse_config

CONFIGS = sorted((Path(__file__).resolve().parents[3] / "configs").glob("*.yaml"))


def test_configs_folder_is_not_empty():
    assert {p.name for p in CONFIGS} >= {"default.yaml", "hybrid.yaml", "openai.yaml", "chroma_server.yaml"}


@pytest.fixture
def demo_dir(tmp_path, monkeypatch):
    """A working directory with a small docs/ folder, since configs use paths relative to it."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "serving.md").write_text("# Serving\n\nRun rag serve to start the web page and the HTTP API.\n")
    (docs / "filters.md").write_text("# Filters\n\nFilters select chunks by metadata such as the page number.\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # never contacted: building does not connect
    return tmp_path


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_config_builds_and_answers(path, demo_dir, tmp_path):
    data = yaml.safe_load(path.read_text())
    uses_server = any(r["kind"] == "chroma_server" for r in data["resources"])
    load_config(path)  # the file itself validates
    if not uses_server:
        _build_and_query(parse_config(data))
        return
    from rag.testing.chroma_server import chroma_server

    with chroma_server(tmp_path / "chroma-server") as server:
        for resource in data["resources"]:
            if resource["kind"] == "chroma_server":
                resource["port"] = server.port
        _build_and_query(parse_config(data))


def _build_and_query(config) -> None:
    from langchain_core.language_models import FakeListChatModel

    rag = RAG.from_config(config, embedding=DeterministicFakeEmbedding(size=32), llm=FakeListChatModel(responses=["ok [1]"]))
    assert rag.resource_names == [r.name for r in config.resources]
    docs = rag.resources_retrieval_chain.invoke("How do I start the web page?")
    assert docs and {d.metadata["resource"] for d in docs} <= set(rag.resource_names)
    # The configured answer model is built too (nothing is contacted while building).
    assert RAG.from_config(config, embedding=DeterministicFakeEmbedding(size=32)).generation_chain is not None
