"""rag.core."""
