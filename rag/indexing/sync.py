"""Incremental indexing for `KnowledgeBase`: hash, compare, chunk, embed the misses, write.

For each file: an unchanged size and modification time means unchanged; otherwise the
content hash decides. New and changed documents are processed in groups:

1. they are chunked, tagged, given AutoContext; each chunk's id is a hash of its document,
   position, embedded text and metadata;
2. their records are marked `pending` (a crash from here on makes the next run redo them);
3. only ids the store does not have are embedded (through the embedding cache) and added;
   ids of the document that are no longer produced are deleted;
4. their records are marked `ok` with the new hash and chunk ids.

The decisions (hash, compare, move: `Plan`) are made here, on the caller's side; loading, chunking,
AutoContext and embedding run in an executor (`rag.indexing.executors`) with the stages of
`rag.indexing.ingest`. The local executor (the default) runs steps 2-4 of a group in one writer
thread while the caller loads and chunks the next group (at most one group in flight), so groups
still reach the store one at a time and in order. pdfium, the Rust tokenizer and torch release the
GIL, so loading and chunking overlap with embedding; chromadb 1.5's add/upsert holds the GIL
(measured), so they do not overlap with the store write. The Ray executor runs the same stages on a
cluster and commits each document once the store has all of its chunks (docs/scale.md). `sync`
returns only after every write has finished, i.e. while the caller still holds the writer lock.

Every step is idempotent, so re-running after a crash converges to exactly the right chunks; a
document whose update was interrupted is marked `updating` (not `pending`), so the re-run reports
it as updated. A new file whose content hash is that of an indexed file that no longer exists has
moved (`rag.indexing.moves`): its chunks are re-pointed, nothing is embedded or written.

One bad file never stops a run: a file that fails to load is skipped with the reason, and text
and metadata are cleaned (`clean_text`) before chunking, so a name or heading with bytes that are
not UTF-8 is stored as `\\xNN` / U+FFFD instead of failing the record write or the tokenizer.

Example:
    >>> report = sync(kb, ["docs/"], cleanup="incremental")      # doctest: +SKIP
    >>> print(report.summary())                                 # doctest: +SKIP
    added 3, updated 0, unchanged 12, moved 0, deleted 0, skipped 1 (...)
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from langchain_core.documents import Document

from rag.indexing.chunking import document_id
from rag.indexing.executors import LocalExecutor
from rag.indexing.ingest import Item, chunk_id, docs_hash, file_hash, scalar_metadata
from rag.indexing.loaders import Note, Skipped, clean_text, iter_files, path_text
from rag.indexing.moves import move_document, moved_candidates
from rag.indexing.records import WRITING, DocumentRecord
from rag.indexing.report import IndexReport
from rag.stores.chunk_store import DAMAGED_MARKER, DamagedStoreError

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from rag.indexing.knowledge_base import KnowledgeStore

__all__ = ["CLEANUP_MODES", "IndexReport", "Plan", "Source", "chunk_id", "scalar_metadata", "sync"]

Source = Union[str, Path, Document]  # noqa: UP007 - a runtime alias
CLEANUP_MODES = (None, "incremental", "full")


@dataclass
class Plan:
    """What a sync must index, decided one file at a time on the driver (hash, compare, move).

    An executor iterates `items()`: None for a file that needs nothing (unchanged, moved, unreadable:
    recorded in `report`), else an `Item` to load (files) or prepare (Documents). `quiesce` waits for
    the executor's store write in flight, so a move or a deletion never runs beside one.
    """

    kb: KnowledgeStore
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
        self.report.skipped.append(Skipped(item.display, reason))
        rec = self.records.get(item.key)
        if rec is not None and rec.state in WRITING:
            quiesce()  # one store writer at a time
            self.report.chunks_deleted += self.kb.delete_records([rec])


def sync(kb: KnowledgeStore, sources: Source | Sequence[Source], *, include: str | Sequence[str] = "**/*",
         exclude: str | Sequence[str] = (), cleanup: str | None = None,
         progress: Callable[[str, int], None] | None = None, force: bool = False,
         follow_symlinks: bool = False, executor: Any = None) -> IndexReport:
    """Bring the knowledge base in line with `sources` (the caller holds the writer lock).

    `executor`: where loading, chunking, AutoContext and embedding run (`rag.indexing.executors`;
    None: this process).
    """
    start = time.perf_counter()
    emit = progress or (lambda event, amount: None)
    report = IndexReport()
    _recover(kb)
    records = kb.records.all()
    files, roots, grouped = _collect(sources, include=include, exclude=exclude, follow_symlinks=follow_symlinks,
                                     report=report)
    emit("files_total", len(files) + len(grouped))
    plan = Plan(kb, files, grouped, records, force, report, moves=moved_candidates(records))
    (executor or LocalExecutor()).run(kb, plan, report, emit)
    kb.records.put_many(plan.touched)
    if stale := _stale(records, plan.seen, roots, cleanup):
        report.chunks_deleted += kb.delete_records(stale)
        report.deleted += [r.source for r in stale]
    report.seconds = time.perf_counter() - start
    return report


def _collect(sources: Source | Sequence[Source], *, include: str | Sequence[str], exclude: str | Sequence[str],
             follow_symlinks: bool, report: IndexReport) -> tuple[list[Path], list[str], dict[str, list[Document]]]:
    """The files to index, the folders given (for incremental cleanup), and Documents grouped by source."""
    items = [sources] if isinstance(sources, str | Path | Document) else list(sources)
    files: list[Path] = []
    roots: list[str] = []
    grouped: dict[str, list[Document]] = {}
    for source in items:
        if isinstance(source, Document):
            key = clean_text(str(source.metadata.get("source") or source.metadata.get("doc_id") or ""))
            grouped.setdefault(key or f"text:{docs_hash([source])[:16]}", []).append(source)
            continue
        roots.append(path_text(Path(source).resolve()))
        for file, supported in iter_files(source, include=include, exclude=exclude, follow_symlinks=follow_symlinks,
                                          skipped=report.skipped):
            (files if supported else report.unsupported).append(file if supported else path_text(file))
    return files, roots, grouped


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


def _stale(records: dict[str, DocumentRecord], seen: set[str], roots: list[str],
           cleanup: str | None) -> list[DocumentRecord]:
    """Records to delete: every one not seen ("full"), or those under the folders given ("incremental")."""
    if cleanup == "full":
        return [r for k, r in records.items() if k not in seen]
    if cleanup == "incremental":
        return [r for k, r in records.items()
                if k not in seen and any(k == root or k.startswith(root.rstrip(os.sep) + os.sep) for root in roots)]
    return []


def _file_item(plan: Plan, file: Path, key: str, quiesce: Callable[[], None]) -> Item | None:
    """The work item for a file (not loaded yet), or None when it is unchanged, moved or unreadable."""
    rec, report, force = plan.records.get(key), plan.report, plan.force
    ok = rec is not None and rec.state == "ok" and not force
    display = path_text(file)
    try:
        stat = file.stat()
        if ok and rec.size == stat.st_size and rec.mtime_ns == stat.st_mtime_ns:
            report.unchanged.append(display)
            return None
        content_hash = file_hash(file)
    except OSError as exc:
        report.skipped.append(Skipped(display, f"{display}: cannot read ({exc.strerror or exc})"))
        return None
    if ok and rec.content_hash == content_hash:  # touched, not changed
        rec.size, rec.mtime_ns = stat.st_size, stat.st_mtime_ns
        plan.touched.append(rec)
        report.unchanged.append(display)
        return None
    # a store that cannot update metadata in place (`can_update`) indexes a moved file anew
    if rec is None and plan.moves.get(content_hash) is not None and plan.kb.chunks.can_update:
        old = plan.moves.pop(content_hash)
        quiesce()  # one store writer at a time
        move_document(plan.kb, old, key, display, size=stat.st_size, mtime_ns=stat.st_mtime_ns)
        report.moved.append((old.source, display))
        return None
    doc_id = rec.doc_id if rec else document_id(key)
    return Item(key, display, doc_id, content_hash, stat.st_size, stat.st_mtime_ns, None,
                "updated" if rec is not None and rec.state in ("ok", "updating") else "added", known=rec is not None,
                path=file)


def _forget_lost_store(kb: KnowledgeStore) -> None:
    """Records of chunks a remote collection no longer holds (an empty collection on the server: another
    server, or one whose data was removed) are dropped, so their documents are indexed again."""
    if not kb.remote_store:
        return
    records = kb.records.all()
    if any(r.chunk_ids for r in records.values()) and kb.chunks.count() == 0:
        logger.warning("knowledge base %r: its records list %d document(s) but its %s store is empty: indexing "
                       "them again", kb.name, len(records), kb.backend)
        kb.records.delete(*records)


def _repair_damaged(kb: KnowledgeStore) -> None:
    """After a read found the Chroma collection damaged (its marker file), check it as a search would; if
    Chroma still cannot read it, replace it by an empty one and drop the records, so this run indexes the
    documents again (from the embedding cache). Without the marker nothing is opened (a no-op stays cheap)."""
    marker = kb.home / DAMAGED_MARKER
    if kb.remote_store or not (marker.exists() or marker.is_symlink()):
        return
    try:
        kb.chunks.check()
    except DamagedStoreError as exc:
        logger.warning("%s; rebuilding it from the documents of this run", str(exc).split("; it is damaged")[0])
        kb.chunks.rebuild()
        kb.records.delete(*kb.records.all())
    marker.unlink(missing_ok=True)


def _recover(kb: KnowledgeStore) -> None:
    """Repair a damaged Chroma collection; finish deletions a killed writer left half done; forget what a
    remote collection lost."""
    _repair_damaged(kb)
    _forget_lost_store(kb)
    interrupted = [r for r in kb.records.all().values() if r.state == "deleting"]
    if interrupted:
        kb.delete_records(interrupted)
