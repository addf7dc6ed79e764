"""The non-resource parts of a config: embedding, LLM, generation and server settings.

Each model forbids unknown keys and lists the valid ones; secrets are the *names* of
environment variables (`api_key_env: OPENAI_API_KEY`), read only when the model is built.

Example:
    >>> LLMConfig(kind="openai", api_key_env="MY_KEY").api_key_env
    'MY_KEY'
    >>> LLMConfig(kind="openai", api_key="sk-123")
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for LLMConfig
    ...
"""

from __future__ import annotations

import os
import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from rag.base.errors import ConfigError, MissingDependencyError, short_repr
from rag.base.filters import validate_filter
from rag.config.access import IdentitiesConfig
from rag.config.strict import StrictModel, check_env_name, kind_of
from rag.generation.factory import default_llm, fallback_answerer
from rag.models.devices import device_setting
from rag.models.embeddings import MiniLMEmbeddings, default_embeddings, embedding_choice
from rag.models.ollama import OllamaChatModel, ollama_host
from rag.models.llms import LocalLlamaChatModel

__all__ = [
    "EmbeddingConfig",
    "GenerationConfig",
    "LLMConfig",
    "ServerConfig",
    "StrictModel",
    "TracingConfig",
    "build_embedding",
    "build_llm",
    "kind_of",
]

