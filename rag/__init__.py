"""rag: retrieval-augmented generation on LangChain Runnables, offline by default.

Every public name except the errors is loaded on first access, so `import rag` (and the CLI's
`import rag.cli`) stays light: no LangChain runnables, no model, no database client, no web framework.

Example:
    >>> from rag import RAG, Resource
    >>> import rag
    >>> callable(rag.airag)
    True
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rag.base.errors import ConfigError, FilterError, InputError, RagError, StoreError

if TYPE_CHECKING:  # every public name, for editors and type checkers; at run time `__getattr__` imports it
    from rag.base.answer import Answer  # noqa: F401
    from rag.base.result import Candidate, RAGResult, Segment  # noqa: F401
    from rag.checks.citations import check_citations, resolve_citations  # noqa: F401
    from rag.checks.postprocess import answer_checks, check_answer  # noqa: F401
    from rag.checks.support import annotate_support  # noqa: F401
    from rag.compose.airag import airag, generate  # noqa: F401
    from rag.compose.build import build_index  # noqa: F401
    from rag.compose.chat import ConversationalRAG, InMemoryMessageStore  # noqa: F401
    from rag.compose.generator import aggregate_documents, RAG  # noqa: F401
    from rag.compose.knowledge_base import KnowledgeBase  # noqa: F401
    from rag.compose.pretty import pprint, to_html  # noqa: F401
    from rag.compose.resource import Resource  # noqa: F401
    from rag.compose.retrieve import aretrieve, retrieve  # noqa: F401
    from rag.compose.retriever import RAGRetriever  # noqa: F401
    from rag.compose.streaming import stream_events  # noqa: F401
    from rag.config.rag_config import load_config  # noqa: F401
    from rag.evaluation.qa_evals import build_qa_evals, load_qa_evals, run_qa_evals, save_qa_evals  # noqa: F401
    from rag.generation.answerer import Answerer  # noqa: F401
    from rag.generation.factory import default_answerer, ExtractiveAnswerer  # noqa: F401
    from rag.generation.llm_answerer import LLMAnswerer  # noqa: F401
    from rag.generation.rag_with_source import rag_chain_from_docs  # noqa: F401
    from rag.indexing.autocontext import AutoContext  # noqa: F401
    from rag.indexing.chunking import split_documents, TokenChunker  # noqa: F401
    from rag.indexing.embedding_cache import CachedEmbeddings  # noqa: F401
    from rag.indexing.loaders import load_directory, load_file  # noqa: F401
    from rag.indexing.tags import KeywordTagger, tag_filter  # noqa: F401
    from rag.models.pricing import register_price  # noqa: F401
    from rag.retrieval.budget import apply_budget  # noqa: F401
    from rag.retrieval.expansion import expand_neighbours  # noqa: F401
    from rag.retrieval.hybrid import HybridRetriever  # noqa: F401
    from rag.retrieval.lexical import BM25Retriever  # noqa: F401
    from rag.retrieval.rerank import CrossEncoderReranker, EmbeddingReranker, LLMFilterReranker  # noqa: F401
    from rag.retrieval.routing import DocumentRouter  # noqa: F401
    from rag.retrieval.rse import relevant_segments  # noqa: F401
    from rag.stores import PartitionedChroma  # noqa: F401

#: public name -> module that defines it (imported on first access)
_LAZY = {
    "RAG": "rag.compose.generator",
    "aggregate_documents": "rag.compose.generator",
    "Resource": "rag.compose.resource",
    "rag_chain_from_docs": "rag.generation.rag_with_source",
    "RAGResult": "rag.base.result",
    "Candidate": "rag.base.result",
    "Segment": "rag.base.result",
    "RAGRetriever": "rag.compose.retriever",
    # generation
    "airag": "rag.compose.airag",
    "generate": "rag.compose.airag",
    "annotate_support": "rag.checks.support",
    "check_citations": "rag.checks.citations",
    "resolve_citations": "rag.checks.citations",
    "check_answer": "rag.checks.postprocess",
    "answer_checks": "rag.checks.postprocess",
    "pprint": "rag.compose.pretty",
    "to_html": "rag.compose.pretty",
    "stream_events": "rag.compose.streaming",
    "ConversationalRAG": "rag.compose.chat",
    "InMemoryMessageStore": "rag.compose.chat",
    "ExtractiveAnswerer": "rag.generation.factory",
    "Answer": "rag.base.answer",
    "Answerer": "rag.generation.answerer",
    "LLMAnswerer": "rag.generation.llm_answerer",
    "default_answerer": "rag.generation.factory",
    "register_price": "rag.models.pricing",
    # indexing
    "build_index": "rag.compose.build",
    "KnowledgeBase": "rag.compose.knowledge_base",
    "CachedEmbeddings": "rag.indexing.embedding_cache",
    "load_directory": "rag.indexing.loaders",
    "load_file": "rag.indexing.loaders",
    "split_documents": "rag.indexing.chunking",
    "TokenChunker": "rag.indexing.chunking",
    "AutoContext": "rag.indexing.autocontext",
    "KeywordTagger": "rag.indexing.tags",
    "tag_filter": "rag.indexing.tags",
    # retrieval
    "retrieve": "rag.compose.retrieve",
    "aretrieve": "rag.compose.retrieve",
    "BM25Retriever": "rag.retrieval.lexical",
    "HybridRetriever": "rag.retrieval.hybrid",
    "EmbeddingReranker": "rag.retrieval.rerank",
    "CrossEncoderReranker": "rag.retrieval.rerank",
    "LLMFilterReranker": "rag.retrieval.rerank",
    "DocumentRouter": "rag.retrieval.routing",
    "relevant_segments": "rag.retrieval.rse",
    "expand_neighbours": "rag.retrieval.expansion",
    "apply_budget": "rag.retrieval.budget",
    "PartitionedChroma": "rag.stores",
    # configuration
    "load_config": "rag.config.rag_config",
    # evaluation
    "build_qa_evals": "rag.evaluation.qa_evals",
    "run_qa_evals": "rag.evaluation.qa_evals",
    "load_qa_evals": "rag.evaluation.qa_evals",
    "save_qa_evals": "rag.evaluation.qa_evals",
}

__all__ = [
    "ConfigError",
    "FilterError",
    "InputError",
    "RagError",
    "StoreError",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rag' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
