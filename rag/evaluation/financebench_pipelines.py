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
from typing import Literal

import numpy as np
from langchain_core.documents import Document

from rag.core.errors import ConfigError
from rag.evaluation.financebench_index import BenchIndex
from rag.evaluation.financebench_run import DEFAULT_BUDGET, BenchReport, Retrieval

__all__ = ["CONFIGURATIONS", "Pipeline", "PipelineSpec", "run_financebench"]

_RRF_K = 60
_POOL = 200            # candidates kept after first-stage scoring


@dataclass(frozen=True)
class PipelineSpec:
    """What one configuration does; see the module docstring."""

    name: str
    description: str
    lexical: bool = False
    dense: bool = True
    fusion: Literal["rrf", "convex"] = "convex"
    dense_weight: float = 0.8            # convex fusion weight of the dense score
    autocontext: bool = False
    title_weight: float = 0.3            # AutoContext: share of the title vector in a chunk vector
    heading_weight: float = 0.3          # ... and of the page-heading vector
    multi_query: bool = False
    routing: bool = False
    rerank: bool = False
    neighbours: int = 0
    rse: bool = False


def _specs() -> list[PipelineSpec]:
    base = PipelineSpec(name="dense", description="MiniLM cosine top chunks until the budget (vanilla RAG)")
    hybrid = replace(base, name="hybrid", lexical=True,
                     description="BM25 and dense, min-max normalised and fused by a convex combination (0.8 dense)")
    ac = replace(hybrid, name="autocontext", autocontext=True,
                 description="hybrid over chunks carrying their document title and page heading (AutoContext)")
    rr = replace(ac, name="rerank", rerank=True, description="autocontext, then the top 50 reranked with the embedding model")
    nb = replace(rr, name="neighbours", neighbours=1,
                 description="rerank, then each chosen chunk widened by its neighbours (+-1), merged")
    rse = replace(rr, name="rse", rse=True, description="rerank, then relevant segment extraction instead of top chunks")
    full = replace(rr, name="full", routing=True, multi_query=True,
                   description="document routing (company and period vs filing metadata) + multi-query + autocontext "
                               "hybrid + rerank")
    return [
        PipelineSpec(name="bm25", dense=False, lexical=True,
                     description="BM25 (rag.core.text tokens: stop words, stems) with the document title in each chunk"),
        base,
        replace(hybrid, name="hybrid-rrf", fusion="rrf", description="BM25 and dense fused by RRF (k=60)"),
        hybrid, ac, rr, nb, rse, full,
    ]


#: name -> (description, spec)
CONFIGURATIONS: dict[str, tuple[str, PipelineSpec]] = {s.name: (s.description, s) for s in _specs()}


class Pipeline:
    """A configuration bound to an index; `retrieve` follows the benchmark's `Configuration` protocol."""

    def __init__(self, index: BenchIndex, spec: PipelineSpec, *, budget: int = DEFAULT_BUDGET) -> None:
        self.index = index
        self.spec = spec
        self.budget = budget
        self.name = spec.name
        self.description = spec.description

    def retrieve(self, question: str, *, doc_name: str | None) -> Retrieval:
        """Rank the chunks of `doc_name` (or of every filing) for `question` and assemble the context."""
        spec, index = self.spec, self.index
        pool = index.pool(doc_name)
        scores = self._first_stage(question, pool)
        order = np.argsort(-scores, kind="stable")[:_POOL]
        ranked, values = pool[order], scores[order]
        chosen = _pack(index, ranked, self.budget)
        context = [_chunk_doc(index, [int(i)]) for i in chosen]
        return Retrieval(ranked=[index.chunks[int(i)] for i in ranked[:50]], context=context)

    def _first_stage(self, question: str, pool: np.ndarray) -> np.ndarray:
        spec, index = self.spec, self.index
        parts: list[np.ndarray] = []
        if spec.dense:
            vectors = (index.context_vectors(title_weight=spec.title_weight, heading_weight=spec.heading_weight)
                       if spec.autocontext else index.vectors)
            q = index.embed_queries([question])[0]
            parts.append(vectors[pool] @ q)
        if spec.lexical:
            bm25 = index.bm25_context if (spec.autocontext or not spec.dense) else index.bm25
            parts.append(bm25.scores(question)[pool])
        if len(parts) == 1:
            return parts[0]
        if spec.fusion == "rrf":
            return sum(1.0 / (_RRF_K + _ranks(p)) for p in parts)
        dense, lexical = parts
        return spec.dense_weight * _minmax(dense) + (1 - spec.dense_weight) * _minmax(lexical)


