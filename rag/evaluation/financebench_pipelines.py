"""The retrieval configurations the FinanceBench benchmark compares, run through the library's pipeline.

Every configuration is a `PipelineSpec`: which scorers run (BM25, dense), how they are fused, whether
chunks carry AutoContext (document title and page heading), whether documents are routed, how the
candidates are reranked and how the context is assembled (top chunks, neighbour expansion or
relevant segment extraction), always within the same token budget. A spec is only a name for
library settings: `LibraryConfiguration` searches the corpus's `Resource` for the spec
(`BenchCorpus.resource`) with `rag.retrieve` and the spec's `RetrievalSettings`
(`LibraryConfiguration.settings`), the same pipeline a user runs.

Example:
    >>> sorted(CONFIGURATIONS)[:3]
    ['autocontext', 'bm25', 'dense']
    >>> report, paths = run_financebench(data_dir="../shared/data/financebench")   # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from rag.base.errors import ConfigError
from rag.compose.retrieve import retrieve
from rag.evaluation.financebench import FinanceBenchData, resolve_data_dir
from rag.evaluation.financebench_corpus import FETCH_K, BenchCorpus
from rag.evaluation.financebench_default import DEFAULT_NAME, NO_TABLES_NAME, DefaultConfiguration
from rag.evaluation.financebench_report import write_report
from rag.evaluation.financebench_run import (
    DEFAULT_BUDGET,
    BenchReport,
    Retrieval,
    ranked_documents,
    run_benchmark,
)
from rag.retrieval.budget import CharTokenCounter
from rag.retrieval.rerank import EmbeddingReranker

__all__ = ["CONFIGURATIONS", "LibraryConfiguration", "PipelineSpec", "run_financebench"]

#: context-hit targets of the full pipeline on the development set (issue 4)
TARGETS = {"single": 0.95, "shared": 0.85}
_EXPAND_HITS = 8       # hits widened by neighbour expansion before the budget cuts


@dataclass(frozen=True)
class PipelineSpec:
    """What one configuration does; see the module docstring."""

    name: str
    description: str
    lexical: bool = False
    dense: bool = True
    fusion: Literal["rrf", "convex"] = "convex"
    dense_weight: float = 0.9            # hybrid: weight of the dense list (BM25 gets the rest)
    autocontext: bool = False
    context_weight: float = 1.0          # AutoContext: weight of the header-embedded vector's cosine (rest: plain)
    rephrase: tuple[str, ...] = ()       # rag.retrieval.rephrase.Rephraser offline modes ("keywords")
    main_query_weight: float = 0.5       # with rephrasings: share of the question's own lists (question_weight)
    routing: bool = False                # shared store: DocumentRouter filters to the named filings and boosts
    route_weight: float = 0.5            # routing boost: added weight * normalised document score
    rerank: bool = False                 # EmbeddingReranker(by_sentence=True) on the plain chunk text
    rerank_depth: int = 50
    rerank_weight: float = 0.5
    neighbours: int = 0
    rse: str | None = None               # an RSE preset of rag.retrieval.rse
    rse_overrides: tuple[tuple[str, float], ...] = ()
    page_diversity: float = 0.0          # rag.retrieval.packing.diversify: discount per better chunk of the page
    sections: bool = False               # rag.retrieval.sections.SectionRouter: promote the sections the question names
    section_at: int = 3                  # ... after this many results
    section_settings: tuple[tuple[str, Any], ...] = ()   # SectionRouter settings other than its defaults


def _specs() -> list[PipelineSpec]:
    dense = PipelineSpec(name="dense", description="MiniLM cosine, top chunks until the budget (vanilla RAG)")
    hybrid = replace(dense, name="hybrid", lexical=True,
                     description="dense + BM25, fused by a convex combination of min-max normalised scores (0.9 / 0.1)")
    ac = replace(hybrid, name="autocontext", autocontext=True,
                 description="hybrid over AutoContext chunks: each chunk embedded as '{title} / {section}\\n"
                             "{document summary}\\n\\n{chunk}' (rag.indexing.autocontext, sections from "
                             "rag.indexing.headings); BM25 indexes title and section with the text")
    rr = replace(ac, name="rerank", rerank=True,
                 description="autocontext + EmbeddingReranker on the top 50 (best match over the question's "
                             "sentences), fused 50/50 with the first-stage score")
    return [
        PipelineSpec(name="bm25", dense=False, lexical=True,
                     description="BM25 (rag.base.text tokens: stop words, stems) with the document title and "
                                 "section indexed"),
        dense,
        replace(hybrid, name="hybrid-rrf", fusion="rrf", description="dense + BM25 fused by RRF (k=60)"),
        hybrid, ac,
        replace(ac, name="routing", routing=True,
                description="autocontext + document routing: in the shared store, search only the filings whose "
                            "company, period and form best match the question (all filings when it names none)"),
        rr,
        replace(ac, name="sections", sections=True,
                description="autocontext + named sections (rag.retrieval.sections.SectionRouter): the opening "
                            "chunk of each section whose heading the question names goes in after the top 3"),
        replace(rr, name="neighbours", neighbours=1,
                description="rerank, then the top 8 hits widened by +-1 neighbouring chunk (expand_neighbours)"),
        replace(rr, name="rse", rse="balanced",
                description="rerank, then relevant segment extraction (rag.retrieval.rse, balanced preset)"),
        replace(hybrid, name="full-plain", routing=True, page_diversity=0.3,
                description="routing + hybrid over plain chunk vectors + page-diverse packing (full-ac without AutoContext)"),
        replace(ac, name="full-ac", routing=True, page_diversity=0.3,
                description="routing + autocontext hybrid + page-diverse packing (full without the reranker and named sections)"),
        replace(ac, name="full-mix", routing=True, page_diversity=0.3, context_weight=0.5,
                description="full-ac with the dense score the mean of the plain and the AutoContext cosine "
                            "(two vectors per chunk)"),
        replace(ac, name="full-kw", routing=True, page_diversity=0.3, rephrase=("keywords",),
                description="full-ac + the offline keyword rephrasing of the question (rag.retrieval.rephrase) fused"),
        replace(ac, name="full-nosections", routing=True, page_diversity=0.3, rerank=True,
                description="routing + autocontext hybrid + EmbeddingReranker (plain chunk text, fused 50/50 "
                            "with the first stage) + page-diverse packing (full without named sections)"),
        replace(ac, name="full", routing=True, page_diversity=0.3, rerank=True, sections=True,
                description="routing + autocontext hybrid + EmbeddingReranker (plain chunk text, fused 50/50 "
                            "with the first stage) + page-diverse packing (a chunk loses 0.3 of its normalised "
                            "score per better chunk already taken from its page) + named sections (the opening "
                            "chunk of each section the question names goes in after the top 3)"),
    ]


#: name -> (description, spec)
CONFIGURATIONS: dict[str, tuple[str, PipelineSpec]] = {s.name: (s.description, s) for s in _specs()}


class LibraryConfiguration:
    """A configuration bound to a corpus; `retrieve` runs `rag.retrieve` (the benchmark's `Configuration` protocol)."""

    def __init__(self, corpus: BenchCorpus, spec: PipelineSpec, *, budget: int = DEFAULT_BUDGET) -> None:
        self.corpus, self.spec, self.budget = corpus, spec, budget
        self.name, self.description = spec.name, spec.description
        self.resource = corpus.resource(dense=spec.dense, lexical=spec.lexical, autocontext=spec.autocontext,
                                        context_weight=spec.context_weight, fusion=spec.fusion,
                                        dense_weight=spec.dense_weight)
        self._reranker = EmbeddingReranker(embedding=corpus.embeddings, by_sentence=True) if spec.rerank else None
        self._counter = CharTokenCounter()

    def settings(self, doc_name: str | None) -> dict[str, Any]:
        """The `RetrievalSettings` of this configuration: in one filing (`doc_name`) or the shared store (None)."""
        spec = self.spec
        settings: dict[str, Any] = {
            "k": _EXPAND_HITS if spec.neighbours and not spec.rse else FETCH_K, "fetch_k": FETCH_K,
            "fusion": spec.fusion, "max_tokens": self.budget, "token_counter": self._counter,
            "page_diversity": spec.page_diversity, "expand": spec.neighbours, "rse": spec.rse,
            "rse_overrides": dict(spec.rse_overrides)}
        if doc_name is not None:
            settings["filter"] = {"doc_name": doc_name}
        elif spec.routing:
            settings.update(router=self.corpus.document_router(), routing="both", route_weight=spec.route_weight)
        if spec.rephrase:
            settings.update(rephrase=list(spec.rephrase), question_weight=spec.main_query_weight)
        if spec.rerank:
            settings.update(reranker=self._reranker, rerank_depth=spec.rerank_depth, rerank_weight=spec.rerank_weight)
        if spec.sections:
            settings.update(sections=self.corpus.section_router(spec.section_settings), section_at=spec.section_at)
        return settings

    def retrieve(self, question: str, *, doc_name: str | None) -> Retrieval:
        """Rank the chunks of `doc_name` (or of every filing) for `question` and assemble the context."""
        result = retrieve(question, self.resource, **self.settings(doc_name))
        return Retrieval(ranked=ranked_documents(result), context=[self._pages(d) for d in result.context],
                         extras={"timings": result.timings})

    def _pages(self, doc: Document) -> Document:
        """A budget-truncated multi-chunk document keeps only the pages whose chunks it still holds."""
        indices = doc.metadata.get("chunk_indices")
        if not doc.metadata.get("truncated") or not indices:
            return doc
        chunks = self.corpus.by_document[doc.metadata["doc_name"]]
        kept = [chunks[i] for i in indices if chunks[i].page_content[:80] in doc.page_content]
        pages = list(dict.fromkeys(c.metadata["page"] for c in kept))
        return Document(page_content=doc.page_content, metadata={**doc.metadata, "pages": pages}, id=doc.id)


def run_financebench(*, data_dir: str | Path | None = None, cache_dir: str | Path | None = "bench/results/cache",
                     out_dir: str | Path | None = "bench/results", settings: Sequence[str] = ("single", "shared"),
                     configs: Sequence[str] | None = None, limit: int | None = None, budget: int = DEFAULT_BUDGET,
                     chunk_size: int = 1000, chart: bool = True, embeddings: Embeddings | None = None,
                     backend: Callable[[Embeddings], Any] | None = None,
                     progress: Callable[[str], None] | None = None) -> tuple[BenchReport, list[Path]]:
    """Build the corpus, run the configurations through `rag.retrieve`, and write the report files (when `out_dir` is set).

    `embeddings` defaults to the offline MiniLM model; vectors are cached in `cache_dir`. `backend` opens the store the
    default rows' knowledge base keeps its chunks in (`rag index --backend`'s opener; default: Chroma in `cache_dir`).

    Raises:
        ConfigError: an unknown configuration name or setting, or a missing data directory.
    """
    knowledge_bases = (DEFAULT_NAME, NO_TABLES_NAME)     # `rag index` + `rag ask` rows (financebench_default)
    names = list(configs) if configs else [*CONFIGURATIONS, *knowledge_bases]
    unknown = [n for n in names if n not in CONFIGURATIONS and n not in knowledge_bases]
    if unknown:
        raise ConfigError(f"unknown configuration(s) {unknown}; valid: {', '.join([*CONFIGURATIONS, *knowledge_bases])}")
    started = time.perf_counter()
    data = FinanceBenchData.load(resolve_data_dir(data_dir), limit=limit)
    corpus = None
    if any(n in CONFIGURATIONS for n in names):
        corpus = BenchCorpus.build(data, cache_dir=cache_dir, chunk_size=chunk_size, embeddings=embeddings,
                                   progress=progress)
    built = {n: DefaultConfiguration.build(data, cache_dir=cache_dir, budget=budget, tables=n == DEFAULT_NAME,
                                           backend=backend, progress=progress) for n in knowledge_bases if n in names}
    pipelines = [built[n] if n in built else LibraryConfiguration(corpus, CONFIGURATIONS[n][1], budget=budget)
                 for n in names]
    report = run_benchmark(data, pipelines, settings=settings, budget=budget, progress=progress)
    for name, config in built.items():
        report.meta[f"{name}_index"] = config.index_stats
    report.meta.update(chunk_size=chunk_size, chunks=len(corpus.chunks) if corpus else None,
                       seconds=time.perf_counter() - started,
                       command="python bench/financebench.py", targets=TARGETS, best="full", baseline="dense",
                       token_counter=CharTokenCounter.name, pipeline="rag.retrieve")
    paths = write_report(report, out_dir, chart=chart) if out_dir is not None else []
    return report, paths
