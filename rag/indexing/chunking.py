"""Chunking: split documents into chunks measured in the embedding model's tokens.

Sizes count all-MiniLM-L6-v2 word pieces (`rag.indexing.tokens`), so a default chunk (200
pieces) plus the AutoContext header stays within the model's 256. A chunk ends at the best
boundary in the second half of its window: a blank line, then a line break, then a sentence
end, then any space; consecutive chunks overlap by `chunk_overlap` tokens, starting on a word.

Chunks never cross pages or sections. Markdown `#` headings (and html `<h1>`-`<h6>`, which the
loader turns into `#` lines) start sections; every chunk carries:

- `doc_id`: a hash of the source, shared by all pages of a file;
- `chunk_index`: position in the document, continuing across pages;
- `source`, `page` (PDFs), `title`, `section` (the heading it falls under, when any);
- `token_count`: its length in word pieces.

Example:
    >>> from langchain_core.documents import Document
    >>> from rag.indexing.tokens import ApproximateTokenizer
    >>> doc = Document(page_content="# Intro\\n\\n" + "Revenue grew. " * 60, metadata={"source": "a.md"})
    >>> chunks = split_documents([doc], chunk_size=40, chunk_overlap=5, tokenizer=ApproximateTokenizer())
    >>> [(c.metadata["chunk_index"], c.metadata["section"]) for c in chunks][:2]
    [(0, 'Intro'), (1, 'Intro')]
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

import numpy as np
from langchain_core.documents import Document

from rag.base.errors import ConfigError
from rag.indexing.loaders import clean_text
from rag.indexing.tokens import Tokenizer, default_tokenizer

__all__ = [
    "DEFAULT_CHUNK_OVERLAP",
    "DEFAULT_CHUNK_SIZE",
    "MODEL_MAX_TOKENS",
    "PassthroughChunker",
    "TokenChunker",
    "document_id",
    "split_documents",
    "split_sections",
]

MODEL_MAX_TOKENS = 256  # all-MiniLM-L6-v2 reads 254 word pieces plus [CLS] and [SEP]
DEFAULT_CHUNK_SIZE = 200  # leaves room for the AutoContext header
DEFAULT_CHUNK_OVERLAP = 30
_HEADER = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_ENCODE_BATCH = 512  # sections per tokenizer call


def document_id(source: str) -> str:
    """A stable id for a source document (a file path or URL).

    Example:
        >>> document_id("reports/a.pdf") == document_id("reports/a.pdf")
        True
    """
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def split_sections(text: str) -> list[tuple[str | None, int, int]]:
    """Markdown sections of `text` as `(heading or None, start, end)` character spans.

    Lines inside ``` fences are never headings. Text before the first heading has no heading.

    Example:
        >>> split_sections("intro\\n# A\\nbody\\n## B\\nmore")
        [(None, 0, 6), ('A', 6, 15), ('B', 15, 24)]
    """
    sections: list[tuple[str | None, int, int]] = []
    heading: str | None = None
    start = pos = 0
    in_fence = False
    for line in text.splitlines(keepends=True):
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (match := _HEADER.match(line.rstrip("\r\n"))):
            if pos > start:
                sections.append((heading, start, pos))
            heading, start = match.group(2), pos
        pos += len(line)
    if pos > start or not sections:
        sections.append((heading, start, pos))
    return sections


def _boundary_scores(text: str, offsets: list[tuple[int, int]]) -> np.ndarray:
    """How good a cut before each token is: 4 blank line, 3 line break, 2 sentence end, 1 space, 0 none."""
    n = len(offsets)
    scores = np.zeros(n + 1, dtype=np.int8)
    scores[n] = 5
    if n < 2:
        return scores
    spans = np.asarray(offsets, dtype=np.int64)
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    newlines = np.concatenate(([0], np.cumsum(codes == 10)))
    prev_end, next_start = spans[:-1, 1], spans[1:, 0]
    gap = next_start > prev_end
    breaks = newlines[next_start] - newlines[prev_end]
    last = codes[np.maximum(prev_end - 1, 0)]
    sentence = ((last == 46) | (last == 33) | (last == 63) | (last == 59) | (last == 58)) & gap  # . ! ? ; :
    inner = np.where(breaks >= 2, 4, np.where(breaks == 1, 3, np.where(sentence, 2, gap.astype(np.int8))))
    scores[1:n] = inner
    return scores


def _windows(scores: np.ndarray, size: int, overlap: int) -> list[tuple[int, int]]:
    """Token ranges `[start, end)` of the chunks, each ending at the best cut of its window's second half."""
    n = len(scores) - 1
    out = []
    start = 0
    while start < n:
        limit = start + size
        if limit >= n:
            end = n
        else:
            lo = start + max(1, size // 2)
            window = scores[lo:limit + 1][::-1]
            end = limit - int(np.argmax(window))  # the latest of the best cuts
        out.append((start, end))
        if end >= n:
            break
        nxt = end - overlap
        if overlap:
            words = np.flatnonzero(scores[nxt:end] >= 1)
            nxt = nxt + int(words[0]) if len(words) else end
        start = max(nxt, start + 1)
    return out


def _title(metadata: dict[str, Any]) -> str:
    title = metadata.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    source = str(metadata.get("source") or "")
    return PurePath(source).stem if source else ""


class TokenChunker:
    """Split documents into overlapping chunks of at most `chunk_size` tokens.

    Args:
        chunk_size: maximum tokens per chunk (word pieces of the embedding model).
        chunk_overlap: tokens shared by consecutive chunks of a section.
        tokenizer: defaults to the MiniLM word-piece tokenizer (`default_tokenizer()`).
        headers: split on markdown headings: True, False, or None for md/html files only.

    Example:
        >>> chunker = TokenChunker(chunk_size=128, chunk_overlap=16)
        >>> chunker.settings()["chunk_size"]
        128
    """

    def __init__(self, *, chunk_size: int = DEFAULT_CHUNK_SIZE, chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
                 tokenizer: Tokenizer | None = None, headers: bool | None = None) -> None:
        for name, value in (("chunk_size", chunk_size), ("chunk_overlap", chunk_overlap)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{name} must be an integer, got {value!r}")
        if chunk_size < 8 or chunk_size > MODEL_MAX_TOKENS - 2:
            raise ConfigError(f"chunk_size must be between 8 and {MODEL_MAX_TOKENS - 2} tokens "
                              f"(the embedding model reads {MODEL_MAX_TOKENS} word pieces), got {chunk_size}")
        if not 0 <= chunk_overlap <= chunk_size // 2:
            raise ConfigError(f"chunk_overlap must be between 0 and chunk_size/2 = {chunk_size // 2}, "
                              f"got {chunk_overlap}")
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.headers = headers
        self._tokenizer = tokenizer

    @classmethod
    def sized(cls, chunk_size: int | None = None) -> TokenChunker:
        """The default chunker, or one of `chunk_size` tokens with the default overlap capped at a quarter of it.

        Example:
            >>> TokenChunker.sized(40).chunk_overlap, TokenChunker.sized().chunk_size
            (10, 200)
        """
        if chunk_size is None:
            return cls()
        return cls(chunk_size=chunk_size, chunk_overlap=min(DEFAULT_CHUNK_OVERLAP, max(chunk_size, 0) // 4))

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer, loaded on first use."""
        if self._tokenizer is None:
            self._tokenizer = default_tokenizer()
        return self._tokenizer

    def settings(self) -> dict[str, Any]:
        """The settings as data, for a knowledge base manifest."""
        return {"type": "token", "chunk_size": self.chunk_size, "chunk_overlap": self.chunk_overlap,
                "headers": self.headers, "tokenizer": self.tokenizer.name}

    def _sections(self, doc: Document, text: str) -> list[tuple[str | None, int, int]]:
        use = self.headers
        if use is None:
            use = doc.metadata.get("file_type") in ("md", "html") or str(doc.metadata.get("source", "")).lower(
            ).endswith((".md", ".markdown", ".html", ".htm"))
        return split_sections(text) if use else [(None, 0, len(text))]

    def split_documents(self, docs: Sequence[Document]) -> list[Document]:
        """Chunks of `docs` in order, numbered per document (pages of a file continue the count)."""
        pieces: list[tuple[int, str | None, str]] = []
        for number, doc in enumerate(docs):
            text = clean_text(doc.page_content)
            for heading, start, end in self._sections(doc, text):
                if text[start:end].strip():
                    pieces.append((number, heading, text[start:end]))
        offsets: list[list[tuple[int, int]]] = []
        for start in range(0, len(pieces), _ENCODE_BATCH):
            offsets += self.tokenizer.offsets([p[2] for p in pieces[start:start + _ENCODE_BATCH]])
        counters: dict[str, int] = {}
        chunks: list[Document] = []
        for (number, heading, text), spans in zip(pieces, offsets, strict=True):
            if not spans:
                continue
            meta = docs[number].metadata
            source = str(meta.get("source", ""))
            doc_id = str(meta.get("doc_id") or document_id(source or docs[number].page_content[:200]))
            base = {**meta, "doc_id": doc_id, "title": _title(meta)}
            if heading is not None:
                base["section"] = heading
            # A piece that fits in one chunk needs no cut scores (the same single window _windows gives).
            windows = [(0, len(spans))] if len(spans) <= self.chunk_size else \
                _windows(_boundary_scores(text, spans), self.chunk_size, self.chunk_overlap)
            for first, last in windows:
                body = text[spans[first][0]:spans[last - 1][1]]
                index = counters.get(doc_id, 0)
                counters[doc_id] = index + 1
                chunks.append(Document(page_content=body, metadata={
                    **base, "chunk_index": index, "token_count": last - first}))
        return chunks

    __call__ = split_documents


class PassthroughChunker:
    """Keep documents as they are (already chunked elsewhere), adding only the provenance metadata.

    Each document becomes one chunk with `doc_id` (from its metadata, else a hash of its
    source), `chunk_index` (counted per `doc_id`) and `title`. Nothing is split, so texts
    longer than the embedding model's window are truncated by the model.

    Example:
        >>> chunks = PassthroughChunker()([Document(page_content="a", metadata={"source": "s"})] * 2)
        >>> [c.metadata["chunk_index"] for c in chunks]
        [0, 1]
    """

    def settings(self) -> dict[str, Any]:
        """The settings as data, for a knowledge base manifest."""
        return {"type": "passthrough"}

    def split_documents(self, docs: Sequence[Document]) -> list[Document]:
        """One chunk per non-blank document, numbered per `doc_id`."""
        counters: dict[str, int] = {}
        chunks = []
        for doc in docs:
            text = clean_text(doc.page_content)
            if not text.strip():
                continue
            source = str(doc.metadata.get("source", ""))
            doc_id = str(doc.metadata.get("doc_id") or document_id(source or text[:200]))
            index = counters.get(doc_id, 0)
            counters[doc_id] = index + 1
            chunks.append(Document(page_content=text, metadata={
                **doc.metadata, "doc_id": doc_id, "title": _title(doc.metadata), "chunk_index": index}))
        return chunks

    __call__ = split_documents


def split_documents(docs: Sequence[Document], *, chunk_size: int = DEFAULT_CHUNK_SIZE,
                    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP, tokenizer: Tokenizer | None = None,
                    headers: bool | None = None) -> list[Document]:
    """Split documents with a `TokenChunker` (see its arguments)."""
    return TokenChunker(chunk_size=chunk_size, chunk_overlap=chunk_overlap, tokenizer=tokenizer,
                        headers=headers).split_documents(docs)