class EmbeddingConfig(StrictModel):
    """Which embedding model to use.

    Kinds: `default` (the library default: offline all-MiniLM-L6-v2 unless `RAG_EMBEDDING` says
    otherwise), `openai` (`model`, `api_key_env`, `base_url_env`), `deterministic` (hash-based
    fake vectors of `size` dimensions, for tests and load benchmarks only). `device` pins where
    MiniLM embeds documents (`auto`, `cpu`, `cuda`, `cuda:N`, `mps`; default: `RAG_EMBEDDING_DEVICE`,
    else `auto`: CUDA, then MPS, then the CPU).
    """

    kind: Literal["default", "openai", "deterministic"] = "default"
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    base_url_env: str | None = "OPENAI_BASE_URL"
    size: int = Field(default=384, ge=1, le=8192)
    device: str | None = None

    @field_validator("device")
    @classmethod
    def _check_device(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return device_setting(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from exc

    @model_validator(mode="after")
    def _device_is_for_minilm(self) -> EmbeddingConfig:
        if self.device is not None and self.kind != "default":
            raise ValueError(f"device applies to kind 'default' (MiniLM), not {self.kind!r}")
        return self

    @field_validator("api_key_env", "base_url_env")
    @classmethod
    def _check_env_names(cls, value: str | None) -> str | None:
        return check_env_name(value)


class LLMConfig(StrictModel):
    """Which answer model to use.

    Kinds: `default` (chosen by `RAG_LLM`, `auto` when unset), `extractive` (the offline fallback, no
    model), `openai` (any OpenAI-compatible server: `model`, `base_url` or `base_url_env`,
    `api_key_env`), `local` (SmolLM2 through llama-cpp-python, or `model_path` to another GGUF file),
    `ollama` (`model` on the Ollama server at `base_url`, default `OLLAMA_HOST` or 127.0.0.1:11434).
    `context_window`: the model's window in tokens, for a model that does not say it (an
    OpenAI-compatible server); the context is fitted to it.
    """

    kind: Literal["default", "extractive", "openai", "local", "ollama"] = "default"
    context_window: int | None = Field(default=None, ge=256, le=10_000_000)
    model: str | None = None
    base_url: str | None = None
    base_url_env: str | None = "OPENAI_BASE_URL"
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float | None = Field(default=None, gt=0)
    model_path: str | None = None
    semantic: bool = True

    @field_validator("api_key_env", "base_url_env")
    @classmethod
    def _check_env_names(cls, value: str | None) -> str | None:
        return check_env_name(value)


class GenerationConfig(StrictModel):
    """Prompt and sampling settings of the generation chain.

    `prompt` is a system prompt that must contain `{context}`; the question follows as the
    user message.
    """

    prompt: str | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=1, le=32768)
    on_unsupported: Literal["flag", "refuse"] = "flag"

    @field_validator("prompt")
    @classmethod
    def _check_prompt(cls, prompt: str | None) -> str | None:
        if prompt is not None and "{context}" not in prompt:
            raise ValueError("the prompt must contain {context}, where the numbered sources go")
        return prompt

    def model_settings(self) -> dict[str, Any]:
        """The sampling settings that were set, for `GenerationChain.with_settings`."""
        values = {"temperature": self.temperature, "max_tokens": self.max_tokens,
                  "on_unsupported": None if self.on_unsupported == "flag" else self.on_unsupported}
        return {k: v for k, v in values.items() if v is not None}


#: the names a local server answers to by default (`ServerConfig.allowed_hosts`)
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
_HOST_NAME = re.compile(r"\[?[A-Za-z0-9_.:-]{1,253}\]?")


class ServerConfig(StrictModel):
    """Settings of `rag serve`.

    Attributes:
        auth_token_env: the environment variable holding the bearer token; when it is set
            and non-empty, every API call needs `Authorization: Bearer <token>`.
        require_auth: refuse to start when that variable is unset.
        tenant_filter: a filter ANDed with every request's filter; requests cannot remove or widen it.
        max_k: the largest `k` a request may ask for.
        max_batch: the most questions in one `/batch` call.
        max_request_bytes: the largest request body accepted.
        max_question_chars: the longest question accepted.
        max_conversation_chars: the most characters a `/v1/chat/completions` conversation may hold
            in all its messages (the question is also held to `max_question_chars`).
        support_scoring: how `/stream` scores each answer sentence's support: `semantic`
            (lexical overlap plus MiniLM similarity) or `lexical` (no embedding model).
        allowed_hosts: the host names requests may address (their `Host` header, without the
            port); others get 400, so a web page cannot reach a local server through a DNS
            rebinding domain. Loopback names by default; `"*"` allows any (behind a proxy that checks).
        public_docs: serve `/openapi.json` and `/docs` without the token (with a token set they
            need it by default; without a token they are open like every route).
        identities: API keys and bearer JWTs that say who is asking (`rag.config.access`); with it every
            route needs one, and each request sees only the chunks its principal may read.
        public_by_default: under `identities`, chunks without permissions are visible to every principal
            (the knowledge bases are public by default); otherwise nobody sees them.
    """

    auth_token_env: str = "RAG_API_TOKEN"
    require_auth: bool = False
    tenant_filter: dict[str, Any] | None = None
    max_k: int = Field(default=20, ge=1, le=1000)
    max_batch: int = Field(default=16, ge=1, le=1000)
    max_request_bytes: int = Field(default=64 * 1024, ge=1024, le=16 * 1024 * 1024)
    max_question_chars: int = Field(default=2000, ge=1, le=100_000)
    max_conversation_chars: int = Field(default=16_000, ge=1, le=1_000_000)
    support_scoring: Literal["semantic", "lexical"] = "semantic"
    allowed_hosts: list[str] = Field(default_factory=lambda: list(LOOPBACK_HOSTS), min_length=1)
    public_docs: bool = False
    identities: IdentitiesConfig | None = None
    public_by_default: bool = False

    @field_validator("allowed_hosts")
    @classmethod
    def _check_hosts(cls, hosts: list[str]) -> list[str]:
        bad = [h for h in hosts if h != "*" and not _HOST_NAME.fullmatch(h)]
        if bad:
            raise ValueError(f"{bad} are not host names (write names or addresses without scheme or port, "
                             "e.g. 'localhost', 'rag.example.com', '10.0.0.5', '::1'; '*' allows any)")
        return [h.lower().strip("[]") for h in hosts]

    @field_validator("auth_token_env")
    @classmethod
    def _check_env_names(cls, value: str | None) -> str | None:
        return check_env_name(value)

    @field_validator("tenant_filter")
    @classmethod
    def _check_tenant(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return validate_filter(value)


class TracingConfig(StrictModel):
    """OpenTelemetry traces (see `rag.base.tracing` and docs/observability.md).

    Attributes:
        enabled: emit spans for every query and indexing run of this process (the same as
            `RAG_TRACING=1`); spans go to OpenTelemetry's global tracer provider.
        capture_content: also record the question and the answer (never document text).
    """

    enabled: bool = False
    capture_content: bool = False


# ------------------------------------------------------------------------------ factories
def build_embedding(config: EmbeddingConfig) -> Any:
    """Instantiate the configured embedding model (lazily imported)."""
    if config.kind == "deterministic":
        from langchain_core.embeddings import DeterministicFakeEmbedding

        return DeterministicFakeEmbedding(size=config.size)
    if config.kind == "openai":
        try:
            from langchain_openai import OpenAIEmbeddings
        except ImportError as exc:

            raise MissingDependencyError.for_extra("langchain-openai", "openai", "embedding kind 'openai'") from exc
        key = os.environ.get(config.api_key_env)
        if not key:
            raise ConfigError(f"embedding kind 'openai' needs the environment variable {config.api_key_env}")
        base_url = os.environ.get(config.base_url_env) if config.base_url_env else None
        return OpenAIEmbeddings(model=config.model or "text-embedding-3-small", api_key=key, base_url=base_url or None)
    if config.device not in (None, "auto"):
        if embedding_choice() != "minilm":
            raise ConfigError(f"embedding device {config.device!r} applies to the MiniLM model; RAG_EMBEDDING="
                              f"{embedding_choice()!r} chooses another")
        return MiniLMEmbeddings(device=config.device)   # checked here: a pinned device that is not there fails now
    return default_embeddings()


def build_llm(config: LLMConfig) -> Any:
    """The configured answer model (lazily imported; nothing connects yet): a chat model, an `Answerer`
    (the offline fallback), or None for `RAG_LLM`'s offline choice."""
    if config.kind == "default":
        model = default_llm()
    elif config.kind == "extractive":
        return fallback_answerer(embedding="default" if config.semantic else None)
    elif config.kind == "local":
        model = LocalLlamaChatModel(model_path=config.model_path)
    elif config.kind == "ollama":
        model = OllamaChatModel(model=config.model or "llama3.2", base_url=config.base_url or ollama_host())
    else:
        model = _openai_llm(config)
    return model


def _openai_llm(config: LLMConfig) -> Any:
    try:
        from langchain_openai import ChatOpenAI
    except ImportError as exc:

        raise MissingDependencyError.for_extra("langchain-openai", "openai", "llm kind 'openai'") from exc
    base_url = config.base_url or (os.environ.get(config.base_url_env) if config.base_url_env else None) or None
    key = os.environ.get(config.api_key_env)
    if not key and base_url is None:
        where = f" or {config.base_url_env}" if config.base_url_env else ""
        raise ConfigError(f"llm kind 'openai' needs the environment variable {config.api_key_env} "
                          f"(or base_url{where} for a local OpenAI-compatible server)")
    params: dict[str, Any] = {"model": config.model or os.environ.get("RAG_OPENAI_MODEL", "gpt-4o-mini"),
                              "base_url": base_url, "api_key": key or "not-needed", "temperature": 0.0,
                              "stream_usage": True}  # token counts in streamed answers too
    if config.timeout is not None:
        params["timeout"] = config.timeout
    return ChatOpenAI(**params)
