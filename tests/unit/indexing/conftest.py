"""Fixtures for the indexing tests: a fake embedder that records what it was asked to embed."""

from __future__ import annotations

import threading

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings


class RecordingEmbedding(Embeddings):
    """DeterministicFakeEmbedding that records every batch it embeds (a real fake, not a mock)."""

    def __init__(self, size: int = 16) -> None:
        self.inner = DeterministicFakeEmbedding(size=size)
        self.size = size
        self.batches: list[list[str]] = []
        self.queries: list[str] = []
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self.batches.append(list(texts))
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            self.queries.append(text)
        return self.inner.embed_query(text)

    @property
    def embedded(self) -> list[str]:
        return [t for batch in self.batches for t in batch]


@pytest.fixture
def recording_embedding() -> RecordingEmbedding:
    return RecordingEmbedding()
