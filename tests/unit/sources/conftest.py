"""Fixtures for the source tests: a counting fake embedder and a knowledge base on disk."""

from __future__ import annotations

import pytest
from source_helpers import CountingEmbedding

from rag.compose.knowledge_base import KnowledgeBase


@pytest.fixture
def counting() -> CountingEmbedding:
    return CountingEmbedding()


@pytest.fixture
def kb(tmp_path, counting) -> KnowledgeBase:
    return KnowledgeBase("sources", tmp_path / "store", embedding=counting)
