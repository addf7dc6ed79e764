"""The searchable FinanceBench corpus: chunks, cached MiniLM vectors, a BM25 index, page headings.

Built once per run from the cached page texts; chunk vectors come through `CachedEmbeddings`
(an SQLite file in the cache directory), so only the first run embeds the corpus. Dense search
is exact (a dot product over the normalised vectors of the searched chunks), which is what a
flat vector index returns; HNSW stores such as Chroma return the same neighbours up to their
approximation.

AutoContext pieces are kept next to the chunks: the document title of every chunk and the heading
of its page (its first lines, where filings print the statement or section name). Their vectors
are computed once per distinct text (54 titles, a few thousand headings), so a context-aware chunk
vector is the normalised sum of the chunk, title and heading vectors, without re-embedding the corpus.

Example:
    >>> index = BenchIndex.build(data, cache_dir="bench/results/cache")     # doctest: +SKIP
    >>> index.dense("net sales", index.pool("ACME_2022_10K"))[:3]            # doctest: +SKIP
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from rag.evaluation.financebench import FinanceBenchData
from rag.evaluation.financebench_run import estimate_tokens

__all__ = ["BenchIndex", "autocontext_texts", "page_heading"]

_HEADING_LINES = 3
_HEADING_CHARS = 160
_BOILERPLATE = re.compile(r"^(table of contents|index|page \d+|\d+|[ivxlc]+)$", re.I)


def autocontext_texts(chunks: list[Document]) -> list[str]:
    """The texts AutoContext embeds for the chunks: "{title} / {section}\\n{summary}\\n\\n{chunk}".

    The library's `rag.indexing.autocontext.AutoContext` with its defaults (extractive document
    summary, 48-token header); the stored chunk text is unchanged.
    """
    from rag.indexing.autocontext import AutoContext

    return AutoContext().embedding_texts(chunks)


def page_heading(page_text: str) -> str:
    """The first few meaningful lines of a page: where filings print the section or statement name.

    Lines that are page furniture ("Table of Contents", bare page numbers) are skipped.

    Example:
        >>> page_heading("Table of Contents\\n3M Company\\nConsolidated Statement of Income\\nNet sales 34,229")
        '3M Company / Consolidated Statement of Income / Net sales 34,229'
    """
    lines = []
    for line in page_text.splitlines():
        line = " ".join(line.split())
        if not line or _BOILERPLATE.match(line):
            continue
        lines.append(line)
        if len(lines) == _HEADING_LINES:
            break
    return " / ".join(lines)[:_HEADING_CHARS]


@dataclass
class BenchIndex:
    """Chunks of every filing with their vectors, BM25 index and AutoContext pieces."""

    chunks: list[Document]
    vectors: np.ndarray                     # (n, d) float32, normalised
    embeddings: Embeddings
    doc_names: np.ndarray                   # (n,) doc_name of each chunk
    tokens: np.ndarray                      # (n,) estimated tokens of each chunk
    positions: dict[str, np.ndarray]        # doc_name -> chunk positions, in document order
    titles: dict[str, str]                  # doc_name -> title
    title_vectors: dict[str, np.ndarray]
    heading_vectors: np.ndarray             # (n, d): vector of each chunk's page heading
    bm25: Any = None                        # rag.retrieval.lexical.BM25Index over text only
    bm25_context: Any = None                # ... over title + page heading + text
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    _context_vectors: dict[tuple[float, float], np.ndarray] = field(default_factory=dict)

    @classmethod
    def build(cls, data: FinanceBenchData, *, cache_dir: str | Path | None, chunk_size: int = 1000,
              embeddings: Embeddings | None = None, progress: Callable[[str], None] | None = None) -> BenchIndex:
        """Parse (cached), chunk, embed (cached) and index every filing of `data`."""
        from rag.indexing.embedding_cache import CachedEmbeddings
        from rag.retrieval.lexical import BM25Index

        say = progress or (lambda _msg: None)
        if embeddings is None:
            from rag.models.embeddings import default_embeddings

            embeddings = default_embeddings()
        if cache_dir is not None and not isinstance(embeddings, CachedEmbeddings):
            embeddings = CachedEmbeddings(embeddings, path=Path(cache_dir) / "embeddings.sqlite")
        say(f"parsing and chunking {len(data.documents)} filings")
        chunks = data.chunks(cache_dir=cache_dir, chunk_size=chunk_size)
        texts = [c.page_content for c in chunks]
        say(f"embedding {len(texts)} chunks (cached after the first run)")
        vectors = _normalised(embeddings.embed_documents(texts))
        doc_names = np.array([c.metadata["doc_name"] for c in chunks])
        positions = {name: np.flatnonzero(doc_names == name) for name in dict.fromkeys(doc_names.tolist())}
        titles = {name: chunks[int(pos[0])].metadata["title"] for name, pos in positions.items()}
        title_vecs = _normalised(embeddings.embed_documents(list(titles.values())))
        headings = [page_heading(data.page_texts(c.metadata["doc_name"], cache_dir=cache_dir)[c.metadata["page"]])
                    for c in chunks]
        distinct = list(dict.fromkeys(headings))
        say(f"embedding {len(distinct)} page headings")
        heading_of = dict(zip(distinct, _normalised(embeddings.embed_documents(distinct)), strict=True))
        for position, (chunk, heading) in enumerate(zip(chunks, headings, strict=True)):
            chunk.metadata["heading"] = heading
            chunk.metadata["position"] = position
        say("building BM25 indexes")
        bm25 = BM25Index.from_documents(chunks)
        bm25_context = BM25Index.from_documents(chunks, metadata_fields=["title", "heading"])
        return cls(chunks=chunks, vectors=vectors, embeddings=embeddings, doc_names=doc_names,
                   tokens=np.array([estimate_tokens(t) for t in texts]), positions=positions, titles=titles,
                   title_vectors=dict(zip(titles, title_vecs, strict=True)),
                   heading_vectors=np.stack([heading_of[h] for h in headings]) if headings else vectors[:0],
                   bm25=bm25, bm25_context=bm25_context, documents=data.documents)

    def pool(self, doc_name: str | None) -> np.ndarray:
        """Positions of the searchable chunks: one filing's, or all of them."""
        if doc_name is None:
            return np.arange(len(self.chunks))
        return self.positions.get(doc_name, np.zeros(0, dtype=np.int64))

    def embed_queries(self, queries: list[str]) -> np.ndarray:
        """Normalised query vectors (cached by `CachedEmbeddings` when the index was built with a cache)."""
        return _normalised([self.embeddings.embed_query(q) for q in queries])

    def context_vectors(self, *, title_weight: float, heading_weight: float) -> np.ndarray:
        """Chunk vectors with their document title and page heading mixed in, normalised."""
        key = (title_weight, heading_weight)
        if key not in self._context_vectors:
            titles = np.stack([self.title_vectors[n] for n in self.doc_names.tolist()])
            mixed = self.vectors + title_weight * titles + heading_weight * self.heading_vectors
            self._context_vectors[key] = _normalised(mixed)
        return self._context_vectors[key]


def _normalised(vectors: Any) -> np.ndarray:
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim == 1:
        array = array[None, :]
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.where(norms == 0, 1.0, norms)
