"""rag: retrieval-augmented generation on LangChain Runnables, offline by default.

Example:
    >>> from rag import RAG, Resource
"""

from __future__ import annotations

from rag.core.errors import ConfigError, FilterError, InputError, RagError
from rag.core.generator import RAG, aggregate_documents
from rag.core.resource import Resource
from rag.generation.rag_with_source import rag_chain_from_docs

__all__ = [
    "RAG",
    "ConfigError",
    "FilterError",
    "InputError",
    "RagError",
    "Resource",
    "aggregate_documents",
    "rag_chain_from_docs",
]

__version__ = "0.1.0"
