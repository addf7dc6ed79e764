"""Chroma access: clients, collections and their names, the store's files; with `rag.stores.chroma_collection`,
the only modules that talk to `chromadb`.

The Chroma backend (`rag.stores.chroma_chunks`, its `ChunkStore`) and the partitioned layout
(`rag.stores.partitioned`) reach Chroma through this module: it opens clients (`open_client`,
`http_client`) and collections (`open_collection`, `new_chroma`, `collection_of`), names them
(`collection_name`, `knowledge_base_collection`), guards the store's files (`store_files`, a lock
waited for at most `LOCK_WAIT`) and turns Chroma's errors into ours (`readable`); it re-exports the
reads and writes on an open collection (`rag.stores.chroma_collection`: `query_collection`,
`get_documents`, `get_vectors`, ...). A Chroma upgrade touches these two modules only; nothing
outside `rag.stores` imports them (the registry does). Every collection is created in cosine space,
so relevance scores mean the same on every path, and with the HNSW settings of `NEW_COLLECTION` (a
collection that exists keeps the settings it was created with: nothing is rebuilt).

Example:
    >>> collection_name("my docs"), knowledge_base_collection("acme")
    ('my-docs', 'acme')
    >>> opened = open_collection(open_client(), "opened-doc")   # (in memory: no path)
    >>> opened.metadata == NEW_COLLECTION, open_collection(open_client(), "never-made", create=False)
    (True, None)
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from rag.stores.chroma_collection import (  # noqa: F401 (the reads and writes on a collection, importable here)
    GET_PAGE,
    add_chunks,
    count,
    delete_ids,
    documents_from_get,
    fetch_in_order,
    get_documents,
    get_ids,
    get_metadatas,
    get_vectors,
    query_collection,
    query_counted,
    stored_ids,
    update_metadatas,
)
from rag.stores.chunk_store import DAMAGED_MARKER, DamagedStoreError, content_id  # noqa: F401 (kept importable here)
from rag.stores.files import store_condition, store_write_error

__all__ = [
    "COSINE",
    "NEW_COLLECTION",
    "DAMAGED_MARKER",
    "DamagedStoreError",
    "check_collection",
    "readable",
    "collection_name",
    "knowledge_base_collection",
    "collection_of",
    "content_id",
    "documents_from_get",
    "fetch_in_order",
    "get_documents",
    "get_vectors",
    "http_client",
    "is_chroma",
    "new_chroma",
    "open_client",
    "open_collection",
    "query_collection",
]

#: Collection metadata for cosine space (Chroma's default is L2: scores would change meaning).
COSINE = {"hnsw:space": "cosine"}
#: The metadata a new collection is created with: cosine space, an HNSW graph built with 50 candidates
#: per insert (Chroma's default: 100) and searched with 400 (default: 100; a search uses at least its
#: `k`, and the default pipeline asks for 100). Against exact search, on 36,339 FinanceBench chunk
#: vectors and the 92 questions (means over nine builds): recall@100 0.98 instead of 0.93 and recall@10
#: 0.98 instead of 0.96, for two thirds of the graph's build CPU, about 1 ms more per query (5 ms more
#: filtered); see docs/stores.md, "Chroma's vector index". Chroma reads these only when it creates a
#: collection: an existing one keeps its own settings.
NEW_COLLECTION = {**COSINE, "hnsw:construction_ef": 50, "hnsw:search_ef": 400}


def collection_name(name: str) -> str:
    """A valid Chroma collection name for `name` (3-512 chars of [a-zA-Z0-9._-], alphanumeric ends).

    Example:
        >>> collection_name("my docs"), collection_name("x")
        ('my-docs', 'rag-x')
    """
    cleaned = "".join(c if c.isalnum() or c in "._-" else "-" for c in name).strip("._-")
    return (cleaned or "rag") if len(cleaned) >= 3 else f"rag-{cleaned}".strip("-")


#: the form of a derived name (`knowledge_base_collection`): a readable prefix, "--", 12 hex digits of a hash
_DERIVED = re.compile(r".*--[0-9a-f]{12}")


def knowledge_base_collection(name: str) -> str:
    """The Chroma collection of the knowledge base called `name`: distinct names never share one.

    A name Chroma accepts as it is, and which does not have the form of a derived name, is its own
    collection (as every such name always was); any other name gets its cleaned form (`collection_name`,
    cut to 48 characters) followed by ``--`` and 12 hex digits of the SHA-256 of the exact name. Names kept
    as they are never have that form, so two names share a collection only if their hashes' first 48
    bits are equal. A knowledge base created before this rule keeps the collection its manifest records
    (`rag.indexing.kb_collections`).

    Example:
        >>> knowledge_base_collection("acme"), knowledge_base_collection("acme_") != knowledge_base_collection("acme")
        ('acme', True)
        >>> knowledge_base_collection("x")
        'rag-x--2d711642b726'
    """
    cleaned = collection_name(name)
    if cleaned == name and ".." not in name and not _DERIVED.fullmatch(name):
        return name
    prefix = re.sub(r"\.{2,}", ".", cleaned)[:48].rstrip("._-") or "rag"
    return f"{prefix}--{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"


_SEGMENT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def store_files(directory: str | Path) -> list[Path]:
    """The paths Chroma reads in a persistent store directory: its database and every segment folder
    (named by a UUID) with the files in it, for `refuse_symlinks` before a client opens them."""
    root = Path(directory)
    paths = [root / f"chroma.sqlite3{end}" for end in ("", "-wal", "-shm", "-journal")]
    try:
        segments = [p for p in root.iterdir() if _SEGMENT.fullmatch(p.name)]
    except OSError:
        return paths
    for segment in segments:
        paths.append(segment)
        if segment.is_dir() and not segment.is_symlink():
            paths.extend(segment.iterdir())
    return paths



@contextmanager
def readable(collection: Any, where: str, marker: Path | None = None, directory: Path | None = None) -> Iterator[None]:
    """Turn a Chroma error on `collection` into a `DamagedStoreError` that says which store and what to do;
    create `marker` (never through a link) so that the next indexing run checks and repairs the store.

    A full disk, a locked database or a read-only store is not damage: it is the `StoreError` of
    `rag.stores.files.store_write_error` (the one line every door prints), and no marker is created."""
    try:
        yield
    except Exception as exc:
        from chromadb.errors import ChromaError

        if not isinstance(exc, ChromaError):
            raise
        if store_condition(exc) is not None:
            raise store_write_error(exc, directory or Path("."), f"{where}: cannot read the Chroma collection "
                                    f"{getattr(collection, 'name', '?')!r}") from None
        if marker is not None:
            with suppress(OSError):
                os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644))
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise DamagedStoreError(
            f"{where}: Chroma cannot use the collection {getattr(collection, 'name', '?')!r} "
            f"({type(exc).__name__}: {first}); it is damaged (an interrupted write?). Repair it by indexing "
            "the knowledge base's folders again (rag index PATH ... --store DIR --collection NAME): its chunks "
            "are rebuilt from the documents, the embedding cache keeps that cheap") from None


def check_collection(collection: Any, where: str) -> None:
    """Read `collection` as a search would (count, one chunk, one query); `DamagedStoreError` if it cannot."""
    with readable(collection, where):
        if collection.count():
            first = collection.get(limit=1, include=["embeddings"])
            vectors = first.get("embeddings")
            if vectors is not None and len(vectors):
                collection.query(query_embeddings=np.asarray(vectors[:1], dtype=np.float32), n_results=1)


#: seconds a client waits for a database another process holds locked, then says so (Chroma waits forever)
LOCK_WAIT = 10.0


def open_client(path: str | Path | None = None, *, where: str = "the Chroma store") -> Any:
    """A persistent chromadb client on `path`, or an in-process ephemeral one when `path` is None.

    Raises:
        StoreError: the store's disk is full, its database is locked by another process (after
            `LOCK_WAIT` seconds) or it is read-only: the one line of `rag.stores.files.store_write_error`.
    """
    import chromadb

    if path is None:
        return chromadb.EphemeralClient()
    # Chroma caches one client per path string: an absolute path keeps a relative one from reaching
    # another directory's store after a chdir
    path = Path(path).resolve()
    try:
        _wait_for_lock(path / "chroma.sqlite3")
        return chromadb.PersistentClient(path=str(path))
    except Exception as exc:
        if store_condition(exc) is None:
            raise
        raise store_write_error(exc, path, f"cannot open {where}") from None


def last_write(database: Path) -> int | None:
    """The sequence number of the last write Chroma logged in `database` (its `embeddings_queue`), read with
    SQLite in read-only mode, without opening Chroma (about a millisecond); None when it cannot be read.
    A copy restored from before later writes has a smaller one."""
    try:
        db = sqlite3.connect(f"{Path(database).resolve().as_uri()}?mode=ro", uri=True, timeout=1.0)
        try:
            row = db.execute("SELECT max(seq_id) FROM embeddings_queue").fetchone()
        finally:
            db.close()
    except (sqlite3.Error, OSError, ValueError):
        return None
    return row[0] if row and isinstance(row[0], int) else None


def _wait_for_lock(database: Path) -> None:
    """Take and release the database's write lock (what Chroma takes on open), waiting at most `LOCK_WAIT`
    seconds: a database another process holds locked is an error here, where Chroma's open would wait
    without end. Nothing is written."""
    if not database.is_file() or database.is_symlink():
        return
    db = sqlite3.connect(f"{database.as_uri()}?mode=rw", uri=True, timeout=LOCK_WAIT, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute("ROLLBACK")
    finally:
        db.close()


def http_client(host: str, port: int, *, ssl: bool = False, headers: dict[str, str] | None = None) -> Any:
    """A client of a running Chroma server, checked with a heartbeat (raises on connection errors)."""
    import chromadb

    client = chromadb.HttpClient(host=host, port=port, ssl=ssl, headers=headers or None)
    client.heartbeat()
    return client


def open_collection(client: Any, name: str, *, create: bool = True) -> Any:
    """The raw collection `name` of `client` (None if missing and not `create`); a new one gets `NEW_COLLECTION`."""
    if not create:
        names = {getattr(c, "name", c) for c in client.list_collections()}
        if name not in names:
            return None
    return client.get_or_create_collection(name, metadata=NEW_COLLECTION, embedding_function=None)


def new_chroma(name: str, embedding: Embeddings, *, persist_directory: str | Path | None = None,
               client: Any = None) -> VectorStore:
    """Open (or create) a `langchain_chroma.Chroma` store in cosine space (a new collection: `NEW_COLLECTION`).

    In-memory collections get a unique suffix: Chroma's in-process clients share one system,
    so two resources with the same name must not see each other's documents.
    """
    from langchain_chroma import Chroma

    if persist_directory is None and client is None:
        name = f"{name}-{uuid.uuid4().hex[:8]}"
    kwargs: dict[str, Any] = {"collection_name": collection_name(name), "embedding_function": embedding,
                              "collection_metadata": NEW_COLLECTION}
    if client is not None:
        kwargs["client"] = client
    elif persist_directory is not None:
        kwargs["persist_directory"] = str(Path(persist_directory).resolve())   # Chroma caches clients by this string
    return Chroma(**kwargs)


def is_chroma(store: Any) -> bool:
    """True for a `langchain_chroma.Chroma` vector store."""
    return type(store).__name__ == "Chroma" and hasattr(store, "_collection")


def collection_of(store: Any) -> Any:
    """The raw chromadb collection behind a `langchain_chroma.Chroma` store (or a raw collection)."""
    if is_chroma(store):
        return store._collection  # langchain_chroma exposes no public accessor
    if hasattr(store, "query") and hasattr(store, "get") and hasattr(store, "count"):
        return store
    raise TypeError(f"not a Chroma store or collection: {type(store).__name__}")
