"""The searchable FinanceBench corpus: chunks, cached MiniLM vectors, a BM25 index, page headings.

Built once per run from the cached page texts; chunk vectors come through `CachedEmbeddings`
(an SQLite file in the cache directory), so only the first run embeds the corpus. Dense search
is exact (a dot product over the normalised vectors of the searched chunks), which is what a
flat vector index returns; HNSW stores such as Chroma return the same neighbours up to their
approximation.

AutoContext is the library's own (`rag.indexing.autocontext.AutoContext`): every chunk is also
embedded as "{title} / {section}\n{document summary}\n\n{chunk}" (the section heading from
`rag.indexing.headings`, the summary extractive), and those vectors are what the AutoContext
configurations search; the stored chunk text stays the chunk. The BM25 index of those
configurations indexes the title and section with the text.

Example:
    >>> index = BenchIndex.build(data, cache_dir="bench/results/cache")     # doctest: +SKIP
    >>> index.dense("net sales", index.pool("ACME_2022_10K"))[:3]            # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from rag.evaluation.financebench import FinanceBenchData
from rag.evaluation.financebench_run import estimate_tokens
from rag.indexing.autocontext import AutoContext
from rag.indexing.embedding_cache import CachedEmbeddings
from rag.models.embeddings import (
    PRECISION_ENV_VAR,
    default_embeddings,
    embedding_choice,
    minilm_embeddings,
)
from rag.retrieval.lexical import BM25Index
from rag.retrieval.sections import SectionRouter

__all__ = ["BenchIndex", "autocontext_texts"]



def autocontext_texts(chunks: list[Document]) -> list[str]:
    """The texts AutoContext embeds for the chunks: "{title} / {section}\\n{summary}\\n\\n{chunk}".

    The library's `rag.indexing.autocontext.AutoContext` with its defaults (extractive document
    summary, 48-token header); the stored chunk text is unchanged.
    """

    return AutoContext().embedding_texts(chunks)


def benchmark_embeddings() -> Embeddings:
    """The benchmark's model: the configured one, but MiniLM in fp32 unless `RAG_EMBEDDING_PRECISION` says otherwise.

    The committed results and the shared embedding cache are fp32; `auto` precision would pick bf16 on
    some CPUs and re-embed the whole corpus. Set `RAG_EMBEDDING_PRECISION=bf16` to benchmark bf16.
    """

    if embedding_choice() == "minilm":
        return minilm_embeddings(precision=os.environ.get(PRECISION_ENV_VAR) or "fp32")
    return default_embeddings()


@dataclass
class BenchIndex:
    """Chunks of every filing with their plain and AutoContext vectors and BM25 indexes."""

    chunks: list[Document]
    vectors: np.ndarray                     # (n, d) float32, normalised
    embeddings: Embeddings
    doc_names: np.ndarray                   # (n,) doc_name of each chunk
    tokens: np.ndarray                      # (n,) estimated tokens of each chunk
    positions: dict[str, np.ndarray]        # doc_name -> chunk positions, in document order
    titles: dict[str, str]                  # doc_name -> title
    context_vectors: np.ndarray             # (n, d): vectors of the AutoContext texts, normalised
    bm25: Any = None                        # rag.retrieval.lexical.BM25Index over text only
    bm25_context: Any = None                # ... over title + section + text
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    _sections: dict[tuple[tuple[str, Any], ...], Any] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, data: FinanceBenchData, *, cache_dir: str | Path | None, chunk_size: int = 1000,
              embeddings: Embeddings | None = None, progress: Callable[[str], None] | None = None) -> BenchIndex:
        """Parse (cached), chunk, embed (cached) and index every filing of `data`."""

        say = progress or (lambda _msg: None)
        if embeddings is None:
            embeddings = benchmark_embeddings()
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
        say(f"embedding {len(texts)} chunks with their AutoContext header (cached after the first run)")
        context_vectors = _normalised(embeddings.embed_documents(autocontext_texts(chunks)))
        for position, chunk in enumerate(chunks):
            chunk.metadata["position"] = position
        say("building BM25 indexes")
        bm25 = BM25Index.from_documents(chunks)
        bm25_context = BM25Index.from_documents(chunks, metadata_fields=["title", "section"])
        return cls(chunks=chunks, vectors=vectors, embeddings=embeddings, doc_names=doc_names,
                   tokens=np.array([estimate_tokens(t) for t in texts]), positions=positions, titles=titles,
                   context_vectors=context_vectors, bm25=bm25, bm25_context=bm25_context, documents=data.documents)

    def pool(self, doc_name: str | None) -> np.ndarray:
        """Positions of the searchable chunks: one filing's, or all of them."""
        if doc_name is None:
            return np.arange(len(self.chunks))
        return self.positions.get(doc_name, np.zeros(0, dtype=np.int64))

    def section_router(self, settings: tuple[tuple[str, Any], ...] = ()) -> Any:
        """The `rag.retrieval.sections.SectionRouter` over every filing's chunks, with `settings` (built once each)."""

        if settings not in self._sections:
            self._sections[settings] = SectionRouter(self.chunks, key="doc_name", **dict(settings))
        return self._sections[settings]

    def embed_queries(self, queries: list[str]) -> np.ndarray:
        """Normalised query vectors (cached by `CachedEmbeddings` when the index was built with a cache)."""
        return _normalised([self.embeddings.embed_query(q) for q in queries])


def _normalised(vectors: Any) -> np.ndarray:
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim == 1:
        array = array[None, :]
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.where(norms == 0, 1.0, norms)
