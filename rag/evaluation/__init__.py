"""rag.evaluation."""
