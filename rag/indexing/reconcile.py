"""Records reconciled against the store: documents whose chunks the store lacks are indexed again.

A knowledge base's records (`rag.indexing.records`) say which chunks each document has in the
store. The store can lose them behind the records' back: its files moved aside (what the error
for a damaged Chroma store advises), an old backup restored, a server's collection emptied. A
sync then must not trust the records: `lacking` finds the documents whose chunk ids the store no
longer holds all of, and `Syncer.recover` marks them `updating`, so the run reads them again as
updated (present chunks are kept, the embedding cache makes the rest cheap) and notes each one.

The check is cheap and bounded: it reads chunk ids only (no texts, no vectors), for a batch of
`BATCH` documents at a time, and it runs only when the store may have changed under the records:

- an embedded store (Chroma's files in the knowledge base's directory): when its database file is
  not the one this knowledge base last wrote (`rag.stores.registry.store_stamp`: the file's device
  and inode and the sequence number of the last write logged in it, saved in `STAMP_FILE` after every
  sync), or the stamp was never saved (a knowledge base written before this check) -- a no-op run
  reads one number with SQLite and never opens Chroma. Another knowledge base writing into the same
  directory changes the number too: its next write then checks its ids once;
- a store apart from the records (a Chroma server, another backend): when it holds fewer chunks than
  the records list (one count per run, as before).

A copy restored in place (same inode) is noticed by its older write sequence number; one whose number
happens to equal the last one written is not: delete the knowledge base's `STAMP_FILE` and the next
sync checks every document's chunks (docs/security.md).

Example:
    >>> from rag.indexing.records import DocumentRecord
    >>> class Store:
    ...     def get_ids(self, flt): return ["a1", "a2", "b1"]
    >>> recs = [DocumentRecord(source="a", doc_id="a", content_hash="h", chunk_ids=["a1", "a2"]),
    ...         DocumentRecord(source="b", doc_id="b", content_hash="h", chunk_ids=["b1", "b2"])]
    >>> [r.source for r in lacking(Store(), recs)]
    ['b']
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag.base.errors import LoaderError
from rag.indexing.file_read import read_file
from rag.indexing.records import DocumentRecord
from rag.stores.files import write_atomic

__all__ = ["BATCH", "MAX_STAMP_BYTES", "STAMP_FILE", "lacking", "read_stamp", "save_stamp"]

#: documents whose chunk ids are read in one query
BATCH = 500
#: where a knowledge base keeps the identity of the store file it last wrote (in its own folder)
STAMP_FILE = "store-stamp.json"
#: the stamp is one short string in JSON
MAX_STAMP_BYTES = 4096


def lacking(chunks: Any, records: Sequence[DocumentRecord], *, batch: int = BATCH) -> list[DocumentRecord]:
    """The records (of `records`) whose chunk ids are not all in `chunks` (a `ChunkStore`), read in batches."""
    out: list[DocumentRecord] = []
    for start in range(0, len(records), batch):
        part = [r for r in records[start:start + batch] if r.chunk_ids]
        if not part:
            continue
        present = set(chunks.get_ids({"doc_id": {"$in": sorted({r.doc_id for r in part})}}))
        out += [r for r in part if not present.issuperset(r.chunk_ids)]
    return out


def read_stamp(home: Path) -> str | None:
    """The store stamp saved in `home` (None: none saved, or unreadable: then the store is checked in full).

    Read as every file a store writes is read back: one descriptor, no link followed, a regular file of
    at most `MAX_STAMP_BYTES` (a link to /dev/zero or a FIFO put in its place cannot stall the run)."""
    try:
        data = read_file(home / STAMP_FILE, max_bytes=MAX_STAMP_BYTES).data
        value = json.loads(data.decode("utf-8")).get("store")
    except (LoaderError, ValueError, AttributeError, RecursionError):
        return None
    return value if isinstance(value, str) else None


def save_stamp(home: Path, stamp: str | None) -> None:
    """Save `stamp` in `home` when it differs from the saved one (nothing written on a no-op)."""
    if stamp is not None and stamp != read_stamp(home):
        write_atomic(home / STAMP_FILE, json.dumps({"store": stamp}).encode())
