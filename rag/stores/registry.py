"""The store registry: every backend, registered once, by name and by the store class it serves.

A backend is one module of `rag.stores` exporting `STORE`, its `ChunkStore` class (the contract in
`rag.stores.chunk_store`), `open_store(...)`, which opens or creates one of its stores, and
`scratch_store(...)`, an empty one for tests. A module that keeps a knowledge base's chunks in the
knowledge base's own directory (or on its server) declares `Capability.OWN_DIRECTORY` in its
registration and has the functions of `DirectoryBackend`; the default backend (`DEFAULT`) is one. The
registry names the module as a string and imports it on first use, so no backend package
(chromadb, qdrant_client, pymilvus, ...) is imported until a store of that kind is used.
Nothing outside `rag.stores` names a backend or imports a backend module
(tests/unit/stores/test_store_registry.py): it asks this module.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> names()
    ('chroma', 'pgvector', 'qdrant', 'milvus', 'lancedb', 'faiss', 'inmemory')
    >>> chunks_of(InMemoryVectorStore(DeterministicFakeEmbedding(size=8))).backend
    'inmemory'
    >>> chunks_of(object()) is None
    True
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol, cast

from rag.base.errors import ConfigError
from rag.stores.chunk_store import OPTIONAL, Capability, ChunkStore

__all__ = ["Backend", "DEFAULT", "DirectoryBackend", "backend", "chunks_of", "collections", "directory_backend", "having", "holds_store", "is_engine_error",
           "knowledge_base_store", "knowledge_base_stores",
           "local_client", "names", "new_vectorstore", "open_chunks", "open_connection", "open_local", "open_store", "reaches_server",
           "require_chunks", "scratch_store", "server_client", "serves", "store_name", "store_stamp"]


@dataclass(frozen=True)
class Backend:
    """One backend: its name (the YAML `kind:`, the manifest's store type), its module, the store classes it serves.

    Attributes:
        name: the backend's name.
        module: the `rag.stores` module exporting `STORE` and `open_store`.
        classes: (module prefix, class name) of the vector store classes it wraps (matched along the MRO).
        engines: the client packages whose exceptions are the engine's own (a full disk, a damaged file).
        capabilities: what the module has beyond `STORE`, `open_store` and `scratch_store`
            (`Capability.OWN_DIRECTORY`: the functions of `DirectoryBackend`).
    """

    name: str
    module: str
    classes: tuple[tuple[str, str], ...]
    engines: tuple[str, ...] = ()
    capabilities: frozenset[Capability] = frozenset()

    def load(self) -> ModuleType:
        """The backend's module (imported now)."""
        return importlib.import_module(self.module)


#: the backends, in the order docs and errors list them
_BACKENDS: tuple[Backend, ...] = (
    Backend("chroma", "rag.stores.chroma_chunks", (("langchain_chroma", "Chroma"),), ("chromadb",),
            frozenset({Capability.OWN_DIRECTORY})),
    Backend("pgvector", "rag.stores.pgvector", (("langchain_postgres", "PGVectorStore"),)),
    Backend("qdrant", "rag.stores.qdrant", (("langchain_qdrant", "QdrantVectorStore"),)),
    Backend("milvus", "rag.stores.milvus", (("langchain_milvus", "Milvus"),)),
    Backend("lancedb", "rag.stores.lancedb", (("rag.stores.lancedb", "LanceStore"),)),
    Backend("faiss", "rag.stores.faiss", (("rag.stores.faiss", "FaissStore"),)),
    Backend("inmemory", "rag.stores.inmemory", (("langchain_core.vectorstores", "InMemoryVectorStore"),)),
)
_BY_NAME = {b.name: b for b in _BACKENDS}
#: the backend of a new store made without naming one (`new_vectorstore`; a knowledge base's default): one
#: that declares `Capability.OWN_DIRECTORY`
DEFAULT = "chroma"


class DirectoryBackend(Protocol):
    """The functions of a backend module declaring `Capability.OWN_DIRECTORY`: a knowledge base keeps its chunks
    in its own directory (or on a server of the backend) without being given a store. The registry's functions
    of the same names call the default backend's."""

    new_vectorstore: Callable[..., Any]      # (name, embedding, *, persist_directory=None, client=None) -> VectorStore
    store_name: Callable[[str], str]         # a valid store name for a name (cleaned)
    knowledge_base_store: Callable[[str], str]   # a knowledge base's own store name (distinct names, distinct stores)
    open_local: Callable[..., Any]           # (directory, name, *, client=None, where, marker) -> ChunkStore
    local_client: Callable[..., Any]         # (path=None) -> a client on a directory (in memory when None)
    server_client: Callable[..., Any]        # (host, port, *, ssl=False, headers=None) -> a server's client
    reaches_server: Callable[[Any], bool]    # whether a client is a server's (not a directory's)
    collections: Callable[[Any], list[str]]  # the store names a client holds
    holds_store: Callable[[Any], bool]       # whether a directory holds a store of the backend
    store_stamp: Callable[[Any], str | None]   # the identity of a directory's store files (None: none there)


#: the functions `Capability.OWN_DIRECTORY` stands for (what `DirectoryBackend` lists)
DIRECTORY_FUNCTIONS = tuple(DirectoryBackend.__annotations__)
#: vector stores that carry their own chunk store (`.chunks`) or search natively without a backend of their own
_VIEWS = (("rag.stores.chunk_view", "ChunkStoreView"), ("rag.stores.memory", "ExactVectorStore"),
          ("rag.stores.partitioned", "PartitionedChroma"))
#: store layouts a knowledge base can keep its chunks in besides the backends, and the type its manifest records
_KB_LAYOUTS = {"chroma-partitioned": ("rag.stores.partitioned", "PartitionedChroma")}


def names() -> tuple[str, ...]:
    """The registered backends' names."""
    return tuple(_BY_NAME)


def knowledge_base_stores() -> tuple[str, ...]:
    """What a knowledge base's manifest may name as its store type: the backends, then the layouts
    (`PartitionedChroma`) a knowledge base writes as it writes a backend's store."""
    return (*_BY_NAME, *_KB_LAYOUTS)


def backend(name: str) -> Backend:
    """The backend called `name`.

    Raises:
        ConfigError: no such backend (the message lists the valid names).
    """
    found = _BY_NAME.get(name) if isinstance(name, str) else None
    if found is None:
        raise ConfigError(f"unknown store backend {name!r}; valid: {', '.join(_BY_NAME)}")
    return found


def _matches(store: Any, classes: tuple[tuple[str, str], ...]) -> bool:
    return any(cls.__name__ == name and cls.__module__.startswith(prefix)
               for cls in type(store).__mro__ for prefix, name in classes)


def serves(store: Any) -> Backend | None:
    """The backend that serves this vector store (None: none does)."""
    for entry in _BACKENDS:
        if _matches(store, entry.classes):
            return entry
    return None


def chunks_of(store: Any, **options: Any) -> ChunkStore | None:
    """`store` as a `ChunkStore`: a chunk store as is, a vector store through its backend's `STORE.of`.

    `options` go to the backend (`all_ids`, `dimension`, `hex_ids` of `VectorStoreChunks`). Stores
    that search natively without being a backend (`ExactVectorStore`, `PartitionedChroma`, a
    knowledge base's `ChunkStoreView`) give their own (`store.chunk_store()`). None: nothing here
    searches that store natively.
    """
    if _matches(store, _VIEWS):
        return store.chunk_store()
    entry = serves(store)
    if entry is None:
        return store if isinstance(store, ChunkStore) else None
    return entry.load().STORE.of(store, **options)


def open_store(name: str, *args: Any, **kwargs: Any) -> Any:
    """A vector store of backend `name`: its module's `open_store(*args, **kwargs)` (see each module)."""
    return backend(name).load().open_store(*args, **kwargs)


def open_chunks(name: str, *args: Any, **kwargs: Any) -> ChunkStore | None:
    """A `ChunkStore` of backend `name` over `open_store(name, *args, **kwargs)`."""
    return chunks_of(open_store(name, *args, **kwargs))


def open_connection(spec: dict[str, Any], embedding: Any) -> Any:
    """The store a `ChunkStore.connection_spec()` names, opened in this process (it must exist).

    Raises:
        ConfigError: the spec's backend has no worker connection.
    """
    entry = backend(spec.get("backend"))
    store = entry.load().STORE
    if Capability.WORKER_CONNECTION not in store.capabilities:
        valid = having(Capability.WORKER_CONNECTION)
        raise ConfigError(f"no worker connection for a store of backend {entry.name!r}; valid: {', '.join(valid)}")
    return store.from_connection(spec, embedding)


def having(capability: Capability) -> list[str]:
    """The backends declaring `capability`: a chunk store's (each backend's module is imported), or a module's
    (`OWN_DIRECTORY`, read from the registration)."""
    if capability not in OPTIONAL:
        return [b.name for b in _BACKENDS if capability in b.capabilities]
    return [b.name for b in _BACKENDS if capability in b.load().STORE.capabilities]


def new_vectorstore(name: str, embedding: Any, *, persist_directory: Any = None, client: Any = None) -> Any:
    """A vector store of the default backend named `name` (in `persist_directory`, on `client`, or in memory)."""
    return _default().new_vectorstore(name, embedding, persist_directory=persist_directory, client=client)


def store_name(name: str) -> str:
    """`name` cleaned into a valid name of the default backend (a collection, a knowledge base name); names
    that differ only by what cleaning changes get the same one: a knowledge base's own collection is
    `knowledge_base_store`."""
    return _default().store_name(name)


def knowledge_base_store(name: str) -> str:
    """The collection a knowledge base called `name` gets in the default backend (distinct names, distinct
    collections)."""
    return _default().knowledge_base_store(name)


def open_local(directory: Any, collection: str, *, client: Any = None, where: str, marker: Any) -> Any:
    """The `ChunkStore` a knowledge base keeps in its own `directory` (the default backend), or on `client`."""
    return _default().open_local(directory, collection, client=client, where=where, marker=marker)


def require_chunks(store: Any, **options: Any) -> ChunkStore | None:
    """`chunks_of(store, **options)`, or `ConfigError` naming the stores a knowledge base can keep its chunks in."""
    if serves(store) is None and not _matches(store, tuple(_KB_LAYOUTS.values())):
        raise ConfigError(f"a knowledge base cannot keep its chunks in a {type(store).__name__}: use the default "
                          f"store, a PartitionedChroma or one of the registered backends ({', '.join(_BY_NAME)}; "
                          "see docs/stores.md)")
    return chunks_of(store, **options)


def is_engine_error(exc: BaseException) -> bool:
    """Whether `exc` comes from a backend's client package (reported as a store write error)."""
    module = type(exc).__module__
    return any(module == engine or module.startswith(engine + ".") for b in _BACKENDS for engine in b.engines)


def scratch_store(name: str, embedding: Any, workdir: Any, label: str, *, url: str | None = None) -> Any:
    """A new, empty vector store of backend `name` called `label` (files under `workdir`; a server
    backend in the database at `url`), for tests and benchmarks."""
    return backend(name).load().scratch_store(embedding, workdir, label, url=url)


# ---------------------------------------------------------------- the default backend's stores in a directory or on a server
def directory_backend(name: str = DEFAULT) -> DirectoryBackend:
    """The module of backend `name` (the default one unless named), which keeps a knowledge base's chunks in its
    own directory.

    Raises:
        ConfigError: that backend does not declare `Capability.OWN_DIRECTORY` (the message lists those that do).
    """
    entry = backend(name)
    if Capability.OWN_DIRECTORY not in entry.capabilities:
        valid = [b.name for b in _BACKENDS if Capability.OWN_DIRECTORY in b.capabilities]
        raise ConfigError(f"the {name} backend keeps no store in a directory of its own; valid: {', '.join(valid)}")
    return cast(DirectoryBackend, entry.load())


def _default() -> DirectoryBackend:
    return directory_backend(DEFAULT)


def local_client(path: Any = None) -> Any:
    """A client of the default backend on the directory `path` (in memory when None)."""
    return _default().local_client(path)


def server_client(host: str, port: int, *, ssl: bool = False, headers: dict[str, str] | None = None) -> Any:
    """A client of a running server of the default backend (raises on connection errors)."""
    return _default().server_client(host, port, ssl=ssl, headers=headers)


def reaches_server(client: Any) -> bool:
    """Whether a client of the default backend is a server's, not a directory's."""
    return _default().reaches_server(client)


def collections(client: Any) -> list[str]:
    """The collections a client of the default backend holds."""
    return _default().collections(client)


def holds_store(directory: Any) -> bool:
    """Whether `directory` holds a store of the default backend."""
    return _default().holds_store(directory)


def store_stamp(directory: Any) -> str | None:
    """The identity of the default backend's store files in `directory` (None: no store there), which changes
    when the store is replaced (moved aside, restored from a copy) but not when it is written."""
    return _default().store_stamp(directory)
