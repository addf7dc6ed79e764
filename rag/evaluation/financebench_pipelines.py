"""The retrieval configurations the FinanceBench benchmark compares, and `run_financebench`.

Every configuration is a `PipelineSpec`: which scorers run (BM25, dense), how they are fused, whether
chunks carry AutoContext (document title and page heading), whether documents are routed, how the
candidates are reranked and how the context is assembled (top chunks, neighbour expansion or
relevant segment extraction), always within the same token budget.

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
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from rag.base.errors import ConfigError
from rag.evaluation.financebench import FinanceBenchData, resolve_data_dir
from rag.evaluation.financebench_index import BenchIndex
from rag.evaluation.financebench_query import sub_queries
from rag.evaluation.financebench_report import write_report
from rag.evaluation.financebench_run import (
    DEFAULT_BUDGET,
    BenchReport,
    Retrieval,
    estimate_tokens,
    run_benchmark,
)
from rag.retrieval.budget import apply_budget
from rag.retrieval.expansion import expand_neighbours
from rag.retrieval.fusion import fuse
from rag.retrieval.packing import diversify
from rag.retrieval.rephrase import Rephraser
from rag.retrieval.rerank import EmbeddingReranker, blend_rerank
from rag.retrieval.routing import DocumentRouter
from rag.retrieval.rse import relevant_segments, segment_documents

if TYPE_CHECKING:
    from rag.retrieval.routing import DocumentRouter

__all__ = ["CONFIGURATIONS", "Pipeline", "PipelineSpec", "run_financebench"]

#: context-hit targets of the full pipeline on the development set (issue 4)
TARGETS = {"single": 0.95, "shared": 0.85}
_FETCH_K = 100         # candidates per (scorer, query) list and kept after fusion
_EXPAND_HITS = 8       # hits widened by neighbour expansion before the budget cuts


@dataclass(frozen=True)
class PipelineSpec:
    """What one configuration does; see the module docstring."""

    name: str
    description: str
    lexical: bool = False
    dense: bool = True
    fusion: Literal["rrf", "convex"] = "convex"
    dense_weight: float = 0.9            # convex fusion: weight of the dense list (BM25 gets the rest)
    autocontext: bool = False
    context_weight: float = 1.0          # AutoContext: weight of the header-embedded vector's cosine (rest: plain)
    multi_query: bool = False            # also search each sentence of a multi-sentence question
    rephrase: tuple[str, ...] = ()       # rag.retrieval.rephrase.Rephraser offline modes ("keywords")
    main_query_weight: float = 0.5       # multi-query: share of the whole question's lists
    routing: bool = False                # DocumentRouter: search the named filings, boost by document score
    route_weight: float = 0.5            # routing boost: added weight * min-max normalised document score
    rerank: bool = False
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


class CharTokenCounter:
    """The benchmark's token measure for `rag.retrieval.budget.apply_budget`: one token per 4 characters."""

    name = "chars/4"

    def count(self, text: str) -> int:
        """Tokens of `text`."""
        return estimate_tokens(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix within `max_tokens`, cut at a space."""
        if self.count(text) <= max_tokens:
            return text
        cut = text[: max(0, 4 * max_tokens)]
        return cut.rsplit(" ", 1)[0] if " " in cut else cut


class Pipeline:
    """A configuration bound to an index; `retrieve` follows the benchmark's `Configuration` protocol."""

    def __init__(self, index: BenchIndex, spec: PipelineSpec, *, budget: int = DEFAULT_BUDGET) -> None:
        self.index = index
        self.spec = spec
        self.budget = budget
        self.name = spec.name
        self.description = spec.description
        self._router: DocumentRouter | None = None

    def retrieve(self, question: str, *, doc_name: str | None) -> Retrieval:
        """Rank the chunks of `doc_name` (or of every filing) for `question` and assemble the context."""

        spec = self.spec
        pool = self.index.pool(doc_name)
        if spec.routing and doc_name is None:
            pool = self._routed_pool(question, pool)
        queries = sub_queries(question) if spec.multi_query else [question]
        if spec.rephrase:

            queries += [q for q in Rephraser(modes=spec.rephrase).rephrase(question)[1:] if q not in queries]
        scored = self._fused(queries, pool)
        if spec.routing and doc_name is None:
            scored = self._route(question, scored)
        if spec.rerank:
            scored = self._rerank(queries, scored)
        if spec.page_diversity:
            scored = diversify(scored, discount=spec.page_diversity)
        if spec.sections:
            scored, _ = self.index.section_router(spec.section_settings).promote(question, scored,
                                                                                 at=spec.section_at)
        context = self._select(scored)
        context = [self._fix_pages(d) for d in apply_budget(context, self.budget, counter=CharTokenCounter())]
        return Retrieval(ranked=[d for d, _ in scored[:50]], context=context)

    # ------------------------------------------------------------------ steps
    def _lists(self, query: str, pool: np.ndarray) -> dict[str, list[tuple[Document, float]]]:
        spec, index = self.spec, self.index
        out = {}
        if spec.dense:
            query_vector = index.embed_queries([query])[0]
            scores = index.vectors[pool] @ query_vector
            if spec.autocontext:
                w = spec.context_weight
                scores = (1 - w) * scores + w * (index.context_vectors[pool] @ query_vector)
            out["dense"] = self._top(pool, scores)
        if spec.lexical:
            bm25 = index.bm25_context if (spec.autocontext or not spec.dense) else index.bm25
            out["bm25"] = self._top(pool, bm25.scores(query)[pool], positive=True)
        return out

    def _top(self, pool: np.ndarray, scores: np.ndarray, *, positive: bool = False) -> list[tuple[Document, float]]:
        order = np.argsort(-scores, kind="stable")[:_FETCH_K]
        return [(self.index.chunks[int(pool[i])], float(scores[i])) for i in order if not positive or scores[i] > 0]

    def _fused(self, queries: list[str], pool: np.ndarray) -> list[tuple[Document, float]]:

        spec = self.spec
        lists: dict[str, list[tuple[Document, float]]] = {}
        weights: dict[str, float] = {}
        for qi, query in enumerate(queries):
            share = 1.0 if len(queries) == 1 else (
                spec.main_query_weight if qi == 0 else (1 - spec.main_query_weight) / (len(queries) - 1))
            for name, hits in self._lists(query, pool).items():
                lists[f"{name}|{qi}"] = hits
                scorer = spec.dense_weight if name == "dense" else 1 - spec.dense_weight
                weights[f"{name}|{qi}"] = share * (scorer if spec.dense and spec.lexical else 1.0)
        if len(lists) == 1:
            return next(iter(lists.values()))
        return fuse(lists, method=spec.fusion, weights=weights, top_k=_FETCH_K)

    def _route(self, question: str, scored: list[tuple[Document, float]]) -> list[tuple[Document, float]]:
        """Boost every candidate by its document's routing score (shared store only)."""
        norm = _minmax(np.array([s for _, s in scored]))
        return self._document_router().boost(question, list(zip([d for d, _ in scored], norm.tolist(), strict=True)),
                                             weight=self.spec.route_weight)

    def _routed_pool(self, question: str, pool: np.ndarray) -> np.ndarray:
        """Search only the documents the question names, when it names any (else every document)."""
        chosen = self._document_router().route(question).values
        if not chosen:
            return pool
        return np.sort(np.concatenate([self.index.positions[n] for n in chosen]))

    def _document_router(self) -> DocumentRouter:
        """One card per filing: its title (company, period, form) and its name ("AMCOR 2023Q2 10Q")."""

        if self._router is None:
            cards = {name: f"{title} | {name.replace('_', ' ')}" for name, title in self.index.titles.items()}
            self._router = DocumentRouter(cards, key="doc_name")
        return self._router

    def _rerank(self, queries: list[str], scored: list[tuple[Document, float]]) -> list[tuple[Document, float]]:
        """`EmbeddingReranker` on the top candidates (best match over the question's parts), fused with stage one."""

        spec = self.spec
        top = scored[: spec.rerank_depth]
        reranker = EmbeddingReranker(embedding=self.index.embeddings)
        parts = queries if len(queries) > 1 else sub_queries(queries[0])
        best: dict[int, float] = {}
        for part in parts:
            for doc, score in reranker.rerank(part, [d for d, _ in top]):
                key = doc.metadata["position"]
                best[key] = max(best.get(key, -1.0), score)
        blended = blend_rerank(top, [(d, best[d.metadata["position"]]) for d, _ in top], weight=spec.rerank_weight)
        floor = min([0.0, *(score for _, score in blended)])
        return blended + [(d, floor - 1e-6) for d, _ in scored[len(top):]]

    def _select(self, scored: list[tuple[Document, float]]) -> list[Document]:
        spec, source = self.spec, self.index.bm25
        if spec.rse:

            return segment_documents(relevant_segments([scored], source, preset=spec.rse, **dict(spec.rse_overrides)))
        if spec.neighbours:

            return expand_neighbours([d for d, _ in scored[:_EXPAND_HITS]], source, window=spec.neighbours)
        return [d for d, _ in scored]

    def _fix_pages(self, doc: Document) -> Document:
        """A budget-truncated multi-chunk document keeps only the pages whose chunks it still holds."""
        indices = doc.metadata.get("chunk_indices")
        if not doc.metadata.get("truncated") or not indices:
            return doc
        positions = self.index.positions[doc.metadata["doc_name"]]
        kept = [self.index.chunks[int(positions[i])] for i in indices
                if self.index.chunks[int(positions[i])].page_content[:80] in doc.page_content]
        pages = list(dict.fromkeys(c.metadata["page"] for c in kept))
        return Document(page_content=doc.page_content, metadata={**doc.metadata, "pages": pages})


def _minmax(scores: np.ndarray) -> np.ndarray:
    if len(scores) == 0:
        return scores.astype(np.float64)
    lo, hi = float(scores.min()), float(scores.max())
    return (scores - lo) / (hi - lo) if hi > lo else np.ones_like(scores, dtype=np.float64)


def run_financebench(*, data_dir: str | Path | None = None, cache_dir: str | Path | None = "bench/results/cache",
                     out_dir: str | Path | None = "bench/results", settings: Sequence[str] = ("single", "shared"),
                     configs: Sequence[str] | None = None, limit: int | None = None, budget: int = DEFAULT_BUDGET,
                     chunk_size: int = 1000, chart: bool = True, embeddings: Embeddings | None = None,
                     progress: Callable[[str], None] | None = None) -> tuple[BenchReport, list[Path]]:
    """Build the index, run the configurations, and write the report files (when `out_dir` is set).

    `embeddings` defaults to the offline MiniLM model; vectors are cached in `cache_dir`.

    Raises:
        ConfigError: an unknown configuration name or setting, or a missing data directory.
    """

    names = list(configs) if configs else list(CONFIGURATIONS)
    unknown = [n for n in names if n not in CONFIGURATIONS]
    if unknown:
        raise ConfigError(f"unknown configuration(s) {unknown}; valid: {', '.join(CONFIGURATIONS)}")
    started = time.perf_counter()
    data = FinanceBenchData.load(resolve_data_dir(data_dir), limit=limit)
    index = BenchIndex.build(data, cache_dir=cache_dir, chunk_size=chunk_size, embeddings=embeddings,
                             progress=progress)
    pipelines = [Pipeline(index, CONFIGURATIONS[n][1], budget=budget) for n in names]
    report = run_benchmark(data, pipelines, settings=settings, budget=budget, progress=progress)
    report.meta.update(chunk_size=chunk_size, chunks=len(index.chunks), seconds=time.perf_counter() - started,
                       command="python bench/financebench.py", targets=TARGETS, best="full", baseline="dense",
                       token_counter=CharTokenCounter.name)
    paths = write_report(report, out_dir, chart=chart) if out_dir is not None else []
    return report, paths
