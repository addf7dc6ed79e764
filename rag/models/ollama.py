"""Ollama: find a running server and chat with one of its models over its documented HTTP API.

- `probe_ollama(host)`: `GET /api/tags` with a short timeout; the first model that chats
  (`/api/show` lists `completion` among its capabilities, or lists none), or the one named by
  `RAG_LLM_MODEL`; None when no server answers or it has no chat model.
- `OllamaChatModel`: `POST /api/chat` (`stream: false`, or NDJSON lines when streaming) with
  `options.num_ctx` set to the window the answerer fits its context to; the window is the model's
  `*.context_length` from `/api/show`, capped by `RAG_LLM_CONTEXT` (8,192 when unset), since Ollama
  otherwise runs every model at a small default window and silently cuts the prompt.

Example:
    >>> probe_ollama("http://127.0.0.1:9", timeout=0.2) is None    # nothing listens there
    True
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import PrivateAttr

from rag.models.llms import DEFAULT_CONTEXT_WINDOW, context_window_setting

__all__ = ["DEFAULT_OLLAMA_HOST", "OllamaChatModel", "ollama_host", "probe_ollama"]

DEFAULT_OLLAMA_HOST = "http://127.0.0.1:11434"
_ROLES = {"human": "user", "ai": "assistant", "system": "system"}


def ollama_host() -> str:
    """`OLLAMA_HOST` as a URL (Ollama accepts a bare `host:port`), else 127.0.0.1:11434."""
    host = os.environ.get("OLLAMA_HOST", "").strip() or DEFAULT_OLLAMA_HOST
    return host if "://" in host else f"http://{host}"


def _show(client: httpx.Client, host: str, model: str) -> dict[str, Any]:
    response = client.post(f"{host}/api/show", json={"model": model})
    return response.json() if response.status_code == 200 else {}


def probe_ollama(host: str | None = None, *, timeout: float = 0.5, model: str | None = None) -> str | None:
    """The model to chat with on the Ollama server at `host` (see the module docstring), or None."""
    host = (host or ollama_host()).rstrip("/")
    wanted = model or os.environ.get("RAG_LLM_MODEL") or None
    try:
        with httpx.Client(timeout=timeout) as client:
            tags = client.get(f"{host}/api/tags")
            if tags.status_code != 200:
                return None
            names = [m.get("name") or m.get("model") for m in (tags.json().get("models") or []) if isinstance(m, dict)]
            names = [n for n in names if isinstance(n, str) and n]
            if wanted:
                return wanted if wanted in names else None
            for name in names:
                capabilities = _show(client, host, name).get("capabilities")
                if not capabilities or "completion" in capabilities:
                    return name
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return None


class OllamaChatModel(BaseChatModel):
    """A chat model served by Ollama (`/api/chat`), which knows its context window."""

    model: str
    base_url: str = DEFAULT_OLLAMA_HOST
    temperature: float = 0.0
    max_tokens: int = 512
    timeout: float = 120.0
    _window: int | None = PrivateAttr(default=None)

    @property
    def _llm_type(self) -> str:
        return "ollama"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": self.model, "base_url": self.base_url}

    def context_window(self) -> int | None:
        """The model's trained window (`/api/show`), capped by `RAG_LLM_CONTEXT` or 8,192 (asked once)."""
        if self._window is None:
            cap = context_window_setting() or DEFAULT_CONTEXT_WINDOW
            try:
                with httpx.Client(timeout=5.0) as client:
                    info = _show(client, self.base_url.rstrip("/"), self.model).get("model_info") or {}
            except (httpx.HTTPError, ValueError):
                info = {}
            trained = [v for k, v in info.items() if k.endswith(".context_length") and isinstance(v, int)]
            self._window = min([cap, *trained])
        return self._window

    def count_tokens(self, text: str) -> int:
        """Ollama has no tokenize endpoint: a safe bound of one token per 3 characters."""
        return len(text) // 3 + 1

    def _body(self, messages: list[BaseMessage], stop: list[str] | None, stream: bool, **kwargs: Any) -> dict[str, Any]:
        options = {"temperature": kwargs.get("temperature", self.temperature),
                   "num_predict": kwargs.get("max_tokens", self.max_tokens), "num_ctx": self.context_window()}
        if stop:
            options["stop"] = stop
        return {"model": self.model, "stream": stream, "options": options,
                "messages": [{"role": _ROLES.get(m.type, "user"), "content": str(m.content)} for m in messages]}

    def _url(self) -> str:
        return f"{self.base_url.rstrip('/')}/api/chat"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        with httpx.Client(timeout=self.timeout) as client:
            response = client.post(self._url(), json=self._body(messages, stop, False, **kwargs))
        _raise_for(response)
        data = response.json()
        prompt, completion = int(data.get("prompt_eval_count") or 0), int(data.get("eval_count") or 0)
        message = AIMessage(content=str((data.get("message") or {}).get("content") or ""),
                            usage_metadata={"input_tokens": prompt, "output_tokens": completion,
                                            "total_tokens": prompt + completion})
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        with httpx.Client(timeout=self.timeout) as client, \
                client.stream("POST", self._url(), json=self._body(messages, stop, True, **kwargs)) as response:
            if response.status_code != 200:
                response.read()
                _raise_for(response)
            for line in response.iter_lines():
                if not line.strip():
                    continue
                data = json.loads(line)
                text = str((data.get("message") or {}).get("content") or "")
                if text:
                    chunk = ChatGenerationChunk(message=AIMessageChunk(content=text))
                    if run_manager:
                        run_manager.on_llm_new_token(text, chunk=chunk)
                    yield chunk
                if data.get("done"):
                    break


def _raise_for(response: httpx.Response) -> None:
    if response.status_code != 200:
        try:
            detail = response.json().get("error") or response.text
        except ValueError:
            detail = response.text
        raise RuntimeError(f"Ollama answered {response.status_code}: {str(detail)[:300]}")
