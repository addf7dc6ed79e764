"""Seed import path; `rag.compose.generator` defines RAG, aggregate_documents."""
from rag.compose.generator import RAG, aggregate_documents  # noqa: F401