def _ranks(scores: np.ndarray) -> np.ndarray:
    ranks = np.empty(len(scores), dtype=np.float64)
    ranks[np.argsort(-scores, kind="stable")] = np.arange(1, len(scores) + 1)
    return ranks


def _minmax(scores: np.ndarray) -> np.ndarray:
    lo, hi = float(scores.min(initial=0.0)), float(scores.max(initial=0.0))
    return (scores - lo) / (hi - lo) if hi > lo else np.zeros_like(scores, dtype=np.float64)


def _pack(index: BenchIndex, ranked: np.ndarray, budget: int) -> list[int]:
    """Chunks in rank order while they fit the budget."""
    out, used = [], 0
    for i in ranked:
        cost = int(index.tokens[i])
        if used + cost > budget:
            break
        out.append(int(i))
        used += cost
    return out


def _chunk_doc(index: BenchIndex, positions: Sequence[int]) -> Document:
    """One context document from consecutive chunk positions of one filing (pages listed)."""
    chunks = [index.chunks[p] for p in positions]
    pages: list[int] = []
    starts: list[int] = []
    text = ""
    for chunk in chunks:
        if not pages or pages[-1] != chunk.metadata["page"]:
            pages.append(chunk.metadata["page"])
            starts.append(len(text) + (1 if text else 0))
        text = f"{text}\n{chunk.page_content}" if text else chunk.page_content
    meta = {k: chunks[0].metadata[k] for k in ("doc_name", "title", "source") if k in chunks[0].metadata}
    meta.update(pages=pages, page_starts=starts, chunk_start=positions[0], chunk_end=positions[-1] + 1)
    return Document(page_content=text, metadata=meta)


def run_financebench(*, data_dir: str | Path | None = None, cache_dir: str | Path | None = "bench/results/cache",
                     out_dir: str | Path | None = "bench/results", settings: Sequence[str] = ("single", "shared"),
                     configs: Sequence[str] | None = None, limit: int | None = None, budget: int = DEFAULT_BUDGET,
                     chunk_size: int = 1000, chart: bool = True,
                     progress: Callable[[str], None] | None = None) -> tuple[BenchReport, list[Path]]:
    """Build the index, run the configurations, and write the report files (when `out_dir` is set).

    Raises:
        ConfigError: an unknown configuration name or setting, or a missing data directory.
    """
    from rag.evaluation.financebench import FinanceBenchData, resolve_data_dir
    from rag.evaluation.financebench_report import write_report
    from rag.evaluation.financebench_run import run_benchmark

    names = list(configs) if configs else list(CONFIGURATIONS)
    unknown = [n for n in names if n not in CONFIGURATIONS]
    if unknown:
        raise ConfigError(f"unknown configuration(s) {unknown}; valid: {', '.join(CONFIGURATIONS)}")
    started = time.perf_counter()
    data = FinanceBenchData.load(resolve_data_dir(data_dir), limit=limit)
    index = BenchIndex.build(data, cache_dir=cache_dir, chunk_size=chunk_size, progress=progress)
    pipelines = [Pipeline(index, CONFIGURATIONS[n][1], budget=budget) for n in names]
    report = run_benchmark(data, pipelines, settings=settings, budget=budget, progress=progress)
    report.meta.update(chunk_size=chunk_size, chunks=len(index.chunks), seconds=time.perf_counter() - started,
                       command="python bench/financebench.py")
    paths = write_report(report, out_dir, chart=chart) if out_dir is not None else []
    return report, paths
