"""The FinanceBench corpus in library search components: one exact vector store, two BM25 indexes, routers.

Built through the library's one write path: the filings' pages (the library's PDF loader,
`FinanceBenchData.pages`) go into a `rag.KnowledgeBase` named `CORPUS_NAME` in the cache directory,
chunked by the benchmark's `PageChunker` (characters, never across a page) and given AutoContext;
a second run finds the filings recorded and reads nothing again. Its chunks, read back in filing
order, each get a stable id (``"{doc_name}#{chunk_index}"``) so the dense and the lexical side name
it the same way. Vectors come through the knowledge base's `CachedEmbeddings` (an SQLite file in
the cache directory), so only the first run embeds the corpus. They go into one
`rag.stores.ExactVectorStore` with two vectors per chunk:

- ``"text"``: the chunk text;
- ``"context"``: the library's AutoContext text (`rag.indexing.autocontext.AutoContext`:
  "{title} / {section}\\n{document summary}\\n\\n{chunk}"); the stored chunk text stays the chunk.

A configuration searches the store with the view weights it needs (`ExactVectorStore.with_weights`:
text only, AutoContext only, or the mean of the two cosines), through an `ExactRetriever` or a
`HybridRetriever` with BM25 over the text (plain configurations) or over title + section + text
(AutoContext ones), wrapped in a `Resource`. Search is exact, which is what a flat index returns;
an HNSW store such as Chroma returns the same neighbours up to its approximation.

Example:
    >>> corpus = BenchCorpus.build(data, cache_dir="/work/cache/financebench")       # doctest: +SKIP
    >>> resource = corpus.resource(lexical=True, autocontext=True)                    # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from rag.compose.knowledge_base import KnowledgeBase
from rag.compose.resource import Resource
from rag.evaluation.financebench import FinanceBenchData, PageChunker
from rag.indexing.autocontext import AutoContext
from rag.models.embeddings import (
    PRECISION_ENV_VAR,
    default_embeddings,
    embedding_choice,
    minilm_embeddings,
)
from rag.retrieval.hybrid import HybridRetriever
from rag.retrieval.lexical import BM25Index, BM25Retriever
from rag.retrieval.routing import DocumentRouter
from rag.retrieval.sections import SectionRouter
from rag.stores import ExactVectorStore

__all__ = ["CONTEXT_VIEW", "CORPUS_NAME", "TEXT_VIEW", "BenchCorpus", "benchmark_embeddings", "corpus_chunks"]

TEXT_VIEW, CONTEXT_VIEW = "text", "context"
FETCH_K = 100          # candidates per searched list, and kept after fusion
#: the knowledge base the corpus is built in (in the cache directory; in memory without one)
CORPUS_NAME = "financebench-pages"


def benchmark_embeddings() -> Embeddings:
    """The benchmark's model: the configured one, but MiniLM in fp32 unless `RAG_EMBEDDING_PRECISION` says otherwise.

    The committed results and the shared embedding cache are fp32; `auto` precision would pick bf16 on
    some CPUs and re-embed the whole corpus. Set `RAG_EMBEDDING_PRECISION=bf16` to benchmark bf16.
    """
    if embedding_choice() == "minilm":
        return minilm_embeddings(precision=os.environ.get(PRECISION_ENV_VAR) or "fp32")
    return default_embeddings()


@dataclass
class BenchCorpus:
    """Every filing's chunks in an `ExactVectorStore` (text and AutoContext views) and two BM25 indexes."""

    chunks: list[Document]
    embeddings: Embeddings
    store: ExactVectorStore              # views "text" and "context"
    bm25: BM25Index                      # chunk text only
    bm25_context: BM25Index              # title + section + chunk text
    titles: dict[str, str]               # doc_name -> title
    by_document: dict[str, list[Document]] = field(default_factory=dict)   # doc_name -> chunks by chunk_index
    _resources: dict[tuple[Any, ...], Resource] = field(default_factory=dict, repr=False)
    _sections: dict[tuple[tuple[str, Any], ...], SectionRouter] = field(default_factory=dict, repr=False)
    _router: DocumentRouter | None = field(default=None, repr=False)

    @classmethod
    def build(cls, data: FinanceBenchData, *, cache_dir: str | Path | None, chunk_size: int = 1000,
              embeddings: Embeddings | None = None, progress: Callable[[str], None] | None = None) -> BenchCorpus:
        """Index every filing of `data` into the corpus knowledge base (`corpus_chunks`), then build the two views."""
        say = progress or (lambda _msg: None)
        chunks, embeddings = corpus_chunks(data, cache_dir=cache_dir, chunk_size=chunk_size,
                                           embeddings=embeddings or benchmark_embeddings(), progress=say)
        texts = [c.page_content for c in chunks]
        say(f"embedding {len(texts)} chunks (cached after the first run)")
        plain = embeddings.embed_documents(texts)
        say(f"embedding {len(texts)} chunks with their AutoContext header (cached after the first run)")
        context = embeddings.embed_documents(AutoContext().embedding_texts(chunks))
        store = ExactVectorStore(embeddings, views={TEXT_VIEW: 1.0, CONTEXT_VIEW: 0.0})
        store.add_embeddings(texts, {TEXT_VIEW: plain, CONTEXT_VIEW: context},
                             metadatas=[c.metadata for c in chunks], ids=[c.id for c in chunks])
        del plain, context
        say("building BM25 indexes")
        by_document: dict[str, list[Document]] = {}
        for chunk in chunks:
            by_document.setdefault(chunk.metadata["doc_name"], []).append(chunk)
        return cls(chunks=chunks, embeddings=embeddings, store=store, bm25=BM25Index.from_documents(chunks),
                   bm25_context=BM25Index.from_documents(chunks, metadata_fields=["title", "section"]),
                   titles={name: docs[0].metadata["title"] for name, docs in by_document.items()},
                   by_document=by_document)

    def resource(self, *, dense: bool = True, lexical: bool = False, autocontext: bool = False,
                 context_weight: float = 1.0, fusion: str = "convex", dense_weight: float = 0.9) -> Resource:
        """The `Resource` a configuration searches (built once per combination of settings).

        Args:
            dense: search the vectors; lexical: search BM25 (both: a `HybridRetriever`).
            autocontext: dense search scores ``context_weight * AutoContext cosine + (1 -
                context_weight) * text cosine`` (else the text cosine), and BM25 indexes title and
                section with the text (also for BM25 alone).
            fusion, dense_weight: how the hybrid fuses its two lists ("rrf" or "convex"; the
                dense list's weight, BM25 gets the rest).
        """
        key = (dense, lexical, autocontext, context_weight, fusion, dense_weight)
        if key not in self._resources:
            views = {TEXT_VIEW: 1.0 - context_weight, CONTEXT_VIEW: context_weight} if autocontext else {TEXT_VIEW: 1.0}
            store = self.store.with_weights(views)
            bm25 = self.bm25_context if (autocontext or not dense) else self.bm25
            if dense and lexical:
                retriever: Any = HybridRetriever(vectorstore=store, bm25=bm25, k=FETCH_K, fetch_k=FETCH_K, fusion=fusion,
                                                 weights={"dense": dense_weight, "bm25": 1.0 - dense_weight})
            elif dense:
                retriever = store.as_retriever(k=FETCH_K)
            else:
                retriever = BM25Retriever(index=bm25, k=FETCH_K)
            self._resources[key] = Resource.from_retriever("financebench", retriever)
        return self._resources[key]

    def document_router(self) -> DocumentRouter:
        """A `DocumentRouter` over one card per filing: its title and its name ("AMCOR 2023Q2 10Q")."""
        if self._router is None:
            cards = {name: f"{title} | {name.replace('_', ' ')}" for name, title in self.titles.items()}
            self._router = DocumentRouter(cards, key="doc_name")
        return self._router

    def section_router(self, settings: tuple[tuple[str, Any], ...] = ()) -> SectionRouter:
        """The `SectionRouter` over every filing's chunks, with `settings` (built once each)."""
        if settings not in self._sections:
            self._sections[settings] = SectionRouter(self.chunks, key="doc_name", **dict(settings))
        return self._sections[settings]


