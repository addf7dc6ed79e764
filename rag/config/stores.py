"""Resource kinds on vector stores: `chroma`, `chroma_server`, `pgvector`, `qdrant`, `milvus`, `lancedb`, `faiss`.

Each opens an existing store through the registry (`rag.stores.registry`) and wraps it with
`Resource.from_vectorstore`, so the portable filter is translated natively (docs/stores.md): one
model per kind, on one base (`open(embedding)` is the store, errors are one line without secrets).
The `chroma` kinds are the default backend's stores in a directory of its own (`path`) or on its
server (`host`, `port`), reached through the backend's directory functions (`Capability.OWN_DIRECTORY`);
they also take an `index:` block, which syncs files into a knowledge base kept there.
Connection strings and keys are given by environment-variable NAME (`url_env`, `uri_env`,
`api_key_env`, `token_env`), never by value; embedded stores take a `path` instead. `create: true`
makes an empty store when it is missing; filling it is up to you, or to a knowledge base that
keeps its chunks there (`kind: knowledge_base` with a `store:` block, `rag.config.knowledge_base`).

    resources:
      - {name: handbook, kind: chroma, path: .rag, index: {paths: [handbook]}}
      - {name: wiki, kind: chroma_server, host: 127.0.0.1, port: 8000, collection: wiki}
      - {name: docs, kind: pgvector, url_env: RAG_PG_URL, table: docs}
      - {name: tickets, kind: qdrant, path: .qdrant, collection: tickets}      # or url_env: QDRANT_URL
      - {name: notes, kind: milvus, path: notes.db, collection: notes}         # or uri_env: MILVUS_URI
      - {name: papers, kind: lancedb, path: .lancedb, table: papers}
      - {name: faq, kind: faiss, path: .faiss/faq}

Example:
    >>> spec = QdrantResourceConfig(kind="qdrant", name="docs", url_env="QDRANT_URL")
    >>> spec.collection_name, spec.path
    ('docs', None)
    >>> spec = ChromaResourceConfig(kind="chroma", name="docs", path=".rag", index={"paths": ["docs"]})
    >>> spec.collection_name, spec.index.glob
    ('docs', '**/*')
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from rag.base.errors import ConfigError, RagError, StoreError
from rag.compose.knowledge_base import KnowledgeBase
from rag.compose.resource import Resource
from rag.config.models import check_env_name, kind_of
from rag.config.resources import IndexConfig, ResourceBase, kb_embedding, kb_name, store_path, sync_files
from rag.indexing.chunking import TokenChunker
from rag.stores.registry import DirectoryBackend, directory_backend, open_store

__all__ = ["STORE_KINDS", "ChromaResourceConfig", "ChromaServerResourceConfig", "FaissResourceConfig", "LanceDBResourceConfig", "MilvusResourceConfig", "PGVectorResourceConfig",
           "QdrantResourceConfig"]


def _env(name: str, resource: str, what: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise ConfigError(f"resource {resource!r}: the environment variable {name} (the {what}) is not set")
    return value


_ENV_FIELDS = ("url_env", "uri_env", "api_key_env", "token_env")
_SQL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


class _StoreBase(ResourceBase):
    create: bool = False

    @field_validator(*_ENV_FIELDS, mode="after", check_fields=False)
    @classmethod
    def _check_env_names(cls, value: str | None) -> str | None:
        return check_env_name(value)

    def open(self, embedding: Any) -> Any:
        """The vector store this entry names (`create: true`: made empty when missing).

        Raises:
            StoreError: the store cannot be opened: one line naming the resource, where (an
                environment variable by its NAME, never its value) and the cause's type and first line.
        """
        with self._opening():
            return self._open(embedding)

    def _open(self, embedding: Any) -> Any:
        raise NotImplementedError

    @contextmanager
    def _opening(self) -> Iterator[None]:
        """Turn whatever a client raises while opening into one `StoreError` that holds no secret.

        A connection string or token read from the environment is a secret (a password in a URL),
        and a client's message may quote it, or the SQL it sent: every such value is replaced by
        ``$NAME`` of its variable, and only the first line of a client's message is kept.
        """
        secrets = {os.environ[name]: f"${name}" for field in _ENV_FIELDS
                   if (name := getattr(self, field, None)) and os.environ.get(name)}

        def hide(text: str) -> str:
            for value, shown in sorted(secrets.items(), key=lambda item: -len(item[0])):
                text = text.replace(value, shown)
            return re.sub(r"://[^/\s:@]+:[^/\s@]+@", "://***:***@", text)   # any other credentials in a URL

        try:
            yield
        except ConfigError as exc:
            raise ConfigError(hide(str(exc))) from None
        except RagError as exc:
            raise StoreError(hide(str(exc))) from None
        except Exception as exc:  # noqa: BLE001 - a client's error (bad URL, refused connection, SQL): one line
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise StoreError(f"resource {self.name!r}: cannot open its {self.kind} store "
                             f"({type(exc).__name__}: {hide(first)}); check the address and that the server "
                             "runs") from None

    def build(self, *, embedding: Any, default_search_kwargs: dict[str, Any]) -> Resource:
        return Resource.from_vectorstore(self.name, self.open(embedding), self.merged_search_kwargs(default_search_kwargs),
                                         description=self.description)


class _PathOrEnv(_StoreBase):
    """An embedded store in `path`, or a server whose address is in the environment variable `*_env`."""

    path: str | None = None
    env_key: ClassVar[str] = ""

    @model_validator(mode="after")
    def _one_place(self):
        given = [key for key in ("path", self.env_key) if getattr(self, key, None)]
        if len(given) != 1:
            raise ValueError(f"give exactly one of 'path' (embedded) or '{self.env_key}' (the name of the "
                             f"environment variable holding the server's address); got {given or 'neither'}")
        return self


class PGVectorResourceConfig(_StoreBase):
    """A `PGVectorStore` table; `url_env` names the variable holding the SQLAlchemy URL (postgresql+psycopg://...)."""

    kind: Literal["pgvector"]
    url_env: str
    table: str | None = None
    schema_name: str = "public"
    #: the index a table this entry creates gets on its vectors (`rag.stores.pg_ann`): ``hnsw``, or ``none`` for a
    #: bulk load that adds the index afterwards (faster than keeping it current row by row)
    vector_index: Literal["hnsw", "none"] = "hnsw"


    @field_validator("table", "schema_name")
    @classmethod
    def _sql_name(cls, value: str | None) -> str | None:
        if value is not None and not _SQL_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a table or schema name: use 1-63 letters, digits and '_', "
                             "not starting with a digit")
        return value

    def _open(self, embedding: Any) -> Any:
        url = _env(self.url_env, self.name, "PostgreSQL URL")
        return open_store(self.kind, url, self.table or self.name, embedding, schema=self.schema_name,
                          create=self.create, vector_index=self.vector_index)


