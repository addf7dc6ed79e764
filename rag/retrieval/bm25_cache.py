"""A knowledge base's BM25 index, kept next to it so that asking does not rebuild it.

Hybrid and BM25 search need a BM25 index over every stored chunk. Building it means reading every
chunk from the vector store and tokenising it: seconds on a knowledge base of tens of thousands of
chunks, paid by every `rag ask`. `knowledge_base_bm25` builds it once per state of the knowledge
base and saves it (`BM25Index.save`: JSON and NumPy arrays, no pickle) under the knowledge base's
folder; the next search loads it.

The state is a fingerprint of the knowledge base's document records (source, content hash, chunk
ids) and of the BM25 settings: any indexing run that changes a chunk changes it, and the saved
index is then built again on first use. An index is saved only when the records did not change
while its chunks were read (a writer may run meanwhile), and a knowledge base that cannot be
written (a read-only copy) is searched with an index built in memory. A saved index that cannot
be read is built again, and so is one whose pointer names anything but a `bm25-*` folder of this
knowledge base (an absolute path, ``../``, a symlink): a store file never leads outside its store.

Example:
    >>> from langchain_core.documents import Document
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> import tempfile
    >>> from rag import KnowledgeBase
    >>> kb = KnowledgeBase("geo", tempfile.mkdtemp(), embedding=DeterministicFakeEmbedding(size=16))
    >>> _ = kb.add_documents([Document(page_content="Rome is in Italy.", metadata={"source": "it"})])
    >>> len(knowledge_base_bm25(kb, {"metadata_fields": ["title"]})), (kb.home / BM25_POINTER).exists()
    (1, True)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from typing import Any

from rag.base.errors import StoreError
from rag.indexing.kb_parts import KnowledgeBaseView
from rag.indexing.store_files import refuse_symlinks, store_child
from rag.retrieval.lexical import BM25Index

__all__ = ["BM25_POINTER", "knowledge_base_bm25", "records_fingerprint"]

logger = logging.getLogger(__name__)

#: the file under the knowledge base's folder naming the saved index and the state it was built from
BM25_POINTER = "bm25.json"
#: a pointer is a fingerprint and a folder name: anything larger is not one
MAX_POINTER_BYTES = 4096
_FOLDER = r"bm25-[A-Za-z0-9_]{1,64}"


def records_fingerprint(kb: KnowledgeBaseView, settings: Mapping[str, Any]) -> str:
    """A hash of the knowledge base's chunks (by its document records) and of the BM25 settings."""
    records = sorted((r.source, r.content_hash, list(r.chunk_ids)) for r in kb.list_documents())
    text = json.dumps([dict(sorted(settings.items())), records], default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def knowledge_base_bm25(kb: KnowledgeBaseView, settings: Mapping[str, Any]) -> BM25Index:
    """The BM25 index over `kb`'s stored chunks with `settings`: the saved one when it is current."""
    if not kb.exists:
        return BM25Index.from_documents(kb.get_documents(), **settings)
    before = records_fingerprint(kb, settings)
    saved = _load(kb, before)
    if saved is not None:
        return saved
    index = BM25Index.from_documents(kb.get_documents(), **settings)
    if records_fingerprint(kb, settings) == before:   # no writer changed the chunks while they were read
        _save(kb, index, before)
    return index


def _load(kb: KnowledgeBaseView, fingerprint: str) -> BM25Index | None:
    """The saved index when `bm25.json` is current and names a folder of this knowledge base; else None.

    `bm25.json` is data from the store: its `directory` must be one `bm25-*` name directly inside
    the knowledge base's folder, not a symlink (`store_child`); anything else, like a damaged or
    inconsistent index, is a cache miss and the index is built again (and saved over it).
    """
    pointer = kb.home / BM25_POINTER
    try:
        refuse_symlinks([pointer])
        with pointer.open("rb") as fh:
            raw = fh.read(MAX_POINTER_BYTES + 1)
        if len(raw) > MAX_POINTER_BYTES:
            raise StoreError(f"{pointer} is larger than {MAX_POINTER_BYTES:,} bytes")
        saved = json.loads(raw.decode("utf-8"))
        if not isinstance(saved, dict) or saved.get("fingerprint") != fingerprint:
            return None
        folder = store_child(kb.home, saved.get("directory"), pattern=_FOLDER, what="saved BM25 index folder")
        return BM25Index.load(folder)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError, StoreError) as exc:
        logger.warning("the saved BM25 index of %r cannot be read (%s): building it again", kb.name,
                       str(exc)[:300])
        return None


def _save(kb: KnowledgeBaseView, index: BM25Index, fingerprint: str) -> None:
    """Write the index into a new folder, then point to it (atomic rename); remove the folders it replaces."""
    folder = tmp = None
    try:
        folder = tempfile.mkdtemp(prefix="bm25-", dir=kb.home)
        index.save(folder)
        fd, tmp = tempfile.mkstemp(prefix=".bm25-", suffix=".json", dir=kb.home)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"fingerprint": fingerprint, "directory": os.path.basename(folder)}, out)
            out.flush()
            os.fsync(out.fileno())   # the pointer never names a folder whose files are not on disk yet
        os.replace(tmp, kb.home / BM25_POINTER)
    except (OSError, StoreError) as exc:   # a read-only knowledge base: search with the index built in memory
        logger.info("cannot save the BM25 index of %r (%s): it is rebuilt on each search", kb.name, exc)
        for leftover in (folder, tmp):
            if leftover and os.path.isdir(leftover):
                shutil.rmtree(leftover, ignore_errors=True)
            elif leftover:
                with contextlib.suppress(OSError):
                    os.unlink(leftover)
        return
    for old in kb.home.glob("bm25-*"):
        if old.is_dir() and old.name != os.path.basename(folder):
            with contextlib.suppress(OSError):
                shutil.rmtree(old)
