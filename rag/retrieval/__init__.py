"""rag.retrieval."""
