"""The NumPy MiniLM against sentence-transformers (torch) on several hundred varied texts.

The NumPy forward pass is the default MiniLM for questions and fp32 documents under the same
model id as torch fp32, so its vectors must match: cosine >= 0.9999 on every text (prose,
tables, code, questions, unicode, empty and blank texts, texts cut at 256 word pieces).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document

from rag.compose.knowledge_base import KnowledgeBase
from rag.models.embeddings import (
    DEFAULT_EMBEDDING_ID,
    MiniLMEmbeddings,
    embedding_id,
    minilm_embeddings,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SPECIAL = [
    "", " ", "\n\n", "a", "?", "[CLS] [SEP] [PAD] [MASK]", "Ünïcödé façade naïve café — résumé",
    "東京は日本の首都です。人口は約1400万人。", "مرحبا بالعالم", "Привет, мир! Как дела?", "🚀🔥 emoji 👩‍💻 only 🇫🇷",
    "e\u0301 combining accents and zero\u200bwidth spaces", "tab\tseparated\tvalues\r\nand CRLF",
    "x" * 400, "supercalifragilisticexpialidocious" * 5, "1,234,567.89 USD; 3.2% YoY; (45) net loss",
    "| year | revenue | margin |\n|---|---|---|\n| 2022 | 34,229 | 19.1% |", "def f(x):\n    return x ** 2  # square",
    "SELECT * FROM filings WHERE year > 2020;", "https://example.com/path?q=minilm&lang=en#frag",
    "\x00\x01 control \x7f characters", "WHAT IS THE NET INCOME IN 2023?", "   leading and trailing   ",
]


def _varied_texts() -> list[str]:
    """Paragraphs, sentences, questions and long passages from the project's docs, plus SPECIAL."""
    pages = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md"))]
    paragraphs = [p.strip() for page in pages for p in re.split(r"\n\s*\n", page) if p.strip()]
    sentences = [s for p in paragraphs[:120] for s in re.split(r"(?<=[.!?])\s+", p) if len(s) > 20]
    questions = [f"How does {s.split()[0].lower()} work?" for s in sentences[:40] if s.split()]
    long = [" ".join(pages[i % len(pages)].split()[:600]) for i in range(20)]  # far past 256 word pieces
    texts = SPECIAL + paragraphs[:200] + sentences[:150] + questions + long
    assert len(texts) >= 300
    return texts


@pytest.fixture(scope="module")
def torch_fp32():
    return minilm_embeddings(precision="fp32")


@pytest.fixture(scope="module")
def light():
    return MiniLMEmbeddings(precision="fp32")


def test_numpy_documents_match_torch_fp32_on_varied_texts(torch_fp32, light) -> None:
    texts = _varied_texts()
    ours = np.array(light.embed_documents(texts))
    theirs = np.array(torch_fp32.embed_documents(texts))
    cosine = np.sum(ours * theirs, axis=1)
    worst = int(np.argmin(cosine))
    assert cosine.min() >= 0.9999, f"cosine {cosine.min():.6f} on {texts[worst][:80]!r}"
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    tokenizer = light_tokenizer_lengths(texts)
    assert max(tokenizer) == 256 and sum(n == 256 for n in tokenizer) >= 20  # truncation was exercised


def light_tokenizer_lengths(texts: list[str]) -> list[int]:
    from rag.models.embeddings import numpy_minilm

    return [len(ids) for ids in numpy_minilm().token_ids(texts)]


def test_numpy_queries_match_torch_queries_in_fp32_and_bf16(torch_fp32, light) -> None:
    questions = [t for t in _varied_texts() if t.endswith("?")][:40] + SPECIAL[:8]
    ours = np.array([light.embed_query(q) for q in questions])
    assert np.min(np.sum(ours * np.array([torch_fp32.embed_query(q) for q in questions]), axis=1)) >= 0.9999
    # A bf16 store embeds its questions with the NumPy fp32 encoder too: as close to bf16 torch's.
    torch_bf16 = minilm_embeddings(precision="bf16")
    assert np.min(np.sum(ours * np.array([torch_bf16.embed_query(q) for q in questions]), axis=1)) >= 0.9999


def test_a_store_built_with_torch_fp32_opens_with_the_default_and_finds_the_same(tmp_path, torch_fp32) -> None:
    texts = ["Capital expenditures were $1.7 billion, mostly for manufacturing capacity.",
             "The company repurchased shares and paid dividends of $3.4 billion.",
             "Litigation accruals for respirator mask and earplug claims increased."]
    docs = [Document(page_content=t, metadata={"source": f"s{i}"}) for i, t in enumerate(texts)]
    built = KnowledgeBase("filings", tmp_path, embedding=torch_fp32)
    built.add_documents(docs)
    reopened = KnowledgeBase("filings", tmp_path, cache=False)  # the manifest's model: the default MiniLM
    assert isinstance(reopened.embedding_model, MiniLMEmbeddings)
    assert embedding_id(reopened.embedding_model) == DEFAULT_EMBEDDING_ID == built.manifest.embedding.id
    hits = reopened.as_resource().retrieve("How much was spent on capital expenditures?", search_kwargs={"k": 1})
    assert hits[0].page_content.startswith("Capital expenditures")
