"""No phantom sources: documents deleted by another process while the server runs are not listed.

Chroma keeps a process's vector index in memory; after another process deletes records, a search
here can still return their ids, with neither text nor metadata. Such hits are dropped wherever a
Chroma result becomes a Document, so no route lists `{"source": null, "content": ""}`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from fastapi.testclient import TestClient
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.compose.generator import RAG
from rag.compose.knowledge_base import KnowledgeBase
from rag.config.models import ServerConfig
from rag.server.app import create_app


def _delete_in_another_process(store, corpus, names) -> None:
    code = textwrap.dedent(f"""
        from langchain_core.embeddings import DeterministicFakeEmbedding
        from rag.compose.knowledge_base import KnowledgeBase
        kb = KnowledgeBase("docs", {str(store)!r}, embedding=DeterministicFakeEmbedding(size=16))
        for name in {names!r}:
            kb.delete_document({str(corpus)!r} + "/" + name)
    """)
    subprocess.run([sys.executable, "-c", code], check=True, env=os.environ, timeout=120)


def test_documents_deleted_while_serving_are_not_listed_as_empty_sources(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(24):
        (corpus / f"f{i}.md").write_text(f"# City {i}\n\nCity {i} is a capital.\n")
    kb = KnowledgeBase("docs", tmp_path / "store", embedding=DeterministicFakeEmbedding(size=16))
    kb.add_documents(corpus)
    rag = RAG(resources=[kb.as_resource(search="dense")])
    client = TestClient(create_app(rag, settings=ServerConfig(support_scoring="lexical")), base_url="http://localhost")
    question = {"question": "City 1 capital", "k": 8}
    assert len(client.post("/invoke", json=question).json()["sources"]) == 8
    _delete_in_another_process(tmp_path / "store", corpus, [f"f{i}.md" for i in range(0, 24, 2)])
    for route, body in (("/invoke", question), ("/v1/chat/completions", {
            "model": "rag", "messages": [{"role": "user", "content": "City 1 capital"}], "rag": {"k": 8}})):
        response = client.post(route, json=body).json()
        sources = response["sources"] if route == "/invoke" else response["choices"][0]["message"]["rag"]["sources"]
        assert sources and all(s["source"] and s["content"] for s in sources), json.dumps(sources)[:500]
    client.close()
