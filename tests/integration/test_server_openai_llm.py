"""RAG_LLM=openai against llama-cpp-python's OpenAI-compatible server running SmolLM2 on loopback."""

from __future__ import annotations

import importlib.util
import json

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.integration]

TEXTS = ["The Eiffel Tower is in Paris and opened in 1889.", "The Colosseum is an amphitheatre in Rome."]


@pytest.fixture(scope="module")
def llama_base_url(tmp_path_factory):
    """`python -m llama_cpp.server` with SmolLM2 on 127.0.0.1 and a free port."""
    from rag.base.errors import MissingDependencyError
    from rag.models.llms import smollm2_path
    from rag.testing.llama_server import llama_server

    missing = [m for m in ("llama_cpp", "sse_starlette", "starlette_context", "pydantic_settings")
               if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"llama-cpp-python's server needs {missing}: pip install -e '.[llm-local]'")
    try:
        model = smollm2_path()
    except MissingDependencyError as exc:
        pytest.skip(str(exc))
    with llama_server(model, n_ctx=2048, log=tmp_path_factory.mktemp("llama") / "server.log") as url:
        yield url


def _config(tmp_path, llm: dict) -> dict:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i, text in enumerate(TEXTS):
        (docs / f"doc{i}.md").write_text(text + "\n")
    return {"embedding": {"kind": "deterministic", "size": 16}, "llm": llm,
            "generation": {"max_tokens": 24, "temperature": 0.0},
            "resources": [{"name": "docs", "kind": "chroma", "path": str(tmp_path / "store"),
                           "index": {"paths": [str(docs)]}, "search_kwargs": {"k": 2}}]}


def test_rag_llm_openai_answers_through_the_api(llama_base_url, tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from rag.compose.generator import RAG
    from rag.config.rag_config import from_config
    from rag.server.app import create_app

    monkeypatch.setenv("RAG_LLM", "openai")
    monkeypatch.setenv("OPENAI_BASE_URL", llama_base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rag = from_config(RAG, _config(tmp_path, {"kind": "default"}))
    assert type(rag.generation_chain.llm).__name__ == "ChatOpenAI"
    with TestClient(create_app(rag), base_url="http://localhost") as client:
        r = client.post("/invoke", json={"question": "Where is the Eiffel Tower?"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert isinstance(body["answer"], str) and body["answer"].strip()
    assert len(body["sources"]) == 2


def test_openai_kind_streams_tokens_from_the_server(llama_base_url, tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from rag.compose.generator import RAG
    from rag.config.rag_config import from_config
    from rag.server.app import create_app

    monkeypatch.setenv("LOCAL_LLM_URL", llama_base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rag = from_config(RAG, _config(tmp_path, {"kind": "openai", "base_url_env": "LOCAL_LLM_URL", "timeout": 300}))
    with TestClient(create_app(rag), base_url="http://localhost") as client:
        text = client.post("/stream", json={"question": "Where is the Colosseum?"}).text
    events = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
    types = [e["type"] for e in events]
    assert types[0] == "sources" and types[-4:] == ["citations", "support", "usage", "done"], types
    tokens = [e["text"] for e in events if e["type"] == "token"]
    assert len(tokens) > 1 and "".join(tokens).strip() and events[-1]["answer"].strip()
    usage = events[-2]["usage"]
    # llama.cpp's server sends no token counts while streaming; the call itself is still recorded.
    assert usage["calls"] >= 1, usage
