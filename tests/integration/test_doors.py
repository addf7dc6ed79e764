"""Every door runs the one chain: the same question on one knowledge base gives the same context.

The knowledge base is made by `rag index` over ten pages of this project's docs (real MiniLM,
real Chroma, routing on: it holds more than 8 documents). Each door is asked the same questions:
`RAG.chain()`, `retrieve()`, `airag()`, `ConversationalRAG` (first turn), `rag ask --json`, a
config built like `rag serve`'s with `/invoke` and `/v1/chat/completions`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rag import RAG, KnowledgeBase, airag, retrieve
from rag.cli import main as cli_main
from rag.compose.chat import ConversationalRAG

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["cli.md", "configuration.md", "evaluation.md", "generation.md", "indexing.md", "observability.md",
         "rag.md", "retrieval.md", "security.md", "serving.md", "stores.md"]
QUESTIONS = [
    "Which embedding model is used by default?",
    "How do I require a bearer token for rag serve?",
    "What does the context budget count?",
    "How does incremental sync decide that a file changed?",
    "Which metadata filter operators are supported?",
    "What does routing do in the Retrieval page?",
]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("doors")
    docs = root / "docs"
    docs.mkdir()
    for page in PAGES:
        shutil.copy(ROOT / "docs" / page, docs / page)
    assert cli_main(["index", str(docs), "--store", str(root / "store"), "--collection", "docs"]) == 0
    return root / "store"


@pytest.fixture(scope="module")
def rag(store) -> RAG:
    return RAG(resources=[KnowledgeBase.open("docs", store).as_resource()])


def _texts(docs) -> list[str]:
    return [d.page_content for d in docs]


def _ask_json(store: Path, question: str, capsys) -> list[str]:
    capsys.readouterr()
    assert cli_main(["ask", question, "--store", str(store), "--collection", "docs", "--json"]) == 0
    return [c["page_content"] for c in json.loads(capsys.readouterr().out)["context"]]


def _in_context_order(sources: list[dict]) -> list[str]:
    """The texts of a response's sources in context order: `n` is the position a source has in the context
    (the response lists the cited ones first)."""
    assert sorted(s["n"] for s in sources) == list(range(1, len(sources) + 1))
    return [s["content"] for s in sorted(sources, key=lambda s: s["n"])]


@pytest.fixture(scope="module")
def client(store):
    from fastapi.testclient import TestClient

    from rag.config.models import ServerConfig
    from rag.server.app import create_app

    config = {"resources": [{"name": "docs", "kind": "knowledge_base", "path": str(store)}]}
    served = RAG.from_config(config)
    with TestClient(create_app(served, settings=ServerConfig(support_scoring="lexical", max_k=64)),
                    base_url="http://localhost") as http:   # a host the server allows (DNS-rebinding check)
        yield http


@pytest.mark.parametrize("question", QUESTIONS)
def test_every_door_returns_the_chains_context(question, rag, store, client, capsys):
    expected = _texts(rag.chain().invoke(question)["context"])
    assert len(expected) > 4, "the default pipeline fills the context budget"
    doors = {
        "retrieve": _texts(retrieve(question, rag.resources).context),
        "retrieve(rag)": _texts(retrieve(question, rag).context),
        "airag": _texts(airag(rag, question, return_all=True).context),
        "chat": _texts(ConversationalRAG(rag).chain().invoke({"question": question, "history": []})["context"]),
        "rag ask --json": _ask_json(store, question, capsys),
        "/invoke": _in_context_order(client.post("/invoke", json={"question": question}).json()["sources"]),
        "/v1/chat/completions": _in_context_order(client.post("/v1/chat/completions", json={
            "model": "rag", "messages": [{"role": "user", "content": question}]}).json()
                                                  ["choices"][0]["message"]["rag"]["sources"]),
    }
    for door, context in doors.items():
        assert context == expected, f"{door} returned another context for {question!r}"


def test_per_request_settings_reach_every_door_the_same_way(rag, store, client, capsys):
    question = QUESTIONS[0]
    expected = _texts(rag.chain().invoke(question, config={"configurable": {"k": 3}})["context"])
    assert len(expected) == 3
    assert _texts(rag.chain().with_config(configurable={"k": 3}).invoke(question)["context"]) == expected
    assert _texts(retrieve(question, rag, k=3).context) == expected
    assert _texts(airag(rag, question, k=3, return_all=True).context) == expected
    capsys.readouterr()
    assert cli_main(["ask", question, "--store", str(store), "--collection", "docs", "--json", "--k", "3"]) == 0
    assert [c["page_content"] for c in json.loads(capsys.readouterr().out)["context"]] == expected


def _sse_events(text: str) -> list[dict]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


_FIELDS = ("answer", "cited", "refused", "confidence", "passage", "flags", "invalid", "answerer")


def _pick(fields: dict) -> dict:
    return {key: fields.get(key) for key in _FIELDS}


async def _mcp_ask(rag: RAG, question: str) -> dict:
    from mcp import Client

    from rag.config.models import ServerConfig
    from rag.server.mcp_server import create_mcp_server

    async with Client(create_mcp_server(rag, settings=ServerConfig(max_k=64))) as client:
        return (await client.call_tool("ask", {"question": question})).structured_content


@pytest.mark.parametrize("question", QUESTIONS[:3] + ["What is the capital of Australia?"])
def test_every_door_returns_the_same_answer_fields(question, rag, store, client, capsys):
    import asyncio

    from rag.compose.streaming import stream_events

    answer = rag.chain().invoke(question)["answer"]
    expected = _pick(answer.fields())
    assert expected["answer"] and expected["answerer"]
    assert expected["cited"] or expected["refused"], "an answer cites its sources or asserts nothing"

    async def streamed() -> dict:
        return [e async for e in stream_events(rag, question)][-1]

    capsys.readouterr()
    assert cli_main(["ask", question, "--store", str(store), "--collection", "docs", "--json"]) == 0
    ask_json = json.loads(capsys.readouterr().out)
    v1 = client.post("/v1/chat/completions", json={"model": "rag", "messages": [{"role": "user", "content": question}]})
    message = v1.json()["choices"][0]["message"]
    doors = {
        "stream_events": _pick(asyncio.run(streamed())),
        "airag": _pick(airag(rag, question, return_all=True).final_answer.fields()),
        "chat": _pick(ConversationalRAG(rag).chain().invoke({"question": question, "history": []})["answer"].fields()),
        "rag ask --json": _pick(ask_json),
        "/invoke": _pick(client.post("/invoke", json={"question": question}).json()),
        "/stream": _pick(_sse_events(client.post("/stream", json={"question": question}).text)[-1]),
        "/v1/chat/completions": _pick({**message["rag"], "answer": message["content"]}),
        "MCP ask": _pick(asyncio.run(_mcp_ask(rag, question))),
    }
    for door, fields in doors.items():
        if door == "MCP ask":   # the tool's answer carries no dangling-citation list
            fields["invalid"] = expected["invalid"]
        assert fields == expected, f"{door} answered {question!r} differently"
