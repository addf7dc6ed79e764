"""RAG_LLM=auto: the configured endpoint, a local server, Ollama (a server speaking its documented API), else
the offline fallback; every choice says in one line which model answers."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag import RAG, Resource
from rag.base.errors import ConfigError
from rag.generation.factory import default_answerer
from rag.testing.chroma_server import free_port

pytest.importorskip("langchain_openai")

_ENV = ("RAG_LLM", "OPENAI_BASE_URL", "OPENAI_API_KEY", "RAG_LLM_URL", "OLLAMA_HOST", "RAG_LLM_MODEL",
        "RAG_LLM_CONTEXT")


class _Ollama(BaseHTTPRequestHandler):
    """`/api/tags`, `/api/show` and `/api/chat` as Ollama documents them; an embedding model listed first."""

    chats: list[dict] = []

    def log_message(self, *args: object) -> None:
        pass

    def _json(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/api/tags":
            self._json({"models": [{"name": "nomic-embed-text:latest"}, {"name": "tiny-chat:1b"}]})
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/api/show":
            embed = body["model"].startswith("nomic")
            self._json({"capabilities": ["embedding"] if embed else ["completion"],
                        "model_info": {"llama.context_length": 2048}})
        elif self.path == "/api/chat":
            type(self).chats.append(body)
            self._json({"model": body["model"], "message": {"role": "assistant", "content": "In Rome [1]."},
                        "done": True, "prompt_eval_count": 40, "eval_count": 5})
        else:
            self.send_error(404)


@pytest.fixture
def ollama() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Ollama)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Ollama.chats = []
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{free_port()}")   # nothing listens: no Ollama by default


def test_auto_without_any_model_is_the_offline_fallback():
    assert "offline extractive fallback" in default_answerer().describe()


def test_auto_takes_the_openai_compatible_endpoint_of_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert default_answerer().describe().startswith("gpt-4o-mini at http://127.0.0.1:9/v1 (ChatOpenAI)")


def test_auto_takes_a_local_server_named_by_rag_llm_url(monkeypatch):
    monkeypatch.setenv("RAG_LLM_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("RAG_LLM_MODEL", "smollm2")
    monkeypatch.setenv("RAG_LLM_CONTEXT", "2048")
    assert default_answerer().describe() == "smollm2 at http://127.0.0.1:9/v1 (ChatOpenAI), 2048-token window"


def test_auto_finds_ollama_and_its_first_chat_model_and_answers_through_it(monkeypatch, ollama):
    monkeypatch.setenv("OLLAMA_HOST", ollama)
    answerer = default_answerer()
    assert answerer.describe() == f"tiny-chat:1b at http://{ollama} (OllamaChatModel), 2048-token window"
    docs = Resource.from_texts("cities", ["The Colosseum is in Rome."], embedding=DeterministicFakeEmbedding(size=8))
    out = RAG(resources=[docs], answerer=answerer, retrieval="plain").chain().invoke("Where is the Colosseum?")
    assert out["answer"] == "In Rome [1]." and out["answer"].cited == [1]
    chat = _Ollama.chats[-1]
    assert chat["model"] == "tiny-chat:1b" and chat["options"]["num_ctx"] == 2048 and chat["stream"] is False
    assert "The Colosseum is in Rome." in chat["messages"][0]["content"]


def test_rag_llm_ollama_without_a_server_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("RAG_LLM", "ollama")
    with pytest.raises(ConfigError, match="no Ollama server with a chat model answered"):
        default_answerer()


@pytest.mark.parametrize("value", ["gpt", "", "  LOCAL "])
def test_rag_llm_values(monkeypatch, value):
    monkeypatch.setenv("RAG_LLM", value)
    if value.strip().lower() in ("", "local"):
        assert default_answerer().describe()
    else:
        with pytest.raises(ConfigError, match="valid: auto, openai, local, ollama, extractive"):
            default_answerer()


def test_a_bad_context_setting_says_what_is_valid(monkeypatch):
    monkeypatch.setenv("RAG_LLM_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("RAG_LLM_CONTEXT", "lots")
    with pytest.raises(ConfigError, match="RAG_LLM_CONTEXT must be a whole number"):
        default_answerer().describe()
