"""Chunking: split loaded documents into retrieval-sized chunks with provenance metadata.

Every chunk carries `doc_id` (a hash of its source and page), `chunk_index` (its position in
the document), `source`, `page` when known and `title`.

Example:
    >>> from langchain_core.documents import Document
    >>> chunks = split_documents([Document(page_content="word " * 400, metadata={"source": "a.txt"})],
    ...                          chunk_size=500, chunk_overlap=50)
    >>> [c.metadata["chunk_index"] for c in chunks][:3]
    [0, 1, 2]
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter

__all__ = ["DEFAULT_CHUNK_OVERLAP", "DEFAULT_CHUNK_SIZE", "document_id", "split_documents"]

# ~800 characters of English stays under all-MiniLM-L6-v2's 256 word-piece limit.
DEFAULT_CHUNK_SIZE = 800
DEFAULT_CHUNK_OVERLAP = 100


def document_id(source: str) -> str:
    """A stable id for a source document (a file path or URL)."""
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def split_documents(docs: Sequence[Document], *, chunk_size: int = DEFAULT_CHUNK_SIZE,
                    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP) -> list[Document]:
    """Split documents into chunks numbered per source document (pages continue the count)."""
    if chunk_size < 1 or not 0 <= chunk_overlap < chunk_size:
        raise ValueError(f"need chunk_size >= 1 and 0 <= chunk_overlap < chunk_size; got {chunk_size}, {chunk_overlap}")
    splitter = RecursiveCharacterTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    counters: dict[str, int] = {}
    chunks = []
    for doc in docs:
        source = str(doc.metadata.get("source", ""))
        doc_id = doc.metadata.get("doc_id") or document_id(source or doc.page_content[:200])
        for text in splitter.split_text(doc.page_content):
            index = counters.get(doc_id, 0)
            counters[doc_id] = index + 1
            chunks.append(Document(page_content=text,
                                   metadata={**doc.metadata, "doc_id": doc_id, "chunk_index": index}))
    return chunks
