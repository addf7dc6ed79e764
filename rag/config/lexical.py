"""Lexical and hybrid resource kinds for configs: `bm25` and `hybrid` (BM25 + dense, fused).

With an `index:` block the files are synced into a knowledge base under `path` at every build
(the one ingest path: unchanged files cost a hash check) and searched with BM25 only (`bm25`) or
dense + BM25 fused (`hybrid`). Without it, an index saved under `path` by `BM25Index.save` /
`HybridRetriever.save` is loaded.

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

from rag.base.errors import ConfigError
from rag.compose.knowledge_base import KnowledgeBase
from rag.compose.resource import Resource
from rag.config.resources import (
    BM25Settings,
    HybridSearchSettings,
    IndexConfig,
    ResourceBase,
    kb_embedding,
    kb_name,
    store_path,
    sync_files,
)
from rag.indexing.chunking import TokenChunker
from rag.indexing.manifest import list_knowledge_bases
from rag.retrieval.hybrid import HybridRetriever
from rag.retrieval.lexical import BM25Index, BM25Retriever

__all__ = ["BM25ResourceConfig", "BM25Settings", "HybridResourceConfig"]

logger = logging.getLogger(__name__)


class BM25ResourceConfig(ResourceBase):
    """A persisted BM25 index (`BM25Index.save` layout) in `path`."""

    kind: Literal["bm25"]
    path: str
    index: IndexConfig | None = None
    bm25: BM25Settings = Field(default_factory=BM25Settings)

    def build(self, *, embedding: Any, default_search_kwargs: dict[str, Any]) -> Resource:
        folder = store_path(self.path)
        if self.index is not None:
            return _synced(self, folder, embedding, default_search_kwargs, search="bm25",
                           hybrid={"bm25_settings": self.bm25.model_dump()})
        if kb_name(self.name) in list_knowledge_bases(folder):
            return _synced(self, folder, embedding, default_search_kwargs, search="bm25",
                           hybrid={"bm25_settings": self.bm25.model_dump()})
        if not (folder / "index.json").exists():
            raise ConfigError(f"resource {self.name!r}: no BM25 index at {str(folder)!r}; add an 'index:' "
                              "block to build it from files")
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
        folder = store_path(self.path)
        if self.index is not None:
            return _synced(self, folder, embedding, default_search_kwargs, search="hybrid",
                           hybrid={**self.fusion_settings(), "bm25_settings": self.bm25.model_dump()})
        if kb_name(self.collection or self.name) in list_knowledge_bases(folder):
            return _synced(self, folder, embedding, default_search_kwargs, search="hybrid",
                           hybrid={**self.fusion_settings(), "bm25_settings": self.bm25.model_dump()})
        if not (folder / "bm25" / "index.json").exists():
            raise ConfigError(f"resource {self.name!r}: no hybrid index at {str(folder)!r}; add an 'index:' "
                              "block to build it from files")
        retriever = HybridRetriever.load(folder, embedding=embedding, collection_name=self.collection or self.name,
                                         **self.fusion_settings())
        return Resource.from_retriever(self.name, retriever, description=self.description,
                                       search_kwargs=self.merged_search_kwargs(default_search_kwargs))


def _synced(spec: Any, folder: Any, embedding: Any, defaults: dict[str, Any], *, search: str,
            hybrid: dict[str, Any]) -> Resource:
    """The resource over the knowledge base in `folder`, synced from the spec's `index:` files if it has them."""
    name = kb_name(getattr(spec, "collection", None) or spec.name)
    if spec.index is None:
        kb = KnowledgeBase.open(name, folder, embedding=kb_embedding(embedding))
    else:
        kb = KnowledgeBase(name, folder, embedding=kb_embedding(embedding),
                           chunker=TokenChunker.sized(spec.index.chunk_size))
        sync_files(kb, spec.index, resource=spec.name)
    return kb.as_resource(name=spec.name, search=search, hybrid=hybrid, description=spec.description,
                          search_kwargs=spec.merged_search_kwargs(defaults))
