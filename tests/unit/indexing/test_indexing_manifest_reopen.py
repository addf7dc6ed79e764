"""`Manifest.reopen`: a knowledge base reopened through its manifest in one pass (owner, model, parts)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import ConfigError, StoreError
from rag.indexing.autocontext import AutoContext
from rag.indexing.chunking import TokenChunker
from rag.indexing.manifest import EmbeddingInfo, Manifest, StoreInfo
from rag.indexing.tags import KeywordTagger
from rag.indexing.tokens import ApproximateTokenizer

MODEL = "DeterministicFakeEmbedding(size=8)"


def _manifest() -> Manifest:
    chunker = TokenChunker(chunk_size=64, chunk_overlap=8, tokenizer=ApproximateTokenizer())
    return Manifest(name="docs", embedding=EmbeddingInfo(id=MODEL, dimension=8), chunking=chunker.settings(),
                    autocontext=AutoContext(enabled=False).settings(), tagger=KeywordTagger().settings(),
                    store=StoreInfo(collection="docs"))


def _reopen(manifest: Manifest, tmp_path: Path, **given: object) -> object:
    parts = {"backend": "chroma", "collection": "docs", "embedding": None, "chunker": None, "autocontext": None,
             "tagger": None, **given}
    return manifest.reopen("docs", tmp_path, **parts)   # type: ignore[arg-type]


def test_nothing_given_reopens_with_the_recorded_parts(tmp_path: Path) -> None:
    parts = _reopen(_manifest(), tmp_path)
    assert parts.model_id == MODEL and isinstance(parts.embedding, DeterministicFakeEmbedding)
    assert (parts.chunker.chunk_size, parts.chunker.chunk_overlap, parts.chunker.tokenizer.name) == (
        64, 8, ApproximateTokenizer.name)
    assert parts.autocontext.enabled is False and isinstance(parts.tagger, KeywordTagger)


def test_the_same_parts_given_are_kept(tmp_path: Path) -> None:
    chunker = TokenChunker(chunk_size=64, chunk_overlap=8, tokenizer=ApproximateTokenizer())
    parts = _reopen(_manifest(), tmp_path, embedding=DeterministicFakeEmbedding(size=8), chunker=chunker)
    assert parts.chunker is chunker


@pytest.mark.parametrize(("given", "error", "says"), [
    ({"embedding": DeterministicFakeEmbedding(size=16)}, ConfigError, "was built with the embedding model"),
    ({"chunker": TokenChunker(chunk_size=100, tokenizer=ApproximateTokenizer())}, ConfigError, "chunk_size=64"),
    ({"autocontext": AutoContext()}, ConfigError, "autocontext enabled=False"),
    ({"collection": "other"}, StoreError, "store.collection 'docs' (expected 'other')"),
    ({"backend": "pgvector"}, ConfigError, "keeps its chunks in chroma, not pgvector"),
])
def test_a_part_other_than_recorded_is_refused_saying_which(tmp_path: Path, given: dict, error: type, says: str) -> None:
    with pytest.raises(error) as raised:
        _reopen(_manifest(), tmp_path, **given)
    assert says in str(raised.value)


def test_a_chunker_rag_cannot_make_must_be_given(tmp_path: Path) -> None:
    manifest = _manifest()
    manifest.chunking = {"type": "pages", "size": 1}
    with pytest.raises(ConfigError, match="pass chunker=<that chunker>"):
        _reopen(manifest, tmp_path)
