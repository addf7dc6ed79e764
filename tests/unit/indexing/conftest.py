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


def write_pdf(path, pages: list[str]) -> None:
    """Write a real PDF (Helvetica text, one string per page, lines split on newlines)."""
    objects: list[bytes] = []
    n = len(pages)
    font_id = 3 + 2 * n
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode())
    for i, text in enumerate(pages):
        lines = [ln.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") for ln in text.split("\n")]
        ops = "BT /F1 11 Tf 14 TL 50 750 Td " + " ".join(f"({ln}) Tj T*" for ln in lines) + " ET"
        stream = ops.encode("latin-1")
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                       f"/Resources << /Font << /F1 {font_id} 0 R >> >> /Contents {4 + 2 * i} 0 R >>".encode())
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))


@pytest.fixture
def make_pdf():
    return write_pdf
