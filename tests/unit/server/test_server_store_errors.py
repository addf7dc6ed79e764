"""A store that fails under a running server (issue 37): HTTP and MCP give the same one line.

A damaged store was a bare 500 on HTTP and the whole error on MCP; a full disk, a lock or a read-only
store met at request time read as damage. Now `/invoke` answers 503 with `{"error": {"type":
"store_error", "message": LINE}}` and MCP's tools a tool error with the same LINE: what is wrong with the
store and what to do, with server paths shown as sources are.
"""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path

import chromadb
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import GenericFakeChatModel

from rag.compose.generator import RAG
from rag.compose.knowledge_base import KnowledgeBase
from rag.config.models import ServerConfig
from rag.generation.rag_with_source import rag_chain_from_docs
from rag.stores.chunk_store import DAMAGED_MARKER

mcp = pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from rag.server.mcp_server import create_mcp_server  # noqa: E402


def _served(tmp_path: Path) -> tuple[RAG, Path]:
    store = tmp_path / "store"
    kb = KnowledgeBase("docs", store, embedding=DeterministicFakeEmbedding(size=32))
    kb.add_documents([Document(page_content=f"{c} is a capital.", metadata={"source": str(tmp_path / f"{c}.md")})
                      for c in ("Paris", "Rome")])
    resource = kb.as_resource(search="dense")
    llm = GenericFakeChatModel(messages=itertools.cycle(["Paris is a capital [1]."]))
    return RAG(resources=[resource], generation_chain=rag_chain_from_docs(llm)), store


def _damage(store: Path) -> None:
    db = sqlite3.connect(store / "chroma.sqlite3")
    db.execute("DELETE FROM segments")
    db.commit()
    db.close()


def _lock_at_query(monkeypatch) -> None:
    """The engine's error for a database another process holds locked, raised by Chroma's query."""
    from chromadb.api.models.Collection import Collection

    def locked(*args, **kwargs):
        raise chromadb.errors.InternalError("error returned from database: (code: 5) database is locked")

    monkeypatch.setattr(Collection, "query", locked)


async def _mcp_line(rag: RAG, tool: str) -> str:
    async with Client(create_mcp_server(rag, settings=ServerConfig(support_scoring="lexical"))) as client:
        result = await client.call_tool(tool, {"question": "capital"})
    assert result.is_error
    return result.content[0].text


@pytest.mark.parametrize("failure", ["damaged", "locked"])
async def test_http_and_mcp_give_the_same_one_line_store_error(tmp_path, make_client, monkeypatch, failure):
    rag, store = _served(tmp_path)
    _damage(store) if failure == "damaged" else _lock_at_query(monkeypatch)
    response = make_client(rag).post("/invoke", json={"question": "capital"})
    assert response.status_code == 503, response.text
    error = response.json()["error"]
    assert error["type"] == "store_error" and "\n" not in error["message"]
    says = {"damaged": ("damaged", "rag index"), "locked": ("locked by another process", "run the same command again")}
    assert all(phrase in error["message"] for phrase in says[failure]), error["message"]
    assert str(tmp_path) not in error["message"]   # server paths shown as sources are
    for tool in ("search", "ask"):
        assert (await _mcp_line(rag, tool)).endswith(error["message"])
    if failure == "locked":   # a lock is not damage: nothing marks the store for a rebuild
        assert not (store / "kb" / "docs" / DAMAGED_MARKER).exists()
