"""Resource kinds a config can declare, each a strict pydantic model with a `build()` method.

- `chroma`: a persistent Chroma collection in a local directory (`path`, default `.rag`);
- `chroma_server`: a collection on a running Chroma server (`chromadb.HttpClient`; `host`, `port`).

Both take an optional `index:` block (`paths`, `glob`, `exclude`, `chunk_size`): when the
collection is missing or empty it is built from those files on first use, so a config can
serve a folder of documents with no separate `rag index` step. Without `index:` a missing
collection is an error listing the collections that exist (or `create: true` makes it empty).

Example:
    >>> spec = ChromaResourceConfig(kind="chroma", name="docs", path=".rag", index={"paths": ["docs"]})
    >>> spec.collection_name, spec.index.glob
    ('docs', '**/*')
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from rag.core.config_models import StrictModel, check_env_name
from rag.core.errors import ConfigError, StoreError
from rag.core.resource import Resource, validate_search_kwargs

__all__ = [
    "RESOURCE_KINDS",
    "ChromaResourceConfig",
    "ChromaServerResourceConfig",
    "IndexConfig",
    "ResourceConfig",
]

logger = logging.getLogger(__name__)
_BATCH = 64


class IndexConfig(StrictModel):
    """Files to index into an empty collection (txt, md, html, pdf)."""

    paths: list[str] = Field(min_length=1)
    glob: str = "**/*"
    exclude: list[str] = Field(default_factory=list)
    chunk_size: int | None = Field(default=None, ge=50, le=20_000)


class _ResourceBase(StrictModel):
    name: str = Field(min_length=1)
    description: str = ""
    search_kwargs: dict[str, Any] = Field(default_factory=dict)

    @field_validator("search_kwargs")
    @classmethod
    def _check_search_kwargs(cls, value: dict[str, Any]) -> dict[str, Any]:
        return validate_search_kwargs(value)

    def merged_search_kwargs(self, defaults: dict[str, Any]) -> dict[str, Any]:
        return {**defaults, **self.search_kwargs}


class _ChromaBase(_ResourceBase):
    collection: str | None = None
    index: IndexConfig | None = None
    create: bool = False

    @property
    def collection_name(self) -> str:
        return self.collection or self.name

    def _resource(self, client: Any, embedding: Any, defaults: dict[str, Any], where: str) -> Resource:
        from rag.core.resource import _chroma_collection_name, new_chroma

        wanted = _chroma_collection_name(self.collection_name)
        names = [c if isinstance(c, str) else c.name for c in client.list_collections()]
        if wanted not in names and self.index is None and not self.create:
            raise ConfigError(f"resource {self.name!r}: no collection {self.collection_name!r} in {where}; "
                              f"available: {', '.join(names) or '(none)'}; add an 'index:' block to build it "
                              "from files, or 'create: true' for an empty one")
        store = new_chroma(self.collection_name, embedding, client=client)
        if self.index is not None and store._collection.count() == 0:
            _index_files(store, self.index, resource=self.name)
        return Resource.from_vectorstore(self.name, store, self.merged_search_kwargs(defaults),
                                         description=self.description)


class ChromaResourceConfig(_ChromaBase):
    """A persistent Chroma collection in a local directory."""

    kind: Literal["chroma"]
    path: str = ".rag"

    def build(self, *, embedding: Any, default_search_kwargs: dict[str, Any]) -> Resource:
        import chromadb

        path = Path(self.path).expanduser()
        if not path.is_dir() and self.index is None and not self.create:
            raise ConfigError(f"resource {self.name!r}: no store at {str(path)!r}; create one with "
                              f"`rag index PATH --store {self.path}` or add an 'index:' block")
        path.mkdir(parents=True, exist_ok=True)
        client = chromadb.PersistentClient(path=str(path))
        return self._resource(client, embedding, default_search_kwargs, f"store {str(path)!r}")


class ChromaServerResourceConfig(_ChromaBase):
    """A collection on a running Chroma server, reached with `chromadb.HttpClient`.

    Keep the server on loopback or a private network: Chroma servers up to 1.5.9 have a
    remote-code-execution bug (CVE-2026-45829).
    """

    kind: Literal["chroma_server"]
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    ssl: bool = False
    token_env: str | None = None

    @field_validator("token_env")
    @classmethod
    def _check_token_env(cls, value: str | None) -> str | None:
        return check_env_name(value)

    def build(self, *, embedding: Any, default_search_kwargs: dict[str, Any]) -> Resource:
        import chromadb

        headers = {}
        if self.token_env:
            token = os.environ.get(self.token_env)
            if not token:
                raise ConfigError(f"resource {self.name!r}: the environment variable {self.token_env} is not set")
            headers["Authorization"] = f"Bearer {token}"
        where = f"Chroma server {self.host}:{self.port}"
        try:
            client = chromadb.HttpClient(host=self.host, port=self.port, ssl=self.ssl, headers=headers or None)
            client.heartbeat()
        except Exception as exc:  # chromadb raises plain exceptions for connection errors
            raise StoreError(f"resource {self.name!r}: cannot reach the {where}: {exc}") from exc
        return self._resource(client, embedding, default_search_kwargs, where)


def _index_files(store: Any, spec: IndexConfig, *, resource: str) -> None:
    """Load, chunk and embed the files of `spec` into `store` (ids are content hashes)."""
    from rag.core.resource import _doc_id
    from rag.indexing.chunking import split_documents
    from rag.indexing.loaders import LoadReport, load_directory

    report = LoadReport()
    for raw in spec.paths:
        part = load_directory(Path(raw).expanduser(), glob=spec.glob, exclude=spec.exclude)
        report.documents += part.documents
        report.skipped += part.skipped
    for skipped in report.skipped:
        logger.warning("resource %s: skipped %s: %s", resource, skipped.path, skipped.reason)
    if not report.documents:
        raise ConfigError(f"resource {resource!r}: no readable documents in {spec.paths} matching {spec.glob!r}")
    kwargs = {} if spec.chunk_size is None else {"chunk_size": spec.chunk_size,
                                                  "chunk_overlap": min(100, spec.chunk_size // 8)}
    chunks = split_documents(report.documents, **kwargs)
    for start in range(0, len(chunks), _BATCH):
        part = chunks[start:start + _BATCH]
        store.add_documents(part, ids=[_doc_id(d) for d in part])
    logger.info("resource %s: indexed %d chunks from %d documents", resource, len(chunks), len(report.documents))


ResourceConfig = ChromaResourceConfig | ChromaServerResourceConfig

#: kind -> config model; the only resource types a config can build.
RESOURCE_KINDS: dict[str, type[_ResourceBase]] = {
    "chroma": ChromaResourceConfig,
    "chroma_server": ChromaServerResourceConfig,
}
