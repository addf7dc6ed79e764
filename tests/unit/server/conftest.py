"""Fixtures for the HTTP API: a small RAG on real in-memory Chroma with fake embeddings and LLMs."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import GenericFakeChatModel

from rag.compose.generator import RAG
from rag.compose.resource import Resource
from rag.config.models import ServerConfig
from rag.generation.rag_with_source import rag_chain_from_docs

TEXTS = [
    ("Acme revenue grew 10% in 2024.", {"tenant": "acme", "year": 2024, "source": "/data/acme-2024.pdf", "page": 2}),
    ("Acme opened a plant in Lyon in 2023.", {"tenant": "acme", "year": 2023, "source": "/data/acme-2023.pdf", "page": 0}),
    ("Globex revenue fell 5% in 2024.", {"tenant": "globex", "year": 2024, "source": "/data/globex.md"}),
    ("Globex hired a new CEO in 2023.", {"tenant": "globex", "year": 2023, "source": "/data/globex.md"}),
]


def build_rag(answer: str = "Revenue grew [1].") -> RAG:
    resource = Resource.from_texts("reports", [t for t, _ in TEXTS], metadatas=[m for _, m in TEXTS],
                                   embedding=DeterministicFakeEmbedding(size=32), search_kwargs={"k": 4})
    llm = GenericFakeChatModel(messages=itertools.cycle([answer]))
    return RAG(resources=[resource], generation_chain=rag_chain_from_docs(llm),
               extras={"count_docs": lambda out: len(out["context"])})


@pytest.fixture
def make_client() -> Callable[..., object]:
    """`make_client(rag=None, **server_settings)` -> a FastAPI TestClient."""
    from fastapi.testclient import TestClient

    from rag.server.app import create_app

    clients = []

    def make(rag: RAG | None = None, **settings) -> TestClient:
        settings.setdefault("support_scoring", "lexical")  # no embedding model in unit tests
        client = TestClient(create_app(rag or build_rag(), settings=ServerConfig(**settings)),
                            raise_server_exceptions=False, base_url="http://localhost")
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def make_rag() -> Callable[..., RAG]:
    """`make_rag(answer=...)` -> a RAG over four small reports whose fake LLM always gives `answer`."""
    return build_rag


@pytest.fixture
def client(make_client):
    return make_client()
