"""all-MiniLM-L6-v2 through sentence-transformers (torch) on a device, in fp32, bf16 or fp16.

The path documents take on a GPU (CUDA in fp16, MPS), and on a CPU for bf16 (autocast) and fp16.
`rag.models.embeddings` decides when; this module only builds the model (importing torch).

- fp32: the weights as shipped;
- bf16: the weights stay fp32, matrix products run under bfloat16 autocast (CPU with AMX / AVX-512
  BF16, or CUDA), pooling in fp32;
- fp16: the weights converted to float16 (`model.half()`, as measured on the H200 in issue 38),
  pooling and normalisation in fp32. On a CPU this runs, slowly, so that a knowledge base built on a
  GPU can take new documents on a machine without one (same id, same kind of vectors).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from langchain_core.embeddings import Embeddings

from rag.base.errors import MissingDependencyError
from rag.models.devices import check_torch_device, device_kind

__all__ = ["quiet_transformers", "torch_minilm", "weights_precision"]


def torch_minilm(model_path: str, *, batch_size: int, precision: str, device: str = "cpu") -> Embeddings:
    """A new sentence-transformers MiniLM on `device` in `precision` (`fp32`, `bf16` or `fp16`).

    Raises:
        MissingDependencyError: langchain-huggingface / sentence-transformers are not installed.
        ConfigError: torch cannot use `device` here.
    """
    try:
        from langchain_huggingface import HuggingFaceEmbeddings
    except ImportError as exc:
        raise MissingDependencyError.for_extra("langchain-huggingface", "local", "The offline embedding model") from exc
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    quiet_transformers()
    check_torch_device(device)
    emb = HuggingFaceEmbeddings(model_name=model_path, model_kwargs={"device": device},
                                encode_kwargs={"normalize_embeddings": True, "batch_size": batch_size})
    transformer = emb._client[0]
    if precision == "bf16":
        transformer.forward = _autocast(transformer.forward, device_kind(device), "bfloat16")
    elif precision == "fp16":
        emb._client.half()
        transformer.forward = _float_pooling(transformer.forward)
    if precision != "fp32":
        emb._client.rag_precision = precision  # read by embedding_id
    return emb


def _autocast(forward: Callable[..., dict], device_type: str, dtype: str) -> Callable[..., dict]:
    """Run the transformer under autocast: matmuls in `dtype`, layer norms and softmax in fp32.

    Weights stay fp32 (bf16 weights were 20% faster on a CPU but moved retrieval results; docs/models.md).
    """
    @functools.wraps(forward)
    def run(*args: Any, **kwargs: Any) -> dict:
        import torch

        with torch.autocast(device_type, dtype=getattr(torch, dtype)):
            features = forward(*args, **kwargs)
        features["token_embeddings"] = features["token_embeddings"].float()  # pooling in fp32
        return features

    return run


def _float_pooling(forward: Callable[..., dict]) -> Callable[..., dict]:
    """fp16 weights: the token embeddings leave the transformer in fp32, so pooling and L2 norm are fp32."""
    @functools.wraps(forward)
    def run(*args: Any, **kwargs: Any) -> dict:
        features = forward(*args, **kwargs)
        features["token_embeddings"] = features["token_embeddings"].float()
        return features

    return run


def weights_precision(embedding: Embeddings) -> str:
    """`bf16` / `fp16` for `torch_minilm(precision=...)`; `fp32` for fp32 weights; else e.g. `bfloat16-weights`.

    A model someone converted themselves (`model.to(torch.bfloat16)`) gives other vectors than the
    autocast `bf16`, so it gets its own id and is never mixed with either.
    """
    client = getattr(embedding, "_client", None)
    marked = getattr(client, "rag_precision", None)
    if marked in ("bf16", "fp16"):
        return str(marked)
    try:
        dtype = str(next(iter(client.parameters())).dtype) if client is not None else "torch.float32"
    except (AttributeError, StopIteration, TypeError):
        return "fp32"
    dtype = dtype.removeprefix("torch.")
    return "fp32" if dtype == "float32" else f"{dtype}-weights"


def quiet_transformers() -> None:
    """No weight-loading progress bars on the CLI's stderr (warnings and errors still show)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
