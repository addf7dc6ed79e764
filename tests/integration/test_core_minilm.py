"""The core on real components: the MiniLM model from the wheel and a persistent Chroma store."""

from __future__ import annotations

import re

import numpy as np
import pytest

from rag import RAG, Resource
from rag.models.embeddings import DEFAULT_EMBEDDING_ID, embedding_id, native_bf16

pytestmark = pytest.mark.integration

FACTS = {
    "cooking.md": "To make bread, mix flour, water, yeast and salt, knead the dough and bake it for forty minutes.",
    "space.md": "The Moon orbits the Earth about once every 27 days and always shows the same face.",
    "finance.md": "The company's net revenue rose to 4.2 billion dollars in fiscal year 2023.",
}


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "corpus"
    root.mkdir()
    for name, text in FACTS.items():
        (root / name).write_text(f"# {name[:-3].title()}\n\n{text}\n")
    return root


def test_minilm_gives_normalised_384_d_vectors_offline(minilm):
    vec = np.array(minilm.embed_query("hello world"))
    assert vec.shape == (384,) and abs(np.linalg.norm(vec) - 1) < 1e-4
    # the default precision is `auto`: the plain id for fp32, `@bf16` on CPUs with native bfloat16
    assert embedding_id(minilm) == DEFAULT_EMBEDDING_ID + ("@bf16" if native_bf16() else "")


def test_semantic_search_finds_paraphrases(corpus, tmp_path, minilm):
    res = Resource.from_directory("kb", corpus, persist_directory=tmp_path / "store", embedding=minilm)
    top = res.retrieve("How long does it take the lunar satellite to circle our planet?", search_kwargs={"k": 1})
    assert top[0].metadata["source"].endswith("space.md")


def test_persistent_store_reopens_with_same_documents(corpus, tmp_path, minilm):
    from rag.stores.chroma import new_chroma

    Resource.from_directory("kb", corpus, persist_directory=tmp_path / "store", embedding=minilm)
    reopened = Resource.from_vectorstore("kb", new_chroma("kb", minilm, persist_directory=tmp_path / "store"))
    hits = reopened.retrieve("baking bread", search_kwargs={"k": 1, "filter": {"title": "Cooking"}})
    assert "flour" in hits[0].page_content
    assert reopened.retriever.vectorstore._collection.count() == 3


def test_default_rag_answers_offline_with_a_cited_sentence(corpus, minilm):
    rag = RAG(resources=[Resource.from_directory("kb", corpus, embedding=minilm)])
    out = rag.chain().invoke("What was the company's revenue in 2023?")
    match = re.search(r"4\.2 billion dollars[^\[]*\[(\d+)\]", out["answer"])
    assert match, out["answer"]
    cited = int(match.group(1))
    assert out["context"][cited - 1].metadata["source"].endswith("finance.md")
