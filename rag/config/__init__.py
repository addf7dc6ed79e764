"""Configuration files (YAML) -> validated models -> a ready `RAG`; the floor above composition."""
