"""rag.server."""
