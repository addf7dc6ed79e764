"""A process that opens a pgvector knowledge base again and again holds one connection pool for that database (real
PostgreSQL): before, each open made its own engine, whose connections lived until garbage collection, and a
`rag ask` per question in one process met PostgreSQL's "too many clients"."""

from __future__ import annotations

import contextlib
import io
import json

import psycopg
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.cli import main
from rag.compose.knowledge_base import KnowledgeBase
from rag.stores.pgvector import open_store

EMB = DeterministicFakeEmbedding(size=16)


def _client_connections(monitor: psycopg.Connection) -> int:
    return monitor.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                           "AND pid <> pg_backend_pid()").fetchone()[0]


def test_asking_again_and_again_in_one_process_keeps_the_connections_flat(pg_url, tmp_path, monkeypatch):
    kb = KnowledgeBase("conns", tmp_path, embedding=EMB, store=open_store(pg_url, "conns", EMB, create=True))
    kb.add_documents([Document(page_content=f"Note {i} about revenue.", metadata={"source": f"n{i}"})
                      for i in range(5)])
    kb.close()
    monkeypatch.setenv("RAG_PG_URL", pg_url)
    backend = json.dumps({"kind": "pgvector", "url_env": "RAG_PG_URL"})
    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as monitor:
        counts = []
        for _ in range(8):
            with contextlib.redirect_stdout(io.StringIO()) as out:
                assert main(["ask", "What about revenue?", "--store", str(tmp_path), "--collection", "conns",
                             "--json", "--backend", backend]) == 0
            assert "revenue" in json.loads(out.getvalue())["answer"].lower() or json.loads(out.getvalue())["context"]
            counts.append(_client_connections(monitor))
    assert max(counts) == counts[0] and counts[0] <= 5, counts   # one pool (before: +2 a question until a GC)
