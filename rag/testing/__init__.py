"""rag.testing."""
