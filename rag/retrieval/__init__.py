"""Retrieval components: BM25, hybrid search, fusion, rephrasing, routing, named sections, reranking, expansion,
RSE, budget.

Every retriever here takes `k` and a portable `filter` per call (`accepts_portable_filter`), so it
plugs into a `Resource`; `rag.retrieve` (in `rag.core.retrieve`) runs a whole path over them.

Example:
    >>> from rag.retrieval import BM25Retriever, HybridRetriever  # doctest: +SKIP
"""

from __future__ import annotations

from rag.retrieval.budget import (
    CharTokenCounter,
    TokenCounter,
    apply_budget,
    token_counter,
)
from rag.retrieval.expansion import expand_neighbours, merge_chunk_texts
from rag.retrieval.fusion import fuse
from rag.retrieval.hybrid import HybridRetriever, dense_search
from rag.retrieval.lexical import BM25Index, BM25Retriever
from rag.retrieval.packing import diversify, page_key
from rag.retrieval.rephrase import (
    Rephraser,
    keyword_query,
    sub_queries,
)
from rag.retrieval.rerank import (
    CompressorReranker,
    CrossEncoderReranker,
    EmbeddingReranker,
    LLMFilterReranker,
    Reranker,
    blend_rerank,
)
from rag.retrieval.routing import DocumentRouter
from rag.retrieval.rse import RSE_PRESETS, RSEConfig, relevant_segments
from rag.retrieval.sections import NamedSection, SectionRouter
from rag.stores import PartitionedChroma, PartitionedRetriever, PartitionIndex

__all__ = [
    "RSE_PRESETS",
    "BM25Index",
    "BM25Retriever",
    "CharTokenCounter",
    "CompressorReranker",
    "CrossEncoderReranker",
    "DocumentRouter",
    "EmbeddingReranker",
    "HybridRetriever",
    "LLMFilterReranker",
    "NamedSection",
    "PartitionIndex",
    "PartitionedChroma",
    "PartitionedRetriever",
    "RSEConfig",
    "Rephraser",
    "Reranker",
    "SectionRouter",
    "TokenCounter",
    "apply_budget",
    "blend_rerank",
    "dense_search",
    "diversify",
    "expand_neighbours",
    "fuse",
    "keyword_query",
    "merge_chunk_texts",
    "page_key",
    "relevant_segments",
    "sub_queries",
    "token_counter",
]

_REMOVED = {"FusedQueryRetriever": "rephrase", "RerankerCompressor": "rerank", "RoutedRetriever": "routing",
            "RSERetriever": "rse", "SectionRetriever": "sections"}


def __getattr__(name: str) -> object:
    """Removed wrapper retrievers raise `RemovedError` naming the pipeline stage that replaces them."""
    if name in _REMOVED:
        import importlib

        return getattr(importlib.import_module(f"rag.retrieval.{_REMOVED[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
