"""`Plan`: what a sync must index, decided one file at a time on the driver (hash, compare, move).

`rag.indexing.sync.Syncer` collects the files and Documents given and makes a `Plan`; an executor
(`rag.indexing.executors`) iterates its items and loads, chunks, embeds and writes those that changed.
A file whose size and modification time are unchanged needs nothing; otherwise its content hash
decides; a new file with the content of an indexed file that is gone has moved
(`rag.indexing.moves`): its chunks are re-pointed, nothing is embedded.

Example:
    >>> from langchain_core.documents import Document

from rag.base.errors import LoaderError
    >>> doc = Document(page_content="Paris.", metadata={"source": "geo"})
    >>> plan = Plan(None, [], {"geo": [doc]}, {}, False, IndexReport())
    >>> [(item.key, item.status) for item in plan.items(quiesce=lambda: None)]
    [('geo', 'added')]
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from langchain_core.documents import Document

from rag.base.errors import LoaderError
from rag.indexing.chunking import document_id
from rag.indexing.file_read import read_changed
from rag.indexing.ingest import Item, docs_hash
from rag.indexing.kb_parts import IndexTarget
from rag.indexing.loaders import Note, Skipped, clean_text, path_text, reader_tag
from rag.indexing.moves import move_document
from rag.indexing.records import WRITING, DocumentRecord
from rag.indexing.report import IndexReport
from rag.stores.chunk_store import Capability

__all__ = ["Plan"]


@dataclass
class Plan:
    """What a sync must index, decided one file at a time on the driver (hash, compare, move).

    An executor iterates `items()`: None for a file that needs nothing (unchanged, moved, unreadable:
    recorded in `report`), else an `Item` to load (files) or prepare (Documents). `quiesce` waits for
    the executor's store write in flight, so a move or a deletion never runs beside one.
    """

    target: IndexTarget
    files: list[Path]
    grouped: dict[str, list[Document]]
    records: dict[str, DocumentRecord]
    force: bool
    report: IndexReport
    seen: set[str] = field(default_factory=set)
    touched: list[DocumentRecord] = field(default_factory=list)
    moves: dict[str, DocumentRecord] = field(default_factory=dict)

    def items(self, quiesce: Callable[[], None]) -> Iterator[Item | None]:
        """The work of this sync, in file order (then the Documents given, by source)."""
        report = self.report
        for file in self.files:
            key = path_text(file.resolve())
            if key in self.seen:  # a symlink to a file indexed under its own name
                continue
            self.seen.add(key)
            moved = len(report.moved)
            item = _file_item(self, file, key, quiesce)
            if len(report.moved) > moved:  # its old record now has this key: not stale
                self.seen.add(report.moved[-1][0])
            yield item
        for key, docs in self.grouped.items():
            self.seen.add(key)
            yield _document_item(key, docs, self.records.get(key), self.force, report)

    def noted(self, item: Item) -> None:
        """Report what loading the item's file read more cheaply or left out (its notes: cost limits, OCR)."""
        self.report.notes += [Note(item.display, clean_text(note)) for note in item.notes]

    def failed(self, item: Item, reason: str, quiesce: Callable[[], None]) -> None:
        """A file that could not be loaded: skipped with the reason; a half-written earlier attempt is removed."""
        self.refused(self.records.get(item.key), reason, item.display, quiesce)

    def refused(self, rec: DocumentRecord | None, reason: str, display: str, quiesce: Callable[[], None]) -> None:
        """A file that cannot be read (`failed`), given by its record (if any) and the name shown."""
        self.report.skipped.append(Skipped(display, reason))
        if rec is not None and rec.state in WRITING:
            quiesce()  # one store writer at a time
            self.report.chunks_deleted += self.target.delete_records([rec])



def _document_item(key: str, docs: list[Document], rec: DocumentRecord | None, force: bool,
                   report: IndexReport) -> Item | None:
    """The work item for Documents added under one source, or None when they are unchanged."""
    content_hash = docs_hash(docs)
    if not force and rec and rec.state == "ok" and rec.content_hash == content_hash:
        report.unchanged.append(key)
        return None
    doc_id = rec.doc_id if rec else clean_text(str(docs[0].metadata.get("doc_id") or document_id(key)))
    status = "updated" if rec and rec.state in ("ok", "updating") else "added"
    return Item(key, key, doc_id, content_hash, -1, -1, list(docs), status, known=rec is not None)


def _file_item(plan: Plan, file: Path, key: str, quiesce: Callable[[], None]) -> Item | None:
    """The work item for a file (not loaded yet), or None when it is unchanged, moved or unreadable."""
    rec, report, force = plan.records.get(key), plan.report, plan.force
    ok = rec is not None and rec.state == "ok" and not force
    display = path_text(file)
    # what the run's load limits change in what this file gives (tables, OCR), and the version of the reader of
    # its kind: read with other limits or by a newer reader, it is read again
    reading = plan.target.components.limits.reading(file.suffix) + reader_tag(file.suffix)
    try:   # one open without following a link or blocking: an unchanged size and time need no read
        known = (rec.size, rec.mtime_ns) if ok and rec.content_hash[64:] == reading else None
        got = read_changed(file, max_bytes=plan.target.components.limits.max_bytes, known=known)
        if got is None:
            report.unchanged.append(display)
            return None
        content_hash = hashlib.sha256(got.data).hexdigest() + reading
    except LoaderError as exc:
        plan.refused(rec, clean_text(str(exc)), display, quiesce)
        return None
    if ok and rec.content_hash == content_hash:  # touched, not changed
        rec.size, rec.mtime_ns = got.size, got.mtime_ns
        plan.touched.append(rec)
        report.unchanged.append(display)
        return None
    # a store that cannot update metadata in place (no `update_metadata` capability) indexes a moved file anew
    if (rec is None and plan.moves.get(content_hash) is not None
            and Capability.UPDATE_METADATA in plan.target.chunks.capabilities):
        old = plan.moves.pop(content_hash)
        quiesce()  # one store writer at a time
        move_document(plan.target.chunks, plan.target.records, old, key, display, size=got.size,
                      mtime_ns=got.mtime_ns)
        report.moved.append((old.source, display))
        return None
    doc_id = rec.doc_id if rec else document_id(key)
    return Item(key, display, doc_id, content_hash, got.size, got.mtime_ns, None,
                "updated" if rec is not None and rec.state in ("ok", "updating") else "added", known=rec is not None,
                path=file, data=got.data)
