"""The MiniLM precision setting: validation and the environment variable (no model is loaded)."""

from __future__ import annotations

import pytest

from rag.core.errors import ConfigError
from rag.models.embeddings import PRECISION_CHOICES, minilm_precision


def test_precision_defaults_to_fp32(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAG_EMBEDDING_PRECISION", raising=False)
    assert minilm_precision() == "fp32"


def test_environment_variable_selects_precision_case_insensitively(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_EMBEDDING_PRECISION", " BF16 ")
    assert minilm_precision() == "bf16"


def test_argument_wins_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_EMBEDDING_PRECISION", "bf16")
    assert minilm_precision("fp32") == "fp32"


@pytest.mark.parametrize("value", ["int8", "fp16", "bfloat"])
def test_unknown_precision_lists_valid_ones(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("RAG_EMBEDDING_PRECISION", value)
    with pytest.raises(ConfigError, match=f"RAG_EMBEDDING_PRECISION='{value}'.*valid: fp32, bf16"):
        minilm_precision()
    with pytest.raises(ConfigError, match="precision="):
        minilm_precision(value)
    assert PRECISION_CHOICES == ("fp32", "bf16")
