"""Retrieval components: BM25, hybrid search, fusion, rephrasing, routing, named sections, reranking, expansion,
RSE, budget.

Every retriever here takes `k` and a portable `filter` per call (`accepts_portable_filter`), so it
plugs into a `Resource`; `rag.retrieve` (in `rag.compose.retrieve`) runs a whole path over them.

Example:
    >>> from rag.retrieval import BM25Retriever, HybridRetriever  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> module that defines it (imported on first access: `import rag.retrieval` stays light)
_LAZY = {
    "CharTokenCounter": "rag.retrieval.budget",
    "TokenCounter": "rag.retrieval.budget",
    "apply_budget": "rag.retrieval.budget",
    "token_counter": "rag.retrieval.budget",
    "expand_neighbours": "rag.retrieval.expansion",
    "merge_chunk_texts": "rag.retrieval.expansion",
    "fuse": "rag.retrieval.fusion",
    "HybridRetriever": "rag.retrieval.hybrid",
    "dense_search": "rag.retrieval.hybrid",
    "BM25Index": "rag.retrieval.lexical",
    "BM25Retriever": "rag.retrieval.lexical",
    "diversify": "rag.retrieval.packing",
    "page_key": "rag.retrieval.packing",
    "PartitionIndex": "rag.stores",
    "PartitionedChroma": "rag.stores",
    "PartitionedRetriever": "rag.stores",
    "Rephraser": "rag.retrieval.rephrase",
    "keyword_query": "rag.retrieval.rephrase",
    "sub_queries": "rag.retrieval.rephrase",
    "CompressorReranker": "rag.retrieval.rerank",
    "CrossEncoderReranker": "rag.retrieval.rerank",
    "EmbeddingReranker": "rag.retrieval.rerank",
    "LLMFilterReranker": "rag.retrieval.rerank",
    "Reranker": "rag.retrieval.rerank",
    "blend_rerank": "rag.retrieval.rerank",
    "DocumentRouter": "rag.retrieval.routing",
    "RSE_PRESETS": "rag.retrieval.rse",
    "RSEConfig": "rag.retrieval.rse",
    "relevant_segments": "rag.retrieval.rse",
    "NamedSection": "rag.retrieval.sections",
    "SectionRouter": "rag.retrieval.sections",
}

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


def __getattr__(name: str) -> Any:
    """A public name, imported on first access; removed wrapper retrievers raise `RemovedError` naming the
    pipeline stage that replaces them."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _REMOVED:
        return getattr(importlib.import_module(f"rag.retrieval.{_REMOVED[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
