"""rag.models."""
