"""Relevant Segment Extraction (RSE): return runs of consecutive chunks instead of isolated chunks.

The idea comes from spRAG/dsRAG; this is an independent implementation. Relevant text in a long
document tends to cluster, so RSE scores every chunk of the candidate documents and picks the
runs of consecutive chunks (segments) with the highest total value:

1. For each query, candidates ``(chunk, score)`` best first. Scores are *calibrated* to [0, 1]
   (see below). A candidate's value is ``relevance * exp(-rank / decay_rate) - penalty``;
   a chunk that is not a candidate of that query is worth ``-penalty``
   (``irrelevant_chunk_penalty``), so segments stretch across small gaps but not long ones.
2. Documents: those of the first ``top_k_for_document_selection`` candidates of any query.
3. Segments: queries take turns; each picks its best segment (the contiguous run of at most
   ``max_length`` chunks with the largest summed value, not overlapping a chosen segment) in any
   selected document; a query stops when its best is worth less than ``minimum_value``; all stop
   when ``overall_max_length`` chunks are chosen.
4. The text of each segment is read from a chunk source (`rag.indexing.neighbours`) and merged
   without repeating overlapping characters.

Calibration. The presets were tuned for reranker scores spread over [0, 1] (relevant close to
1, irrelevant close to 0). all-MiniLM-L6-v2 cosines bunch between about 0.2 and 0.7, and BM25 or
RRF scores have no fixed scale at all, so raw scores would make every chunk look half relevant.
``calibration="logistic"`` (default) maps each query's candidate scores through a logistic curve
fitted to that candidate set: 0.5 at the median score and 0.9 at the 90th percentile
(``1 / (1 + exp(-(s - median) / t))`` with ``t = (p90 - median) / ln 9``), so the best few
candidates of a query count as relevant and the bottom half as mostly irrelevant, whatever the
scorer. ``"rank"`` ignores scores (``1 - rank / n``); ``"none"`` uses scores as they are (for a
calibrated reranker).

Example:
    >>> from langchain_core.documents import Document
    >>> from rag.retrieval.lexical import BM25Index
    >>> chunks = [Document(page_content=f"c{i}", metadata={"doc_id": "d", "chunk_index": i}) for i in range(20)]
    >>> hits = [(chunks[i], s) for i, s in [(5, .9), (6, .8), (7, .85), (15, .2), (1, .1), (12, .3)]]
    >>> [(s.doc_id, s.start, s.end) for s in relevant_segments([hits], BM25Index.from_documents(chunks))]
    [('d', 5, 8)]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from langchain_core.documents import Document
from pydantic import BaseModel, ConfigDict, Field

from rag.base.errors import ConfigError, removed_names
from rag.base.filters import matches_canonical, validate_filter
from rag.base.result import Segment
from rag.indexing.neighbours import chunk_range
from rag.retrieval.expansion import window_document

__all__ = ["RSE_PRESETS", "RSEConfig", "calibrate", "relevant_segments", "segment_documents"]

__getattr__ = removed_names(__name__, {"RSERetriever": (
    "RSE is a stage of the retrieval pipeline: RAG(..., retrieval={'rse': 'balanced'}) or "
    "rag.retrieve(..., rse='balanced'); relevant_segments() runs it on scored chunks")})

Scored = Sequence[tuple[Document, float]]


class RSEConfig(BaseModel):
    """RSE settings (see the module docstring); start from a preset in `RSE_PRESETS`."""

    model_config = ConfigDict(extra="forbid")

    max_length: int = Field(default=15, ge=1)                 # chunks per segment
    overall_max_length: int = Field(default=30, ge=1)         # chunks over all segments
    minimum_value: float = 0.5
    irrelevant_chunk_penalty: float = Field(default=0.18, ge=0)
    decay_rate: float = Field(default=30, gt=0)
    top_k_for_document_selection: int = Field(default=10, ge=1)
    calibration: Literal["logistic", "rank", "none"] = "logistic"


RSE_PRESETS: dict[str, RSEConfig] = {
    "balanced": RSEConfig(),
    "precision": RSEConfig(irrelevant_chunk_penalty=0.2, minimum_value=0.6, max_length=15, overall_max_length=20),
    "find_all": RSEConfig(max_length=40, overall_max_length=200, minimum_value=0.4, irrelevant_chunk_penalty=0.18,
                          decay_rate=200, top_k_for_document_selection=200),
}


def _config(preset: str | RSEConfig, overrides: Mapping[str, Any]) -> RSEConfig:
    if isinstance(preset, RSEConfig):
        base = preset
    elif preset in RSE_PRESETS:
        base = RSE_PRESETS[preset]
    else:
        raise ConfigError(f"unknown RSE preset {preset!r}; valid: {', '.join(RSE_PRESETS)}")
    return RSEConfig(**{**base.model_dump(), **overrides}) if overrides else base


def calibrate(scores: Sequence[float], method: str = "logistic") -> list[float]:
    """Map one query's candidate scores to [0, 1] (see "Calibration" in the module docstring).

    Example:
        >>> [round(x, 2) for x in calibrate([0.7, 0.6, 0.5, 0.4, 0.3])]
        [0.94, 0.8, 0.5, 0.2, 0.06]
    """
    n = len(scores)
    if method == "none" or n == 0:
        return [float(s) for s in scores]
    if method == "rank":
        order = np.argsort(-np.asarray(scores, dtype=float), kind="stable")
        out = np.empty(n)
        out[order] = 1.0 - np.arange(n) / n
        return out.tolist()
    if method != "logistic":
        raise ConfigError(f"unknown calibration {method!r}; valid: logistic, rank, none")
    arr = np.asarray(scores, dtype=float)
    median, p90 = float(np.median(arr)), float(np.percentile(arr, 90))
    spread = p90 - median
    if spread <= 1e-12:
        spread = float(arr.std()) or 1.0
    t = spread / math.log(9)
    return (1.0 / (1.0 + np.exp(-(arr - median) / t))).tolist()


def _chunk_values(results: Scored, config: RSEConfig) -> dict[tuple[str, int], float]:
    relevance = calibrate([s for _, s in results], config.calibration)
    values: dict[tuple[str, int], float] = {}
    for rank, ((doc, _), rel) in enumerate(zip(results, relevance, strict=True)):
        key = (doc.metadata.get("doc_id"), doc.metadata.get("chunk_index"))
        if key[0] is None or not isinstance(key[1], int) or key in values:
            continue
        values[key] = rel * math.exp(-rank / config.decay_rate) - config.irrelevant_chunk_penalty
    return values


def _best_segment(values: np.ndarray, taken: np.ndarray, max_length: int) -> tuple[float, int, int]:
    """Best (sum, start, end) run of at most max_length free positions, non-empty; (-inf, 0, 0) if none."""
    sums = np.concatenate([[0.0], np.cumsum(values)])
    blocked = np.concatenate([[0], np.cumsum(taken.astype(np.int64))])
    best = (-math.inf, 0, 0)
    for length in range(1, min(max_length, len(values)) + 1):
        totals = sums[length:] - sums[:-length]
        totals = np.where(blocked[length:] - blocked[:-length] > 0, -np.inf, totals)
        i = int(np.argmax(totals))
        if totals[i] > best[0]:
            best = (float(totals[i]), i, i + length)
    return best


def _regions(lists: list[Scored], per_query: list[dict[tuple[str, int], float]], config: RSEConfig) -> Any:
    """Per selected document: its region's size and first chunk_index, and each query's chunk values there.

    A document's region runs from its first to its last candidate chunk: chunks outside are worth
    -penalty for every query, so no best segment starts or ends there. None when no document is selected.
    """
    selected: list[str] = []
    for results in lists:
        for doc, _ in results[: config.top_k_for_document_selection]:
            doc_id = doc.metadata.get("doc_id")
            if doc_id is not None and doc_id not in selected:
                selected.append(doc_id)
    if not selected:
        return None
    indices: dict[str, list[int]] = {}
    for values in per_query:
        for d, ci in values:
            if d in selected:
                indices.setdefault(d, []).append(ci)
    offsets = {d: min(ix) for d, ix in indices.items()}
    sizes = {d: max(ix) - offsets[d] + 1 for d, ix in indices.items()}
    arrays = [{d: np.full(n, -config.irrelevant_chunk_penalty) for d, n in sizes.items()} for _ in per_query]
    for q, values in enumerate(per_query):
        for (d, ci), v in values.items():
            if d in sizes:
                arrays[q][d][ci - offsets[d]] = v
    return sizes, offsets, arrays


def relevant_segments(query_results: Sequence[Scored] | Mapping[str, Scored], source: Any, *,
                      preset: str | RSEConfig = "balanced", filter: dict[str, Any] | None = None,
                      **overrides: Any) -> list[Segment]:
    """Pick the best segments for one or more queries' candidate lists, across documents.

    Args:
        query_results: one list of (chunk, score) per query, best first (chunks need ``doc_id``
            and ``chunk_index`` metadata); or a mapping query -> list.
        source: the chunk source for segment text (Chroma, PartitionedChroma, BM25Index).
        preset: "balanced", "precision", "find_all", or an `RSEConfig`.
        filter: the search's portable filter: candidates that do not match it are dropped and only
            chunks matching it are read into a segment, so RSE never widens what search could see.
        **overrides: `RSEConfig` fields that replace the preset's.

    Returns:
        Segments in the order chosen (best first), with merged text and metadata
        (``pages``, ``chunk_indices``, ``hits``, the first chunk's metadata).
    """
    config = _config(preset, overrides)
    canon = validate_filter(filter)
    lists = list(query_results.values()) if isinstance(query_results, Mapping) else list(query_results)
    if canon is not None:
        lists = [[(d, s) for d, s in results if matches_canonical(d.metadata, canon)] for results in lists]
    per_query = [_chunk_values(results, config) for results in lists]
    regions = _regions(lists, per_query, config)
    if regions is None:
        return []
    sizes, offsets, arrays = regions
    taken = {d: np.zeros(n, dtype=bool) for d, n in sizes.items()}
    cache: dict[tuple[int, str], tuple[float, int, int]] = {}
    chosen: list[tuple[str, int, int, float]] = []
    active = list(range(len(per_query)))
    used = 0
    while active and used < config.overall_max_length:
        for q in list(active):
            best = (-math.inf, "", 0, 0)
            for d in sizes:
                if (q, d) not in cache:
                    cache[(q, d)] = _best_segment(arrays[q][d], taken[d], config.max_length)
                total, start, end = cache[(q, d)]
                if total > best[0]:
                    best = (total, d, start, end)
            total, d, start, end = best
            if total < config.minimum_value or used + (end - start) > config.overall_max_length:
                active.remove(q)
                continue
            taken[d][start:end] = True
            for key in [key for key in cache if key[1] == d]:
                del cache[key]
            used += end - start
            chosen.append((d, start + offsets[d], end + offsets[d], float(total)))
    return [_segment(source, d, start, end, score, lists, canon) for d, start, end, score in chosen]


def _segment(source: Any, doc_id: str, start: int, end: int, score: float, lists: list[Scored],
             canon: dict[str, Any] | None) -> Segment:
    chunks = chunk_range(source, doc_id, start, end, filter=canon)
    hits = [doc for results in lists for doc, _ in results
            if doc.metadata.get("doc_id") == doc_id and start <= doc.metadata.get("chunk_index", -1) < end]
    if not chunks:
        chunks = sorted({d.metadata["chunk_index"]: d for d in hits}.values(), key=lambda d: d.metadata["chunk_index"])
    doc = window_document(chunks, hits=hits)
    doc.metadata["score"] = score
    return Segment(doc_id=str(doc_id), start=start, end=end, score=score, text=doc.page_content,
                   metadata=doc.metadata)


def segment_documents(segments: Sequence[Segment]) -> list[Document]:
    """One Document per segment (text and metadata of the segment), for generation."""
    return [Document(page_content=s.text, metadata={**s.metadata, "segment_score": s.score}) for s in segments]
