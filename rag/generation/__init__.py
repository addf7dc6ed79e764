"""rag.generation."""
