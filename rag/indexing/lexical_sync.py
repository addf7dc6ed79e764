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
from rag.stores.chunk_store import DamagedStoreError

__all__ = ["engine_lexical", "reconcile"]

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
    if held == chunks.count():
        return lexical
    try:
        with target.lock:
            reconcile(target.name, chunks.inner, lexical, home=target.home)
    except StoreError as busy:   # another process is writing
        if held == 0:
            logger.info("%s: searching %r with an in-process index this time", busy, target.name)
            return None
    return lexical


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
