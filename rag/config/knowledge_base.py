"""The `knowledge_base` resource kind: a persistent `KnowledgeBase` in Chroma or another backend.

    resources:
      - {name: docs, kind: knowledge_base, path: .rag, index: {paths: [docs]}}
      - name: filings
        kind: knowledge_base
        index: {paths: [filings]}
        store: {kind: pgvector, url_env: RAG_PG_URL, table: filings}   # chunks in PostgreSQL
      - name: notes
        kind: knowledge_base
        index: {paths: [notes]}
        store: {kind: chroma, path: /data/chroma, collection: notes}  # chunks in a Chroma store of its own

Example:
    >>> spec = KnowledgeBaseResourceConfig(kind="knowledge_base", name="docs",
    ...                                    store={"kind": "qdrant", "path": ".qdrant"})
    >>> store_config(spec.store, "docs").collection_name
    'docs'
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationError, field_validator

from rag.base.errors import ConfigError
from rag.compose.knowledge_base import KnowledgeBase
from rag.compose.resource import Resource
from rag.config.access import PermissionsConfig
from rag.config.resources import (
    HybridSearchSettings,
    IndexConfig,
    ResourceBase,
    SectionSettings,
    kb_embedding,
    store_path,
    sync_files,
)
from rag.config.sources import SourceSpec, source_spec, sync_now
from rag.config.stores import STORE_KINDS
from rag.indexing.autocontext import AutoContext
from rag.indexing.chunking import TokenChunker

__all__ = ["KnowledgeBaseResourceConfig", "store_config"]


def store_config(spec: dict[str, Any], name: str) -> Any:
    """The store entry of a `store:` block (its `name` is the knowledge base's; `create` defaults to true).

    Raises:
        ConfigError: no or an unknown `kind`, or keys that kind does not take.
    """
    if not isinstance(spec, dict) or spec.get("kind") not in STORE_KINDS:
        got = spec.get("kind") if isinstance(spec, dict) else spec
        raise ConfigError(f"store: kind must be one of {', '.join(STORE_KINDS)} (Chroma in the knowledge base's "
                          f"path is the default: leave store: out); got {got!r}")
    if "name" in spec:
        raise ConfigError("store: takes no name (the knowledge base's name is used)")
    if "index" in spec:
        raise ConfigError("store: takes no index (the knowledge base's own index: block fills the store)")
    try:
        return STORE_KINDS[spec["kind"]](**{"create": True, **spec, "name": name})
    except ValidationError as exc:
        raise ConfigError(f"store: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from exc


class KnowledgeBaseResourceConfig(ResourceBase):
    """A persistent `KnowledgeBase` (manifest, incremental sync, AutoContext) in `path`.

    With an `index:` block the knowledge base is synced from those files on every build:
    unchanged files cost a hash check, changed ones are re-indexed, deleted ones removed.
    `autocontext` and `chunk_size` (MiniLM word pieces) apply to a new knowledge base; an
    existing one keeps the settings in its manifest (a different value is an error). A `hybrid:`
    block (``hybrid: {}`` for the defaults) searches dense + BM25 fused; the BM25 index is built
    from the stored chunks at every build, so it always matches the synced knowledge base. A
    `sections:` block (``sections: {}``) promotes the sections a question names into the results.
    A `permissions:` block (`rag.config.access.PermissionsConfig`) says who may read what it indexes.
    """

    kind: Literal["knowledge_base"]
    _kb: Any = PrivateAttr(default=None)   # the knowledge base `build` opened (rag serve syncs its scheduled sources)
    path: str = ".rag"
    knowledge_base: str | None = None
    index: IndexConfig | None = None
    create: bool = False
    autocontext: bool | None = None
    chunk_size: int | None = Field(default=None, ge=8, le=254)
    search: Literal["hybrid", "dense", "bm25"] = "hybrid"
    routing: Literal["auto", "on", "off"] = "auto"

    @field_validator("routing", mode="before")
    @classmethod
    def _yaml_booleans(cls, value: Any) -> Any:
        # YAML reads a bare on / off as a boolean
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value
    hybrid: HybridSearchSettings | None = None
    sections: SectionSettings | None = None
    store: dict[str, Any] | None = None
    sources: list[dict[str, Any]] | None = None   # (rag.config.sources: checked below, synced by build / rag serve)
    permissions: PermissionsConfig | None = None

    @field_validator("sources")
    @classmethod
    def _check_sources(cls, value: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        if value is not None:
            names = [source_spec(spec).name for spec in value]
            if len(set(names)) != len(names):
                raise ValueError(f"two sources of one resource have the same name: {names}; give each a name")
        return value

    def source_specs(self) -> list[SourceSpec]:
        """The checked `sources:` entries."""
        return [source_spec(spec) for spec in self.sources or ()]

    @field_validator("store")
    @classmethod
    def _check_store(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            store_config(value, "check")   # raises with what is wrong and what is valid
        return value

    @field_validator("index")
    @classmethod
    def _one_chunk_size(cls, index: IndexConfig | None) -> IndexConfig | None:
        if index is not None and index.chunk_size is not None:
            raise ValueError("a knowledge base sets chunk_size (in word pieces) on the resource, not under index")
        return index

    def build(self, *, embedding: Any, default_search_kwargs: dict[str, Any]) -> Resource:
        name = self.knowledge_base or self.name
        kwargs: dict[str, Any] = {"embedding": kb_embedding(embedding), "description": self.description}
        if self.permissions is not None:
            kwargs["permissions"] = self.permissions.kwargs()
        if self.autocontext is not None:
            kwargs["autocontext"] = AutoContext(enabled=self.autocontext)
        if self.chunk_size is not None:
            kwargs["chunker"] = TokenChunker.sized(self.chunk_size)
        if self.store is not None:
            kwargs["store"] = store_config(self.store, name).open(kwargs["embedding"])
        if self.index is None and not self.create and not self.sources:
            kb = KnowledgeBase.open(name, store_path(self.path), **kwargs)
        else:
            kb = KnowledgeBase(name, store_path(self.path), **kwargs)
            if self.index is None:
                kb.create()  # `create: true`: an empty knowledge base (opening alone never creates)
        if self.index is not None:
            sync_files(kb, self.index, resource=self.name)
        for spec in self.source_specs():
            if spec.every is None:   # (scheduled ones are synced by rag serve's background writer)
                sync_now(kb, spec, resource=self.name)
        self._kb = kb
        hybrid = None if self.hybrid is None else {**self.hybrid.fusion_settings(),
                                                    "bm25_settings": self.hybrid.bm25.model_dump()}
        sections = self.sections.model_dump() if self.sections is not None else None
        return kb.as_resource(name=self.name, search=self.search, routing=self.routing,
                              search_kwargs=self.merged_search_kwargs(default_search_kwargs),
                              description=self.description or None, hybrid=hybrid, sections=sections)
