"""`CachedEmbeddings`: an on-disk embedding cache so no text is embedded twice.

Wraps any LangChain `Embeddings`. Vectors are stored as float32 blobs in one SQLite file
(no pickle), keyed by `sha256(model id + text)`, so two models never share entries and a
re-index or a benchmark re-run only embeds texts it has not seen. Only the misses of a
batch reach the wrapped model, in one call. Queries are cached in their own namespace
because some models embed queries and documents differently.

The cache is safe to share between threads (one connection behind a lock) and between
processes (SQLite WAL mode with a busy timeout).

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> emb = CachedEmbeddings(DeterministicFakeEmbedding(size=4))      # in memory
    >>> first = emb.embed_documents(["a", "b", "a"])
    >>> emb.stats["misses"], emb.stats["hits"]
    (2, 1)
    >>> emb.embed_documents(["b"]) == [first[1]]
    True
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from rag.base.errors import ConfigError, StoreError
from rag.indexing.store_files import refuse_symlinks, store_condition, store_write_error
from rag.models.embeddings import embedding_id

__all__ = ["CachedEmbeddings"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    key BLOB PRIMARY KEY,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL
) WITHOUT ROWID
"""
_SELECT_CHUNK = 500  # keys per SELECT ... IN (...), well under SQLite's variable limit
_DOC_NS = b"doc\x00"
_QUERY_NS = b"query\x00"


class CachedEmbeddings(Embeddings):
    """Cache the vectors of any `Embeddings` on disk, keyed by model id and text.

    Args:
        embeddings: the model that computes vectors for texts not in the cache.
        path: the SQLite file (created with its parent folders); None keeps the cache in memory.
        model_id: the key namespace; defaults to `rag.models.embeddings.embedding_id(embeddings)`.
            Two models with the same id must produce the same vectors.
        batch_size: how many missed texts are sent to the wrapped model per call.

    Attributes:
        stats: counters `hits`, `misses` (texts embedded by the wrapped model), `query_hits`,
            `query_misses`.

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> emb = CachedEmbeddings(DeterministicFakeEmbedding(size=4), path=None)
        >>> emb.model_name
        'DeterministicFakeEmbedding(size=4)'
    """

    def __init__(self, embeddings: Embeddings, *, path: str | Path | None = None,
                 model_id: str | None = None, batch_size: int = 256) -> None:
        if not isinstance(embeddings, Embeddings):
            raise ConfigError(f"CachedEmbeddings wraps an Embeddings instance, got {type(embeddings).__name__}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        if model_id is None:

            model_id = embedding_id(embeddings)
        if not model_id:
            raise ConfigError("model_id must be a non-empty string")
        self.embeddings = embeddings
        self.model_id = model_id
        self.path = Path(path) if path is not None else None
        self.batch_size = batch_size
        self.stats = {"hits": 0, "misses": 0, "query_hits": 0, "query_misses": 0}
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._prefix = hashlib.sha256(model_id.encode("utf-8", "surrogatepass")).digest()

    # ------------------------------------------------------------------ identity
    @property
    def model_name(self) -> str:
        """The wrapped model's id, so `embedding_id(cached)` equals `embedding_id(model)`."""
        return self.model_id

    def __repr__(self) -> str:
        return f"CachedEmbeddings({self.model_id!r}, path={str(self.path) if self.path else None!r})"

    # ------------------------------------------------------------------ storage
    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            target = ":memory:"
            if self.path is not None:
                refuse_symlinks([self.path, *(f"{self.path}{suffix}" for suffix in ("-wal", "-shm", "-journal"))])
                self.path.parent.mkdir(parents=True, exist_ok=True)
                target = str(self.path)
            try:
                conn = sqlite3.connect(target, timeout=30.0, check_same_thread=False, isolation_level=None)
                if self.path is not None:
                    conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(_SCHEMA)
            except sqlite3.DatabaseError as exc:
                if store_condition(exc):   # a full disk, a lock, a read-only store: not a damaged file
                    raise store_write_error(exc, self.path or target, "cannot open the embedding cache") from exc
                raise StoreError(f"cannot open the embedding cache {target}: {exc}; delete the file to rebuild it") from exc
            self._conn = conn
        return self._conn

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._connect()

    def close(self) -> None:
        """Close the SQLite connection (it reopens on next use)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __len__(self) -> int:
        with self._db() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])

    def _key(self, namespace: bytes, text: str) -> bytes:
        return hashlib.sha256(self._prefix + namespace + text.encode("utf-8", "surrogatepass")).digest()

    def _lookup(self, keys: Sequence[bytes]) -> dict[bytes, list[float]]:
        found: dict[bytes, list[float]] = {}
        with self._db() as conn:
            for start in range(0, len(keys), _SELECT_CHUNK):
                part = keys[start:start + _SELECT_CHUNK]
                marks = ",".join("?" * len(part))
                for key, dim, blob in conn.execute(
                        f"SELECT key, dim, vector FROM embeddings WHERE key IN ({marks})", part):
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape[0] == dim:  # a torn row is treated as a miss
                        found[bytes(key)] = vector.tolist()
        return found

    def _store(self, rows: Sequence[tuple[bytes, list[float]]]) -> None:
        payload = [(key, len(vec), np.asarray(vec, dtype=np.float32).tobytes()) for key, vec in rows]
        with self._db() as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("INSERT OR REPLACE INTO embeddings (key, dim, vector) VALUES (?, ?, ?)", payload)
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:  # SQLite rolls back by itself on a full disk: a second ROLLBACK hides why
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise store_write_error(exc, self.path or ":memory:", "cannot write the embedding cache") from exc
                raise

    # ------------------------------------------------------------------ Embeddings API
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Vectors for `texts`, computing only those not cached (each distinct text once).

        Returned vectors are float32-rounded, whether they came from the cache or the model,
        so a hit and a miss give identical values.
        """
        texts = list(texts)
        keys = [self._key(_DOC_NS, t) for t in texts]
        unique = list(dict.fromkeys(keys))
        vectors = self._lookup(unique)
        missing = [k for k in unique if k not in vectors]
        with self._lock:
            self.stats["hits"] += len(texts) - len(missing)
            self.stats["misses"] += len(missing)
        if missing:
            text_of = dict(zip(keys, texts, strict=True))
            for start in range(0, len(missing), self.batch_size):
                part = missing[start:start + self.batch_size]
                computed = self.embeddings.embed_documents([text_of[k] for k in part])
                if len(computed) != len(part):
                    raise StoreError(f"{self.model_id} returned {len(computed)} vectors for {len(part)} texts")
                rounded = [np.asarray(v, dtype=np.float32).tolist() for v in computed]
                self._store(list(zip(part, rounded, strict=True)))
                vectors.update(zip(part, rounded, strict=True))
        return [vectors[k] for k in keys]

    def embed_query(self, text: str) -> list[float]:
        """The query vector of `text`, from the cache when seen before."""
        key = self._key(_QUERY_NS, text)
        hit = self._lookup([key]).get(key)
        if hit is not None:
            with self._lock:
                self.stats["query_hits"] += 1
            return hit
        vector = np.asarray(self.embeddings.embed_query(text), dtype=np.float32).tolist()
        self._store([(key, vector)])
        with self._lock:
            self.stats["query_misses"] += 1
        return vector

    def __getstate__(self) -> dict[str, Any]:
        # Copies (copy.copy, pydantic model_copy) get their own connection and lock.
        state = dict(self.__dict__)
        state["_conn"] = None
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()
