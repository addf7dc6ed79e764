"""Where the embedding model runs: a CUDA GPU, then Apple's MPS, then the CPU; or the device pinned.

`RAG_EMBEDDING_DEVICE` (or `device=` / a config's `embedding: {device: ...}`) is `auto` (default),
`cpu`, `cuda`, `cuda:N` or `mps`. `auto` is decided without importing torch (questions never load
it): CUDA when the installed torch is a CUDA build and an NVIDIA device is visible, MPS on Apple
silicon, else the CPU. A pinned device that is not there is a `ConfigError` naming what is missing
and what is valid here; torch confirms the device when the model is loaded (`check_torch_device`).

Each device has its batch size (`BATCH_SIZES`: 512 texts per forward pass on a GPU, 64 on a CPU)
and its precision under `auto` (`rag.models.embeddings.minilm_precision`: fp16 on CUDA).

Example:
    >>> device_setting("CUDA:1"), device_setting(None) in DEVICE_SETTINGS
    ('cuda:1', True)
    >>> resolve_device("cpu")
    'cpu'
    >>> device_setting("tpu")
    Traceback (most recent call last):
    ...
    rag.base.errors.ConfigError: device='tpu' is not valid; valid: auto, cpu, cuda, cuda:N, mps
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import os
import platform
import re
import sys
from pathlib import Path

from rag.base.errors import ConfigError

__all__ = ["BATCH_SIZES", "DEVICE_ENV_VAR", "DEVICE_SETTINGS", "batch_size_for", "check_torch_device",
           "embedding_device", "cpu_has_vnni", "cuda_unavailable_reason", "device_kind", "device_setting", "probe_device",
           "resolve_device"]

DEVICE_SETTINGS = ("auto", "cpu", "cuda", "mps")
DEVICE_ENV_VAR = "RAG_EMBEDDING_DEVICE"
#: texts per forward pass: a GPU is fed in large batches (the H200 in issue 38 ran batch 512), a CPU in small ones
BATCH_SIZES = {"cuda": 512, "mps": 128, "cpu": 64}
_CUDA_N = re.compile(r"^cuda:\d{1,3}$")


def device_setting(device: str | None = None) -> str:
    """`device`, else `RAG_EMBEDDING_DEVICE`, else `auto`: validated and lower-cased (nothing probed).

    Raises:
        ConfigError: not one of auto, cpu, cuda, cuda:N, mps.
    """
    value = device if device is not None else os.environ.get(DEVICE_ENV_VAR, "")
    value = str(value).strip().lower() or "auto"
    if value not in DEVICE_SETTINGS and not _CUDA_N.match(value):
        source = "device" if device is not None else DEVICE_ENV_VAR
        raise ConfigError(f"{source}={value!r} is not valid; valid: auto, cpu, cuda, cuda:N, mps")
    return value


def device_kind(device: str) -> str:
    """`cuda` for `cuda:N`, else the device itself."""
    return "cuda" if device.startswith("cuda") else device


def _torch_cuda_version() -> str | None:
    """The CUDA version the installed torch was built with, read from torch/version.py (torch is not imported).

    "" when torch is missing, None for a CPU build."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return ""
    try:
        text = (Path(spec.origin).parent / "version.py").read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(r"^cuda\s*(?::\s*[^=]+)?=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
    return match.group(1) if match else None


def cuda_unavailable_reason() -> str | None:
    """Why CUDA cannot be used here (None when it looks usable): torch missing or a CPU build, no NVIDIA
    device, or `CUDA_VISIBLE_DEVICES` hiding them all."""
    cuda = _torch_cuda_version()
    if cuda == "":
        return "torch is not installed (pip install 'rag-runnables[local]')"
    if cuda is None:
        version = _torch_version()
        return f"the installed torch {version} is a CPU build (no CUDA)"
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return "CUDA_VISIBLE_DEVICES hides every GPU"
    if not glob.glob("/dev/nvidia[0-9]*") and not Path("/proc/driver/nvidia/version").exists():
        return "no NVIDIA GPU is visible (no /dev/nvidia* device)"
    return None


def _torch_version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "(unknown)"


def _mps_unavailable_reason() -> str | None:
    if sys.platform != "darwin" or platform.machine() != "arm64":
        return "MPS needs a Mac with Apple silicon"
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed (pip install 'rag-runnables[local]')"
    return None


@functools.cache
def probe_device() -> str:
    """The device `auto` picks: `cuda`, `mps` or `cpu` (decided once per process, without importing torch)."""
    if cuda_unavailable_reason() is None:
        return "cuda"
    if _mps_unavailable_reason() is None:
        return "mps"
    return "cpu"


def resolve_device(device: str | None = None) -> str:
    """The device to run on: `auto` resolved by `probe_device()`, a pinned one checked to be there.

    Raises:
        ConfigError: the setting is not valid, or the pinned device is not on this machine.
    """
    setting = device_setting(device)
    if setting == "auto":
        return probe_device()
    kind = device_kind(setting)
    reason = cuda_unavailable_reason() if kind == "cuda" else _mps_unavailable_reason() if kind == "mps" else None
    if reason is not None:
        source = f"device={device!r}" if device is not None else f"{DEVICE_ENV_VAR}={setting}"
        raise ConfigError(f"{source} pins the embedding model to {setting}, but {reason}; valid here: "
                          f"{', '.join(available_settings())}")
    return setting


def available_settings() -> list[str]:
    """The settings that would work on this machine (`auto` and `cpu` always)."""
    return ["auto", "cpu"] + [k for k, why in (("cuda", cuda_unavailable_reason()),
                                               ("mps", _mps_unavailable_reason())) if why is None]


def check_torch_device(device: str) -> None:
    """Confirm with torch (imported) that `device` works: a `ConfigError` when it does not."""
    import torch

    kind = device_kind(device)
    if kind == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(device.partition(":")[2] or 0)
        if index >= count:
            raise ConfigError(f"the embedding model was to run on {device}, but torch {torch.__version__} sees "
                              f"{count} CUDA device(s); set {DEVICE_ENV_VAR}=cpu or auto")
    elif kind == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"the embedding model was to run on mps, but torch {torch.__version__} cannot use it "
                          f"here; set {DEVICE_ENV_VAR}=cpu or auto")


def batch_size_for(device: str) -> int:
    """Texts per forward pass on `device` (`BATCH_SIZES`).

    Example:
        >>> batch_size_for("cuda:0"), batch_size_for("cpu")
        (512, 64)
    """
    return BATCH_SIZES[device_kind(device)]


@functools.cache
def cpu_has_vnni() -> bool:
    """Whether this CPU multiplies 8-bit integers without 16-bit saturation (AVX-512 VNNI, AVX-VNNI or AMX).

    ONNX Runtime's int8 products are exact there; on older x86 CPUs they can saturate, which moved the
    vectors much further from fp32 (docs/models.md): int8 there logs a warning.
    """
    try:
        flags = set(Path("/proc/cpuinfo").read_text(errors="replace").split())
    except OSError:
        return False
    return bool(flags & {"avx512_vnni", "avx_vnni", "amx_int8"})


def embedding_device(model: object) -> str:
    """Where and how `model` embeds documents, for reports (`MiniLMEmbeddings.describe()`), else "".

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> embedding_device(DeterministicFakeEmbedding(size=4))
        ''
    """
    describe = getattr(model, "describe", None)
    text = describe() if callable(describe) else ""
    return text if isinstance(text, str) else ""
