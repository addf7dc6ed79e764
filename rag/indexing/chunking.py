"""Chunking: split documents into chunks measured in the embedding model's tokens.

Sizes count all-MiniLM-L6-v2 word pieces (`rag.indexing.tokens`), so a default chunk (200
pieces) plus the AutoContext header stays within the model's 256. A chunk ends at the best
boundary in the second half of its window: a blank line, then a line break, then a sentence
end, then any space; consecutive chunks overlap by `chunk_overlap` tokens, starting on a word.

Every chunk is also bounded in characters (`max_chars`): a word-piece tokenizer reads an
unbroken run of letters as one token, so tokens alone do not bound a chunk.

Chunks never cross pages or sections (`rag.indexing.headings` finds them). Markdown `#` headings
(and html `<h1>`-`<h6>` and rst titles, which the loaders turn into `#` lines) start sections. A
heading never forms a chunk on its own: a section holding only its heading joins the next one
(`section="Models / Default"`), headings after the last text join the chunk before them, and no
chunk ends right after a heading while text follows (`rag.indexing.headings.heading_blocks`); only
a run of headings longer than a chunk is cut inside. A table (`chunk_type="table"`, from
`rag.indexing.tables`) is kept whole when it fits, else cut between rows with its header lines
repeated. Every chunk carries:

- `doc_id`: a hash of the source, shared by all pages of a file;
- `chunk_index`: position in the document, continuing across pages;
- `source`, `page` (PDFs), `title`, `section` (the heading it falls under, when any; for PDFs the
  heading-like line in effect, `rag.indexing.headings`);
- `token_count`: its length in word pieces; `start_index`: its offset in the page or file text;
- `table_rows` (only a chunk holding table rows): the rows as structure, header and cells, a JSON
  string (`rag.indexing.table_structure`), so an answerer reads rows without parsing `a | b` text;
- `definitions` (only a chunk holding part of a definition list): each term with its description
  (`rag.indexing.definitions`); no chunk ends between a term and its description when it can end elsewhere.

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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import PurePath
from typing import Any

from langchain_core.documents import Document

from rag.base.errors import ConfigError
from rag.indexing._windows import cut
from rag.indexing.headings import chunk_section, heading_blocks, pdf_sections, section_at, split_sections
from rag.indexing.definitions import DEFINITIONS_KEY, chunk_definitions, piece_definitions
from rag.indexing.loaders import clean_text
from rag.indexing.table_structure import TABLE_ROWS_KEY, chunk_tables, piece_tables
from rag.indexing.tables import split_table
from rag.indexing.tokens import Tokenizer, default_tokenizer

__all__ = [
    "CHARS_PER_TOKEN",
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
CHARS_PER_TOKEN = 8  # the default character bound: English word pieces average 4-5 characters
_ENCODE_BATCH = 512  # sections per tokenizer call
_ENCODE_CHARS = 1_000_000  # text per tokenizer call: its spans (~120 bytes a token) are held until cut
_MAX_PIECE_CHARS = 65_536  # a longer section is cut at a paragraph, line or word first (bounded memory)


def document_id(source: str) -> str:
    """A stable id for a source document (a file path or URL).

    Example:
        >>> document_id("reports/a.pdf") == document_id("reports/a.pdf")
        True
    """
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _spans_within(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """`[start, end)` in stretches of at most `_MAX_PIECE_CHARS`, cut at a blank line, line break or space.

    A whole file without headings is one section: cut into pieces, it is tokenized and chunked
    in bounded memory (the tokenizer holds every token of its input). The cut falls in the last
    quarter of a stretch, at its best boundary, so chunks end there as they would anyway.

    Example:
        >>> list(_spans_within("a" * 10, 0, 10))
        [(0, 10)]
    """
    while end - start > _MAX_PIECE_CHARS:
        limit = start + _MAX_PIECE_CHARS
        floor = limit - _MAX_PIECE_CHARS // 4
        for mark in ("\n\n", "\n", " "):
            at = text.rfind(mark, floor, limit)
            if at >= 0:
                limit = at + len(mark)
                break
        yield start, limit
        start = limit
    yield start, end


def _title(metadata: dict[str, Any]) -> str:
    title = metadata.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    source = str(metadata.get("source") or "")
    return PurePath(source).stem if source else ""


@dataclass
class _Piece:
    """A stretch of one document that is cut into chunks on its own: a section, a page or a table."""

    number: int                      # index of the document in the input
    text: str
    start: int                       # offset of `text` in the document's text
    section: str | None = None
    headings: list[tuple[int, int]] = field(default_factory=list)  # heading lines, offsets in `text`
    header_lines: int = 0            # tables: leading lines repeated in every part
    table: bool = False


def _tokenized(tokenizer: Tokenizer, pieces: list[_Piece]) -> Iterator[tuple[_Piece, list[tuple[int, int]]]]:
    """Each piece with its token spans, tokenized in batches of bounded size and released after use."""
    batch: list[_Piece] = []
    chars = 0
    for number, piece in enumerate(pieces):
        batch.append(piece)
        chars += len(piece.text)
        if len(batch) >= _ENCODE_BATCH or chars >= _ENCODE_CHARS or number == len(pieces) - 1:
            yield from zip(batch, tokenizer.offsets([p.text for p in batch]), strict=True)
            batch, chars = [], 0


class TokenChunker:
    """Split documents into overlapping chunks of at most `chunk_size` tokens and `max_chars` characters.

    Args:
        chunk_size: maximum tokens per chunk (word pieces of the embedding model).
        chunk_overlap: tokens shared by consecutive chunks of a section.
        tokenizer: defaults to the MiniLM word-piece tokenizer (`default_tokenizer()`).
        headers: split on markdown headings: True, False, or None for md/rst/html files only.
        max_chars: maximum characters per chunk; default `CHARS_PER_TOKEN * chunk_size`. A word-piece
            tokenizer counts an unbroken run of letters as one token, so tokens alone do not bound
            a chunk's length.

    Example:
        >>> chunker = TokenChunker(chunk_size=128, chunk_overlap=16)
        >>> chunker.settings()["chunk_size"], chunker.max_chars
        (128, 1024)
    """

    def __init__(self, *, chunk_size: int = DEFAULT_CHUNK_SIZE, chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
                 tokenizer: Tokenizer | None = None, headers: bool | None = None,
                 max_chars: int | None = None) -> None:
        for name, value in (("chunk_size", chunk_size), ("chunk_overlap", chunk_overlap)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{name} must be an integer, got {value!r}")
        if chunk_size < 8 or chunk_size > MODEL_MAX_TOKENS - 2:
            raise ConfigError(f"chunk_size must be between 8 and {MODEL_MAX_TOKENS - 2} tokens "
                              f"(the embedding model reads {MODEL_MAX_TOKENS} word pieces), got {chunk_size}")
        if not 0 <= chunk_overlap <= chunk_size // 2:
            raise ConfigError(f"chunk_overlap must be between 0 and chunk_size/2 = {chunk_size // 2}, "
                              f"got {chunk_overlap}")
        if max_chars is not None and (isinstance(max_chars, bool) or not isinstance(max_chars, int)
                                      or max_chars < 64):
            raise ConfigError(f"max_chars must be an integer >= 64 (characters per chunk), got {max_chars!r}")
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.headers = headers
        self.max_chars = max_chars or CHARS_PER_TOKEN * chunk_size
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
                "headers": self.headers, "max_chars": self.max_chars, "tokenizer": self.tokenizer.name}

    def _sections(self, doc: Document, text: str) -> list[tuple[str | None, int, int, list[tuple[int, int]]]]:
        use = self.headers
        if use is None:
            use = doc.metadata.get("file_type") in ("md", "rst", "html") or str(doc.metadata.get("source", "")).lower(
            ).endswith((".md", ".markdown", ".rst", ".html", ".htm"))
        return heading_blocks(text, split_sections(text)) if use else [(None, 0, len(text), [])]

    def _pieces(self, docs: Sequence[Document]) -> list[_Piece]:
        pieces = []
        for number, doc in enumerate(docs):
            text = clean_text(doc.page_content)
            if doc.metadata.get("chunk_type") == "table":
                if text.strip():
                    header = doc.metadata.get("table_header_lines", 1)
                    pieces.append(_Piece(number, text, 0, header_lines=header if isinstance(header, int) else 1,
                                         table=True))
                continue
            for heading, start, end, headings in self._sections(doc, text):
                for first, last in _spans_within(text, start, end):
                    if text[first:last].strip():
                        pieces.append(_Piece(number, text[first:last], first, heading,
                                             [(s - first, e - first) for s, e in headings if first <= s < last]))
        return pieces

    def _cuts(self, piece: _Piece, spans: list[tuple[int, int]], joins: Sequence[int] = ()) -> list[tuple[str, int, int]]:
        """`(text, start, tokens)` of the chunks of one piece (`joins`: offsets a chunk should not end at)."""
        if not piece.table:
            return [(piece.text[a:b], a, n) for a, b, n in cut(
                piece.text, spans, size=self.chunk_size, overlap=self.chunk_overlap, max_chars=self.max_chars,
                headings=piece.headings, joins=joins)]
        lines = piece.text.splitlines(keepends=True)
        offsets = [0, *accumulate(len(line) for line in lines)]
        out = []
        for first, end, count, with_header in split_table(piece.text, spans, header_lines=piece.header_lines,
                                                         size=self.chunk_size, max_chars=self.max_chars):
            body = piece.text[offsets[first]:offsets[end]]
            if with_header:
                out.append(("".join(lines[:piece.header_lines]) + body, offsets[first], count))
            elif count <= self.chunk_size and len(body) <= self.max_chars:
                out.append((body, offsets[first], count))
            else:  # one row longer than a chunk: cut like text
                row = _Piece(piece.number, body, 0)
                row_spans = [(s - offsets[first], e - offsets[first]) for s, e in spans
                             if offsets[first] <= s < offsets[end]]
                out += [(text, offsets[first] + a, n) for text, a, n in self._cuts(row, row_spans)]
        return [(text.strip("\n"), a, n) for text, a, n in out]

    def split_documents(self, docs: Sequence[Document]) -> list[Document]:
        """Chunks of `docs` in order, numbered per document (pages of a file continue the count)."""
        return list(self.iter_chunks(docs))

    def iter_chunks(self, docs: Sequence[Document]) -> Iterator[Document]:
        """The chunks of `split_documents`, made as they are read (a large file is chunked in bounded batches)."""
        pieces = self._pieces(docs)
        pdf = pdf_sections(docs) if self.headers is not False else {}
        counters: dict[str, int] = {}
        for piece, spans in _tokenized(self.tokenizer, pieces):
            if not spans:
                continue
            meta = docs[piece.number].metadata
            source = str(meta.get("source", ""))
            doc_id = str(meta.get("doc_id") or document_id(source or docs[piece.number].page_content[:200]))
            base = {k: v for k, v in meta.items() if k != "table_header_lines"}
            base.update(doc_id=doc_id, title=_title(meta))
            if piece.section is not None:
                base["section"] = piece.section
            tables = piece_tables(piece.text, piece.header_lines if piece.table else None)
            terms = [] if piece.table else piece_definitions(piece.text)
            for body, start, count in self._cuts(piece, spans, [d.start for d in terms]):
                index = counters.get(doc_id, 0)
                counters[doc_id] = index + 1
                chunk_meta = {**base, "chunk_index": index, "token_count": count, "start_index": piece.start + start}
                rows = chunk_tables(tables, start, start + len(body) + 2, body) if tables else None
                if rows:
                    chunk_meta[TABLE_ROWS_KEY] = rows
                if terms and (described := chunk_definitions(terms, piece.text, start, start + len(body))):
                    chunk_meta[DEFINITIONS_KEY] = described
                if piece.number in pdf and not base.get("section"):
                    spans_, position = pdf[piece.number]
                    at = -1 if piece.table else piece.start + start
                    chunk_meta["section"] = chunk_section(spans_, position, at, at + len(body)) if at >= 0 \
                        else section_at(spans_, position, at)
                    if not chunk_meta["section"]:
                        del chunk_meta["section"]
                yield Document(page_content=body, metadata=chunk_meta)

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
                    headers: bool | None = None, max_chars: int | None = None) -> list[Document]:
    """Split documents with a `TokenChunker` (see its arguments)."""
    return TokenChunker(chunk_size=chunk_size, chunk_overlap=chunk_overlap, tokenizer=tokenizer,
                        headers=headers, max_chars=max_chars).split_documents(docs)
