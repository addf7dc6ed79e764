"""The LLM path with real models at the windows real models have: SmolLM2 through llama.cpp, in process
(`RAG_LLM=local`) and behind llama-cpp-python's OpenAI-compatible server (`RAG_LLM=openai`), at 2,048 and
4,096 tokens, with a context that fills the default pipeline's 4,000-token budget. No traceback, an answer."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "Which embedding model is used by default?"


def _requirements() -> Path:
    from rag.base.errors import MissingDependencyError
    from rag.models.llms import smollm2_path

    missing = [m for m in ("llama_cpp", "sse_starlette", "starlette_context", "pydantic_settings")
               if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"llama-cpp-python and its server need {missing}: pip install -e '.[llm-local]'")
    try:
        return smollm2_path()
    except MissingDependencyError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module", params=[2048, 4096])
def server(request, tmp_path_factory) -> Iterator[tuple[str, int]]:
    """`python -m llama_cpp.server` with SmolLM2 at a window of 2,048 or 4,096 tokens."""
    from rag.testing.llama_server import llama_server

    model = _requirements()
    with llama_server(model, n_ctx=request.param, log=tmp_path_factory.mktemp("llama") / "server.log") as url:
        yield url, request.param


@pytest.fixture(scope="module")
def pages():
    """This project's docs cut into chunks: a context that fills the 4,000-token budget."""
    from rag.compose.resource import Resource

    texts = []
    for page in ("models.md", "retrieval.md", "indexing.md", "generation.md"):
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        texts += [text[i:i + 1200] for i in range(0, len(text), 1200)]
    return Resource.from_texts("docs", texts, embedding=DeterministicFakeEmbedding(size=32))


def _ask(rag):
    out = rag.chain().invoke(QUESTION)
    assert sum(len(d.page_content) for d in out["context"]) > 10_000, "the context fills the budget"
    answer = out["answer"]
    assert str(answer).strip() and answer.answerer, answer
    return answer


def test_rag_llm_openai_against_the_server_fits_its_window(server, pages, monkeypatch):
    from rag import RAG

    url, window = server
    monkeypatch.setenv("RAG_LLM", "openai")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("RAG_LLM_CONTEXT", raising=False)   # the server does not say its window: the error does
    rag = RAG(resources=[pages])
    rag = RAG(resources=[pages], generation_chain=rag.generation_chain.with_settings(max_tokens=48))
    assert "8192-token window" in rag.describe_answerer()
    _ask(rag)


def test_rag_llm_auto_takes_the_local_server_with_its_window_set(server, pages, monkeypatch):
    from rag import RAG

    url, window = server
    for name in ("RAG_LLM", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAG_LLM_URL", url)
    monkeypatch.setenv("RAG_LLM_CONTEXT", str(window))
    rag = RAG(resources=[pages])
    rag = RAG(resources=[pages], generation_chain=rag.generation_chain.with_settings(max_tokens=48))
    assert f"at {url} (ChatOpenAI), {window}-token window" in rag.describe_answerer()
    _ask(rag)


@pytest.mark.parametrize("window", [2048, 4096])
def test_rag_llm_local_in_process_fits_its_window(window, pages, monkeypatch):
    from rag import RAG

    _requirements()
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    monkeypatch.setenv("RAG_LLM", "local")
    monkeypatch.setenv("RAG_LLM_CONTEXT", str(window))
    rag = RAG(resources=[pages])
    rag = RAG(resources=[pages], generation_chain=rag.generation_chain.with_settings(max_tokens=48))
    assert rag.describe_answerer() == f"SmolLM2-135M-Instruct.Q4_1.gguf (llama.cpp, in process), {window}-token window"
    _ask(rag)


def test_rag_ask_with_the_local_model_prints_an_answer_not_a_traceback(tmp_path, monkeypatch, capsys):
    """The report of issue 35: `RAG_LLM=local rag ask ...` over the project's docs ended in a traceback."""
    from rag.cli import main as cli_main

    _requirements()
    docs = tmp_path / "docs"
    docs.mkdir()
    for page in ("models.md", "retrieval.md", "generation.md"):
        shutil.copy(ROOT / "docs" / page, docs / page)
    assert cli_main(["index", str(docs), "--store", str(tmp_path / "store"), "--collection", "docs"]) == 0
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    monkeypatch.setenv("RAG_LLM", "local")
    capsys.readouterr()
    assert cli_main(["ask", QUESTION, "--store", str(tmp_path / "store"), "--collection", "docs"]) == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    assert "Answered by SmolLM2-135M-Instruct.Q4_1.gguf (llama.cpp, in process), 4096-token window." in out.out
