"""Lexical and hybrid resource kinds for configs: `bm25` and `hybrid` (BM25 + dense, fused).

Both persist under `path` and, with an `index:` block, are built from files the first time
(when nothing is saved there yet); delete the folder to rebuild after the files change.

```yaml
resources:
  - {name: words, kind: bm25, path: .rag/bm25-docs, index: {paths: [docs]}}
  - {name: docs, kind: hybrid, path: .rag/hybrid-docs, fusion: rrf, index: {paths: [docs]}}
```

Example:
    >>> HybridResourceConfig(kind="hybrid", name="docs", path=".rag/h", fusion="convex",
    ...                      weights={"dense": 0.7, "bm25": 0.3}).fusion
    'convex'
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import Field

from rag.core.config_resources import (
    BM25Settings,
    HybridSearchSettings,
    IndexConfig,
    ResourceBase,
    load_chunks,
    store_path,
)
from rag.core.errors import ConfigError
from rag.core.resource import Resource

__all__ = ["BM25ResourceConfig", "BM25Settings", "HybridResourceConfig"]

logger = logging.getLogger(__name__)


class BM25ResourceConfig(ResourceBase):
    """A persisted BM25 index (`BM25Index.save` layout) in `path`."""

    kind: Literal["bm25"]
    path: str
    index: IndexConfig | None = None
    bm25: BM25Settings = Field(default_factory=BM25Settings)

    def build(self, *, embedding: Any, default_search_kwargs: dict[str, Any]) -> Resource:
        from rag.retrieval.lexical import BM25Index, BM25Retriever

        folder = store_path(self.path)
        if not (folder / "index.json").exists():
            if self.index is None:
                raise ConfigError(f"resource {self.name!r}: no BM25 index at {str(folder)!r}; add an 'index:' "
                                  "block to build it from files")
            chunks = load_chunks(self.index, resource=self.name)
            BM25Index.from_documents(chunks, **self.bm25.model_dump()).save(folder)
            logger.info("resource %s: BM25 index of %d chunks saved to %s", self.name, len(chunks), folder)
        retriever = BM25Retriever(index=BM25Index.load(folder))
        return Resource.from_retriever(self.name, retriever, description=self.description,
                                       search_kwargs=self.merged_search_kwargs(default_search_kwargs))


class HybridResourceConfig(ResourceBase, HybridSearchSettings):
    """Dense Chroma + BM25 over the same chunks, searched concurrently and fused (`HybridRetriever`).

    Fusion keys (`fusion`, `weights`, `fetch_k`, `rrf_k`) as in `HybridSearchSettings`; BM25 indexes the title.
    """

    kind: Literal["hybrid"]
    path: str
    collection: str | None = None
    index: IndexConfig | None = None
    bm25: BM25Settings = Field(default_factory=BM25Settings)

    def build(self, *, embedding: Any, default_search_kwargs: dict[str, Any]) -> Resource:
        from rag.retrieval.hybrid import HybridRetriever

        folder = store_path(self.path)
        settings = self.fusion_settings()
        collection = self.collection or self.name
        if (folder / "bm25" / "index.json").exists():
            retriever = HybridRetriever.load(folder, embedding=embedding, collection_name=collection, **settings)
        elif self.index is not None:
            chunks = load_chunks(self.index, resource=self.name)
            retriever = HybridRetriever.from_documents(chunks, embedding=embedding, persist_directory=folder,
                                                       collection_name=collection,
                                                       bm25_settings=self.bm25.model_dump(), **settings)
            logger.info("resource %s: hybrid index of %d chunks saved to %s", self.name, len(chunks), folder)
        else:
            raise ConfigError(f"resource {self.name!r}: no hybrid index at {str(folder)!r}; add an 'index:' "
                              "block to build it from files")
        return Resource.from_retriever(self.name, retriever, description=self.description,
                                       search_kwargs=self.merged_search_kwargs(default_search_kwargs))