class QdrantResourceConfig(_PathOrEnv):
    """A Qdrant collection: local mode in `path`, or the server whose URL is in `url_env` (key in `api_key_env`)."""

    kind: Literal["qdrant"]
    url_env: str | None = None
    api_key_env: str | None = None
    collection: str | None = None
    env_key: ClassVar[str] = "url_env"


    @property
    def collection_name(self) -> str:
        return self.collection or self.name

    def _open(self, embedding: Any) -> Any:
        url = _env(self.url_env, self.name, "Qdrant URL") if self.url_env else None
        key = _env(self.api_key_env, self.name, "Qdrant API key") if self.api_key_env else None
        path = str(store_path(self.path)) if self.path else None
        return open_store(self.kind, self.collection_name, embedding, path=path, url=url, api_key=key,
                          create=self.create)


class MilvusResourceConfig(_PathOrEnv):
    """A Milvus collection: a Milvus Lite file at `path`, or the server whose URI is in `uri_env` (`token_env`)."""

    kind: Literal["milvus"]
    uri_env: str | None = None
    token_env: str | None = None
    collection: str | None = None
    env_key: ClassVar[str] = "uri_env"


    def _open(self, embedding: Any) -> Any:
        uri = _env(self.uri_env, self.name, "Milvus URI") if self.uri_env else str(store_path(self.path))
        token = _env(self.token_env, self.name, "Milvus token") if self.token_env else None
        return open_store(self.kind, self.collection or self.name, embedding, uri=uri, token=token, create=self.create)


class LanceDBResourceConfig(_PathOrEnv):
    """A `LanceStore` table in the LanceDB directory `path`, or at the URI in `uri_env` (e.g. s3://...)."""

    kind: Literal["lancedb"]
    uri_env: str | None = None
    table: str | None = None
    env_key: ClassVar[str] = "uri_env"


    def _open(self, embedding: Any) -> Any:
        uri = _env(self.uri_env, self.name, "LanceDB URI") if self.uri_env else str(store_path(self.path))
        try:
            return open_store(self.kind, self.table or self.name, embedding, uri=uri, create=self.create)
        except ConfigError as exc:
            raise ConfigError(f"resource {self.name!r}: {exc}") from None


