"""Moved to `rag.stores.partitioned` (a store layout); this path keeps working."""

from rag.stores import PartitionedChroma, PartitionedRetriever  # noqa: F401

__all__ = ["PartitionedChroma", "PartitionedRetriever"]
