"""A knowledge base's engine lexical index, opened for search: brought in line with its chunks once when needed.

The lexical index of the embedded default (`rag.stores.fts_index.FTSIndex`, ``lexical.sqlite`` in
the knowledge base's folder) is written with the chunks (`rag.stores.lexical_chunks`). Opening it
for search compares two counts (the index's rows, the store's chunks: two cheap SQL counts); when
they agree it is used as it is. They differ in two cases, both repaired here, once, under the
writer lock:

- **a knowledge base built before this index existed** (a folder with ``bm25-*`` and
  ``records.sqlite``): its chunks are indexed once (read from the store by id, in batches), a
  message says so, and the old in-process BM25 files (``bm25.json``, ``bm25-*``: a cache derived
  from the chunks, nothing else) are removed. Records, manifest and chunks are untouched;
- **a write cut short** between the vectors and the lexical rows: the ids the store holds and the
  index lacks are indexed, the ids it holds that the store does not are deleted.

When another process holds the writer lock (it is writing), an index that holds chunks is used as
it is (a write in flight shows at the next search) and an empty one is not used: the caller
searches with the in-process index (`rag.retrieval.bm25_cache`) this time.

A knowledge base whose chunks are in a server engine but whose lexical index is a file of the folder
(a Qdrant or Milvus collection made elsewhere, without rag's sparse vector or BM25 function) is
opened by processes in other folders too, each with its own copy of the index. Its copy is a
`FollowingLexical`: before each search it reads the knowledge base's change stamp
(`rag.stores.kb_side.SideTables.stamp`, one read of the engine) and, when another process changed
the records since, brings the copy in line (`reconcile`, under this folder's lock only), so a
document indexed through another process is searched at the next query, without a restart.

Example:
    >>> import tempfile
    >>> from langchain_core.documents import Document
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from rag.indexing.kb_parts import IndexTarget
    >>> from rag.indexing.write_path import index_sources
    >>> target = IndexTarget("notes", tempfile.mkdtemp(), embedding=DeterministicFakeEmbedding(size=8))
    >>> _ = index_sources(target, [Document(page_content="Paris is in France.", metadata={"source": "geo"})])
    >>> [d.page_content for d, _ in engine_lexical(target).search("paris")]
    ['Paris is in France.']
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from typing import Any

from rag.base.errors import StoreError
from rag.indexing.locking import WriterLock
from rag.stores.chunk_store import DamagedStoreError
from rag.stores.fts_index import FTSIndex
from rag.stores.kb_side import SideTables

__all__ = ["FollowingLexical", "engine_lexical", "reconcile"]

logger = logging.getLogger(__name__)
_BATCH = 1000


def engine_lexical(target: Any) -> Any:
    """`target`'s engine lexical index, in line with its chunks; None when it has none (or cannot use it now).

    Raises:
        StoreError: the store cannot be read.
    """
    chunks = target.chunks
    lexical = getattr(chunks, "lexical", None)
    if lexical is None:
        return None
    try:
        held = _count(lexical)
    except StoreError as exc:   # cannot be opened here (a read-only copy): the in-process index
        logger.info("%s: searching %r with an in-process index", exc, target.name)
        return None
    # a folder's copy of the index of a knowledge base whose records live in an engine's side collection, which
    # keeps the change stamp other processes' writes move
    follows = isinstance(lexical, FTSIndex) and isinstance(target.tables, SideTables)
    seen = target.tables.stamp() if follows else None   # (read first: a change after it is caught up on)
    if held != chunks.count():
        try:
            with target.lock:
                reconcile(target.name, chunks.inner, lexical, home=target.home)
        except StoreError as busy:   # another process is writing
            if held == 0:
                logger.info("%s: searching %r with an in-process index this time", busy, target.name)
                return None
    return FollowingLexical(target, lexical, seen) if follows else lexical


class FollowingLexical:
    """A folder's copy of the lexical index of a knowledge base other processes write (see the module docstring):
    `lexical` caught up with its chunks before a search when the change stamp differs from `seen`."""

    def __init__(self, target: Any, lexical: Any, seen: str | None) -> None:
        self.target, self.lexical, self._seen = target, lexical, seen

    def __getattr__(self, name: str) -> Any:
        if name in ("target", "lexical", "_seen"):
            raise AttributeError(name)
        return getattr(self.lexical, name)

    def follow(self) -> None:
        """Catch up with the writes of other processes, if there were any since the last search."""
        stamp = self.target.tables.stamp()
        if stamp == self._seen:
            return
        try:   # (this folder's lock: the copy is this folder's; its own writer updates it as it writes)
            with WriterLock(self.target.directory):
                reconcile(self.target.name, self.target.chunks.inner, self.lexical)
        except StoreError:   # this folder's writer is writing: the next search catches up
            return
        self._seen = stamp

    def search(self, *args: Any, **kwargs: Any) -> Any:
        self.follow()
        return self.lexical.search(*args, **kwargs)

    def search_documents(self, *args: Any, **kwargs: Any) -> Any:
        self.follow()
        return self.lexical.search_documents(*args, **kwargs)

    def mentions(self, word: str) -> Any:
        self.follow()
        return self.lexical.mentions(word)

    def get_documents(self, *args: Any, **kwargs: Any) -> Any:
        self.follow()
        return self.lexical.get_documents(*args, **kwargs)

    def __len__(self) -> int:
        self.follow()
        return len(self.lexical)


def _count(lexical: Any) -> int:
    """How many chunks `lexical` holds; a file that is not an index of ours is removed and built again."""
    try:
        return lexical.count()
    except DamagedStoreError as exc:
        logger.warning("%s: building it again", exc)
        lexical.close()
        for suffix in ("", "-wal", "-shm"):
            lexical.path.with_name(lexical.path.name + suffix).unlink(missing_ok=True)
        return lexical.count()


def reconcile(name: str, store: Any, lexical: Any, *, home: Any = None) -> int:
    """Make `lexical` hold exactly `store`'s chunks (the writer lock held); returns how many rows it changed.

    A first fill (an index that held nothing while the store held chunks) is reported with a message,
    and the old in-process BM25 files under `home` are removed.
    """
    indexed = set(lexical.ids())
    stored = set(store.get_ids({}))
    missing, extra = sorted(stored - indexed), sorted(indexed - stored)
    for start in range(0, len(missing), _BATCH):
        docs = store.get_by_ids(missing[start:start + _BATCH])
        lexical.add([d.id for d in docs], [d.page_content for d in docs], [d.metadata for d in docs])
    lexical.delete(extra)   # rows of chunks the store no longer holds
    if missing and not indexed:
        removed = _remove_old_files(home)
        logger.warning("knowledge base %r: its lexical search moved into %s: %s chunk(s) indexed once%s",
                       name, lexical.where, f"{len(missing):,}",
                       "; the in-process BM25 cache (bm25.json, bm25-*) it replaces is removed" if removed else "")
    return len(missing) + len(extra)


def _remove_old_files(home: Any) -> bool:
    """Remove the in-process BM25 cache of an older version (`rag.retrieval.bm25_cache`); whether there was one."""
    if home is None:
        return False
    found = [p for p in home.glob("bm25-*") if p.is_dir() and not p.is_symlink()]
    pointer = home / "bm25.json"
    for folder in found:
        shutil.rmtree(folder, ignore_errors=True)
    with contextlib.suppress(OSError):
        if pointer.is_file() and not pointer.is_symlink():
            pointer.unlink()
            return True
    return bool(found)
