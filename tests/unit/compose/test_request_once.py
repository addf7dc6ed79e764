"""One request is resolved and validated once at its door: count the filter validations and the requests.

A validation is one pass of the filter checker (`rag.base.filters._Canon`) over a filter that has not been
validated; a `Filter` a pass returned is taken as it is by every later stage (`validate_filter` returns it,
`and_filters` combines it without a pass). A request is one `rag.compose.request.RagRequest`: the chain's
input step builds it and every stage reads it. The counts are of one request through each door, after one
warm-up request: `chain.invoke`, `retrieve`, `airag`, chat, HTTP `/invoke`, `/stream`,
`/v1/chat/completions`, MCP `search` and `ask`, and `rag ask`. `validate_filter` calls are counted too, for
the record.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections import Counter
from collections.abc import Iterator

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import GenericFakeChatModel

import rag.base.filters as filters
from rag.compose.request import RagRequest
from rag.compose.generator import RAG
from rag.compose.resource import Resource
from rag.generation.rag_with_source import rag_chain_from_docs

TEXTS = [("Acme revenue grew 10% in 2024.", {"tenant": "acme", "year": 2024, "source": "acme.md"}),
         ("Globex revenue fell 5% in 2024.", {"tenant": "globex", "year": 2024, "source": "globex.md"}),
         ("Acme opened a plant in 2023.", {"tenant": "acme", "year": 2023, "source": "acme-2023.md"})]
FILTER = {"tenant": "acme", "year": {"$gte": 2023}}


@pytest.fixture
def calls(monkeypatch) -> Iterator[Counter]:
    """Counts validation passes (`validations`) and `validate_filter` calls, wherever it was imported."""
    counts: Counter = Counter()
    checker, real = filters._Canon, filters.validate_filter

    class CountingChecker(checker):
        def __init__(self) -> None:
            counts["validations"] += 1
            super().__init__()

    def counting_validate(*args, **kwargs):
        counts["validate_filter"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(filters, "_Canon", CountingChecker)
    built = RagRequest.__init__

    def counting_request(self, *args, **kwargs):
        counts["requests"] += 1
        built(self, *args, **kwargs)

    monkeypatch.setattr(RagRequest, "__init__", counting_request)
    for module in [m for key, m in list(sys.modules.items()) if key.startswith("rag") and m is not None]:
        if getattr(module, "validate_filter", None) is real:
            monkeypatch.setattr(module, "validate_filter", counting_validate)
    yield counts


def _rag() -> RAG:
    resource = Resource.from_texts("reports", [t for t, _ in TEXTS], metadatas=[m for _, m in TEXTS],
                                   embedding=DeterministicFakeEmbedding(size=32), search_kwargs={"k": 4})
    return RAG(resources=[resource], generation_chain=rag_chain_from_docs(
        GenericFakeChatModel(messages=itertools.cycle(["Revenue grew [1]."]))))


def _tenants(context: list) -> set[str]:
    return {(d.metadata if isinstance(d, Document) else d["metadata"])["tenant"] for d in context}


def test_chain_invoke_validates_the_filter_once(calls):
    chain = _rag().chain()
    chain.invoke("revenue", config={"configurable": {"k": 6, "filter": FILTER}})   # warm: imports, caches
    calls.clear()
    out = chain.invoke("revenue", config={"configurable": {"k": 6, "filter": FILTER}})
    assert _tenants(out["context"]) == {"acme"}
    assert calls["validations"] == 1 and calls["requests"] == 1, calls


def test_retrieve_validates_the_filter_once_through_the_chains_input_step(calls):
    from rag.compose.retrieve import retrieve

    rag = _rag()
    retrieve("revenue", rag, k=6, filter=FILTER)
    calls.clear()
    result = retrieve("revenue", rag, k=6, filter=FILTER)
    assert _tenants(result.context) == {"acme"}
    assert calls["validations"] == 1 and calls["requests"] == 1, calls


def test_airag_validates_the_filter_once_through_the_chains_input_step(calls):
    from rag.compose.airag import airag

    rag = _rag()
    airag(rag, "revenue", k=6, filter=FILTER, embedding=None)
    calls.clear()
    result = airag(rag, "revenue", return_all=True, k=6, filter=FILTER, embedding=None)
    assert _tenants(result.context) == {"acme"}
    assert calls["validations"] == 1 and calls["requests"] == 1, calls


def test_chat_validates_the_filter_once(calls):
    from rag.compose.chat import ConversationalRAG

    chat = ConversationalRAG(_rag(), llm=None)
    history = [("human", "What did Acme do?"), ("ai", "It grew [1].")]
    config = {"configurable": {"k": 6, "filter": FILTER}}
    chat.invoke("And its revenue?", history=history, config=config)
    calls.clear()
    out = chat.invoke("And its revenue?", history=history, config=config)
    assert _tenants(out["context"]) == {"acme"}
    assert calls["validations"] == 1 and calls["requests"] == 1, calls


def _client():
    from fastapi.testclient import TestClient

    from rag.config.models import ServerConfig
    from rag.server.app import create_app

    return TestClient(create_app(_rag(), settings=ServerConfig(support_scoring="lexical")), base_url="http://localhost")


def test_http_stream_and_chat_completions_validate_the_filter_once(calls):
    stream = {"question": "revenue", "k": 6, "filter": FILTER}
    completion = {"model": "rag", "messages": [{"role": "user", "content": "revenue"}],
                  "rag": {"k": 6, "filter": FILTER}}
    with _client() as client:
        for path, body in (("/stream", stream), ("/v1/chat/completions", completion)):
            assert client.post(path, json=body).status_code == 200
            calls.clear()
            response = client.post(path, json=body)
            assert response.status_code == 200 and "acme" in response.text and "globex" not in response.text, path
            assert calls["validations"] == 1 and calls["requests"] == 1, (path, calls)


def test_mcp_search_and_ask_validate_the_filter_once(calls):
    import asyncio

    pytest.importorskip("mcp")
    from rag.config.models import ServerConfig
    from rag.server.mcp_server import create_mcp_server

    server = create_mcp_server(_rag(), settings=ServerConfig(support_scoring="lexical"))
    for tool in ("search", "ask"):
        arguments = {"question": "revenue", "k": 6, "filter": FILTER}
        asyncio.run(server.call_tool(tool, arguments))
        calls.clear()
        result = asyncio.run(server.call_tool(tool, arguments))
        text = json.dumps(result.structured_content if hasattr(result, "structured_content") else str(result),
                          default=str)
        assert "acme" in text and "globex" not in text, tool
        assert calls["validations"] == 1 and calls["requests"] == 1, (tool, calls)


def test_http_invoke_validates_the_filter_once(calls):
    from fastapi.testclient import TestClient

    from rag.config.models import ServerConfig
    from rag.server.app import create_app

    body = {"question": "revenue", "k": 6, "filter": FILTER}
    with TestClient(create_app(_rag(), settings=ServerConfig(support_scoring="lexical")),
                    base_url="http://localhost") as client:
        assert client.post("/invoke", json=body).status_code == 200
        calls.clear()
        response = client.post("/invoke", json=body)
    assert response.status_code == 200 and {s["metadata"]["tenant"] for s in response.json()["sources"]} == {"acme"}
    assert calls["validations"] == 1 and calls["requests"] == 1, calls


@pytest.mark.integration
def test_rag_ask_validates_the_filter_once(calls, tmp_path, capsys):
    from rag import cli

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for text, meta in TEXTS:
        (corpus / meta["source"]).write_text(f"# {meta['tenant']}\n\n{text}\n")
    store = str(tmp_path / "store")
    assert cli.main(["index", str(corpus), "--store", store]) == 0
    args = ["ask", "revenue", "--store", store, "--json", "--k", "6", "--filter", json.dumps({"title": "acme"})]
    assert cli.main(args) == 0
    capsys.readouterr()
    calls.clear()
    assert cli.main(args) == 0
    assert {c["metadata"]["title"] for c in json.loads(capsys.readouterr().out)["context"]} == {"acme"}
    assert calls["validations"] == 1 and calls["requests"] == 1, calls
