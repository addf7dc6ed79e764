"""Moved documents: a new file whose bytes match an indexed file that no longer exists.

Moving or renaming a folder and indexing it again would otherwise add every document a second
time and leave the old copies (the incremental cleanup only looks under the paths given). A
file that is not in the records but whose content hash is that of a record whose source file is
gone has moved: its chunks are re-pointed (their `source` metadata, and a `title` that was the
old file name) and its record is renamed, without embedding or writing any chunk.

The chunks keep their ids and vectors. The two steps are each atomic and the pair is idempotent:
after a crash between them the old record still names a missing file, so the next run finds the
move again.

Example:
    >>> candidates = moved_candidates({})
    >>> candidates
    {}
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from rag.indexing.records import DocumentRecord, RecordStore

__all__ = ["move_document", "moved_candidates"]


def moved_candidates(records: dict[str, DocumentRecord]) -> dict[str, DocumentRecord]:
    """Records of indexed files that no longer exist, by content hash (the files a new file may have been)."""
    found: dict[str, DocumentRecord] = {}
    for source, rec in records.items():
        if rec.state == "ok" and rec.size >= 0 and os.path.isabs(source) and not _exists(source):
            found.setdefault(rec.content_hash, rec)
    return found


def _exists(source: str) -> bool:
    """Whether the file of a record key exists (keys write undecodable name bytes as `\\xNN`)."""
    if os.path.lexists(source):
        return True
    if "\\x" not in source:
        return False
    raw = re.sub(rb"\\x([0-9a-f]{2})", lambda m: bytes([int(m.group(1), 16)]), source.encode("utf-8"))
    return os.path.lexists(raw)


def move_document(chunks: Any, records: RecordStore, old: DocumentRecord, new_key: str, display: str, *, size: int,
                  mtime_ns: int) -> DocumentRecord:
    """Re-point the chunks and the record of `old` to the file `new_key` (shown as `display`).

    Args:
        chunks: the knowledge base's chunk store, one that can update metadata in place (`Capability.UPDATE_METADATA`).
        records: its document records (the caller holds the knowledge base's writer lock).
        old: the record of the file that is gone.
        new_key: the new record key (the resolved path text).
        display: the path as given, stored in the chunks' `source` metadata.
        size, mtime_ns: the new file's size and modification time.

    Returns:
        The new record.
    """
    ids, metas = chunks.get_metadatas({"doc_id": old.doc_id})
    new_stem = Path(display).stem
    updated = []
    for meta in metas:
        meta = dict(meta or {})
        old_source = str(meta.get("source", ""))
        if old_source and meta.get("title") == Path(old_source).stem:
            meta["title"] = new_stem  # the title was the file name: follow the rename
        meta["source"] = display
        updated.append(meta)
    chunks.update_metadatas(ids, updated)
    title = old.title
    if updated and old.title == Path(str(metas[0].get("source", ""))).stem:
        title = new_stem
    record = replace(old, source=new_key, size=size, mtime_ns=mtime_ns, title=title, state="ok")
    records.rename(old.source, record)
    return record
