"""rag.indexing."""
