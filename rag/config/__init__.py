"""Configuration files (YAML) -> validated models -> a ready `RAG`; between the chain (`RAG`, above) and its parts (`Resource`, `KnowledgeBase`, below)."""