class FaissResourceConfig(_StoreBase):
    """A `FaissStore` saved in the directory `path` (`FaissStore.save`)."""

    kind: Literal["faiss"]
    path: str

    def _open(self, embedding: Any) -> Any:
        # `create`: saved there by a knowledge base after each write
        return open_store(self.kind, store_path(self.path), embedding, create=self.create)


class _OwnDirectory(_StoreBase):
    """A collection of the default backend (`chroma`) in its own directory or on its server; with `index:`, a
    knowledge base kept there, synced from files at every build."""

    path: str = ".rag"
    collection: str | None = None
    index: IndexConfig | None = None

    @property
    def collection_name(self) -> str:
        return self.collection or self.name

    @staticmethod
    def backend() -> DirectoryBackend:
        """The backend's directory functions (`rag.stores.registry.DirectoryBackend`)."""
        return directory_backend(kind_of(ChromaResourceConfig))

    def _client(self, backend: DirectoryBackend) -> Any:
        raise NotImplementedError

    def _where(self) -> str:
        raise NotImplementedError

    def _open(self, embedding: Any) -> Any:
        backend = self.backend()
        client = self._client(backend)
        names = backend.collections(client)
        if backend.store_name(self.collection_name) not in names and not self.create:
            raise ConfigError(f"resource {self.name!r}: no collection {self.collection_name!r} in {self._where()}; "
                              f"available: {', '.join(names) or '(none)'}; add an 'index:' block to build it "
                              "from files, or 'create: true' for an empty one")
        return backend.new_vectorstore(self.collection_name, embedding, client=client)

    def build(self, *, embedding: Any, default_search_kwargs: dict[str, Any]) -> Resource:
        if self.index is None:
            return super().build(embedding=embedding, default_search_kwargs=default_search_kwargs)
        with self._opening():
            client = self._client(self.backend())
        kb = KnowledgeBase(kb_name(self.collection_name), store_path(self.path), embedding=kb_embedding(embedding),
                           chunker=TokenChunker.sized(self.index.chunk_size), client=client)
        sync_files(kb, self.index, resource=self.name)
        return kb.as_resource(name=self.name, search="dense", search_kwargs=self.merged_search_kwargs(default_search_kwargs),
                              description=self.description)


class ChromaResourceConfig(_OwnDirectory):
    """A persistent Chroma collection in the local directory `path`."""

    kind: Literal["chroma"]

    def _where(self) -> str:
        return f"store {str(store_path(self.path))!r}"

    def _client(self, backend: DirectoryBackend) -> Any:
        path = store_path(self.path)
        if not path.is_dir() and self.index is None and not self.create:
            raise ConfigError(f"resource {self.name!r}: no store at {str(path)!r}; create one with "
                              f"`rag index PATH --store {self.path}` or add an 'index:' block")
        path.mkdir(parents=True, exist_ok=True)
        return backend.local_client(path)


class ChromaServerResourceConfig(_OwnDirectory):
    """A collection on a running Chroma server; with `index:` its knowledge base's manifest and records live in `path`."""

    kind: Literal["chroma_server"]
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    ssl: bool = False
    token_env: str | None = None

    def _where(self) -> str:
        return f"Chroma server {self.host}:{self.port}"

    def _client(self, backend: DirectoryBackend) -> Any:
        headers = {}
        if self.token_env:
            token = os.environ.get(self.token_env)
            if not token:
                raise ConfigError(f"resource {self.name!r}: the environment variable {self.token_env} is not set")
            headers["Authorization"] = f"Bearer {token}"
        try:
            return backend.server_client(self.host, self.port, ssl=self.ssl, headers=headers)
        except Exception as exc:  # chromadb raises plain exceptions for connection errors
            raise StoreError(f"resource {self.name!r}: cannot reach the {self._where()}: {exc}") from exc


#: the store kinds a knowledge base can keep its chunks in (`store:` of `kind: knowledge_base`): every backend's,
#: the default one's (`chroma`: a collection in a directory of its own) among them
STORE_KINDS: dict[str, type[_StoreBase]] = {kind_of(model): model for model in (
    ChromaResourceConfig, PGVectorResourceConfig, QdrantResourceConfig, MilvusResourceConfig, LanceDBResourceConfig,
    FaissResourceConfig)}
