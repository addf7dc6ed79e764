"""The MiniLM precision setting: validation and the environment variable (no model is loaded)."""

from __future__ import annotations

import pytest

from rag.base.errors import ConfigError
from rag.models.embeddings import (
    PRECISION_CHOICES,
    PRECISION_SETTINGS,
    cpu_precision,
    minilm_precision,
    native_bf16,
)


def _cpu_flags() -> set[str]:
    try:
        return set(open("/proc/cpuinfo", encoding="utf-8", errors="replace").read().split())
    except OSError:
        return set()


def test_native_bf16_follows_the_cpu_flags() -> None:
    assert native_bf16() == bool({"amx_bf16", "avx512_bf16"} & _cpu_flags())


@pytest.mark.parametrize("setting", ["", "auto", " AUTO "])
def test_auto_is_the_default_and_resolves_by_cpu(monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    monkeypatch.setenv("RAG_EMBEDDING_DEVICE", "cpu")   # (tests/unit/models/test_models_devices.py: the GPU)
    monkeypatch.setenv("RAG_EMBEDDING_PRECISION", setting)
    assert minilm_precision() == cpu_precision()
    monkeypatch.delenv("RAG_EMBEDDING_PRECISION")
    assert minilm_precision() == cpu_precision()
    assert minilm_precision("auto") in PRECISION_CHOICES


def test_environment_variable_selects_precision_case_insensitively(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_EMBEDDING_PRECISION", " BF16 ")
    assert minilm_precision() == "bf16"


def test_argument_wins_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_EMBEDDING_PRECISION", "bf16")
    assert minilm_precision("fp32") == "fp32"


@pytest.mark.parametrize("value", ["int4", "fp8", "bfloat"])
def test_unknown_precision_lists_valid_ones(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("RAG_EMBEDDING_PRECISION", value)
    with pytest.raises(ConfigError, match=f"RAG_EMBEDDING_PRECISION='{value}'.*valid: auto, fp32, bf16, fp16, int8"):
        minilm_precision()
    with pytest.raises(ConfigError, match="precision="):
        minilm_precision(value)
    assert PRECISION_CHOICES == ("fp32", "bf16", "fp16", "int8")
    assert PRECISION_SETTINGS == ("auto", "fp32", "bf16", "fp16", "int8")
