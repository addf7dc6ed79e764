"""Fixtures for the source tests: a counting fake embedder, a knowledge base on disk, a local web site."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from source_helpers import CountingEmbedding, Site

from rag.compose.knowledge_base import KnowledgeBase


@pytest.fixture
def counting() -> CountingEmbedding:
    return CountingEmbedding()


@pytest.fixture
def kb(tmp_path, counting) -> KnowledgeBase:
    return KnowledgeBase("sources", tmp_path / "store", embedding=counting)


@pytest.fixture
def site() -> Iterator[Site]:
    site = Site()
    yield site
    site.server.shutdown()
    site.server.server_close()