def corpus_chunks(data: FinanceBenchData, *, cache_dir: str | Path | None, chunk_size: int, embeddings: Embeddings,
                  progress: Callable[[str], None]) -> tuple[list[Document], Embeddings]:
    """The chunks of `data`'s filings from the corpus knowledge base (indexing the filings it does not hold yet),
    in filing and chunk order, named ``"{doc_name}#{chunk_index}"``; and the knowledge base's (cached) embedding.

    A filing already recorded is not read again (its PDF is data, not edited); the knowledge base records the
    chunker's settings, so another `chunk_size` in the same cache directory is a `ConfigError`.
    """
    kb = KnowledgeBase(CORPUS_NAME, cache_dir, embedding=embeddings, chunker=PageChunker(chunk_size=chunk_size),
                       autocontext=AutoContext())
    known = {r.source for r in kb.list_documents()} if kb.exists else set()
    names = sorted(data.documents)
    todo = [name for name in names if f"{name}.pdf" not in known]
    progress(f"reading {len(todo)} of {len(names)} filings into the knowledge base {CORPUS_NAME!r}")
    if todo:
        report = kb.add_documents([page for name in todo for page in data.pages(name)])
        progress(f"knowledge base {CORPUS_NAME!r}: {report.summary()}")
    stored = kb.get_documents({"doc_name": {"$in": names}}) if names else []
    stored.sort(key=lambda c: (c.metadata["doc_name"], c.metadata["chunk_index"]))
    chunks = []
    for c in stored:   # the benchmark's names: a chunk is "{doc_name}#{chunk_index}", its document its filing
        meta = {k: v for k, v in c.metadata.items() if k != "file_type"} | {"doc_id": c.metadata["doc_name"]}
        chunks.append(Document(page_content=c.page_content, metadata=meta,
                               id=f"{meta['doc_name']}#{meta['chunk_index']}"))
    return chunks, kb.embedding
