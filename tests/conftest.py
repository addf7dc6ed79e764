"""Shared fixtures. Tests never touch the network or the user's home directory."""

from __future__ import annotations

import os
import tempfile

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
# The ONNX MiniLM files (rag.models.minilm_onnx) are built once per machine and library versions, not per session
# (the home directory is a new temporary one in every session): a cache of derived files, never of settings.
os.environ.setdefault("RAG_CACHE_DIR", os.path.join(tempfile.gettempdir(), f"rag-tests-cache-{os.getuid()}"))

try:  # the dev extra: property tests
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # pragma: no cover - only the code tests without the dev extra
    pass
else:
    # `ci` (make test): the same generated examples on every run, so a red run is a reproducible one;
    # `default` (make fuzz): fresh random examples on each run, to look for new failures outside CI.
    _hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
    _hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(autouse=True)
def _isolated_settings(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The user's RAG_* settings must not change what a test sees."""
    for name in ("RAG_LLM", "RAG_EMBEDDING", "RAG_EMBEDDING_PRECISION", "RAG_EMBEDDING_DEVICE", "RAG_MINILM_PATH",
                 "RAG_API_TOKEN", "OPENAI_API_KEY", "OPENAI_BASE_URL", "RAG_LLM_URL", "RAG_LLM_MODEL", "RAG_LLM_CONTEXT",
                 "RAG_OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    # RAG_LLM=auto probes Ollama: a developer's running Ollama must not answer the tests (port 9: discard)
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:9")
    home = tmp_path_factory.getbasetemp() / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))


@pytest.fixture
def fake_embedding() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=32)


@pytest.fixture(scope="session")
def minilm():
    """The real all-MiniLM-L6-v2 model from the wheel (loaded once per test session)."""
    from rag.models.embeddings import default_embeddings

    return default_embeddings()


@pytest.fixture(scope="session")
def pg_url():
    """The SQLAlchemy URL of a running PostgreSQL with pgvector (one server for the session, started only
    if a test needs it); the test FAILS if it cannot start.

    Its data lies in a folder of its own under the system's temporary directory, not under pytest's: run as
    root, the server runs as another user, which needs to pass through every folder above its data, and each
    pytest session that starts (a second worker of `make test`) makes /tmp/pytest-of-<user> private again; the
    server then stopped at its next checkpoint ("could not open file .../global/pg_control: Permission denied").
    """
    from rag.base.errors import MissingDependencyError, StoreError
    from rag.testing.pg_server import pg_server

    with tempfile.TemporaryDirectory(prefix="rag-tests-pg-") as data:
        try:
            with pg_server(data) as url:
                yield url
        except (MissingDependencyError, StoreError) as exc:
            pytest.fail(f"the pgvector backend cannot run here: {exc}")
