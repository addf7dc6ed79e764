"""bf16 MiniLM against fp32 on real text: agreement, ids, the embedding cache and knowledge bases."""

from __future__ import annotations

import numpy as np
import pytest
from langchain_core.documents import Document

from rag.base.errors import ConfigError
from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.embedding_cache import CachedEmbeddings
from rag.models.embeddings import DEFAULT_EMBEDDING_ID, embedding_id, minilm_embeddings

pytestmark = pytest.mark.integration

TEXTS = [
    "Net sales were $34,229 million in 2022, down 3.2% from 2021.",
    "The company repurchased shares and paid dividends of $3.4 billion.",
    "Goodwill impairment expense related to the divestiture of the health care business.",
    "Operating income margin improved on lower restructuring charges.",
    "Litigation accruals for respirator mask and earplug claims increased.",
    "Capital expenditures were $1.7 billion, mostly for manufacturing capacity.",
    "Our cloud segment revenue grew 28% year over year.",
    "Interest rates rose, raising the cost of floating-rate debt.",
]


@pytest.fixture(scope="module")
def bf16():
    return minilm_embeddings(precision="bf16")


@pytest.fixture(scope="module")
def fp32():
    return minilm_embeddings(precision="fp32")


def test_bf16_vectors_are_unit_length_float_and_close_to_fp32(bf16, fp32) -> None:
    low, full = np.array(bf16.embed_documents(TEXTS)), np.array(fp32.embed_documents(TEXTS))
    assert low.shape == full.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(np.linalg.norm(low, axis=1), 1.0, atol=1e-5)  # pooled and normalised in fp32
    assert np.min(np.sum(low * full, axis=1)) > 0.999
    query_low, query_full = np.array(bf16.embed_query(TEXTS[0])), np.array(fp32.embed_query(TEXTS[0]))
    assert float(query_low @ query_full) > 0.999
    assert (np.argsort(-(low @ full[0])) == np.argsort(-(full @ full[0]))).mean() >= 0.75


def test_precision_is_part_of_the_model_id(bf16, fp32) -> None:
    assert embedding_id(fp32) == DEFAULT_EMBEDDING_ID  # unchanged, so existing stores stay valid
    assert embedding_id(bf16) == f"{DEFAULT_EMBEDDING_ID}@bf16"


def test_embedding_cache_never_serves_fp32_vectors_to_bf16(tmp_path, bf16, fp32) -> None:
    path = tmp_path / "embeddings.sqlite"
    CachedEmbeddings(fp32, path=path).embed_documents(TEXTS[:3])
    cached = CachedEmbeddings(bf16, path=path)
    cached.embed_documents(TEXTS[:3])
    assert cached.stats["misses"] == 3
    again = CachedEmbeddings(bf16, path=path)
    again.embed_documents(TEXTS[:3])
    assert again.stats["misses"] == 0


def test_knowledge_base_keeps_its_precision(tmp_path, bf16, fp32, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = [Document(page_content=t, metadata={"source": f"s{i}"}) for i, t in enumerate(TEXTS)]
    kb = KnowledgeBase("filings", tmp_path, embedding=bf16)
    kb.add_documents(docs)
    with pytest.raises(ConfigError, match="@bf16"):
        KnowledgeBase("filings", tmp_path, embedding=fp32)
    monkeypatch.setenv("RAG_EMBEDDING_PRECISION", "fp32")
    reopened = KnowledgeBase("filings", tmp_path)  # no model given: the manifest's precision, not the env's
    assert embedding_id(reopened.embedding_model) == f"{DEFAULT_EMBEDDING_ID}@bf16"
    hits = reopened.as_resource().retrieve("How much were capital expenditures?", search_kwargs={"k": 1})
    assert "Capital expenditures" in hits[0].page_content


def test_a_model_converted_to_bf16_weights_gets_its_own_id() -> None:
    import torch

    converted = minilm_embeddings(precision="fp32")
    converted._client.to(torch.bfloat16)
    assert embedding_id(converted) == f"{DEFAULT_EMBEDDING_ID}@bfloat16-weights"


def test_a_config_with_the_default_model_opens_a_knowledge_base_in_its_own_precision(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rag.compose.generator import RAG

    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# Sales\n\n" + " ".join(TEXTS[:4]))
    config = {"embedding": {"kind": "default"}, "llm": {"kind": "extractive"},
              "resources": [{"name": "notes", "kind": "knowledge_base", "path": str(tmp_path / "store"),
                             "index": {"paths": [str(tmp_path / "notes")]}}]}
    monkeypatch.setenv("RAG_EMBEDDING_PRECISION", "fp32")
    RAG.from_config(config)
    monkeypatch.setenv("RAG_EMBEDDING_PRECISION", "bf16")  # a new default must not lock users out of old stores
    rag = RAG.from_config(config)
    kb = KnowledgeBase.open("notes", tmp_path / "store")
    assert kb.manifest.embedding.id == DEFAULT_EMBEDDING_ID
    docs = rag.resources[0].retriever.invoke("How much were net sales in 2022?")
    assert docs and "34,229" in docs[0].page_content
