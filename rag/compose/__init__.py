"""Composition: `RAG`, `Resource`, the retrieval pipeline and the knowledge base, assembled from the floors below."""
