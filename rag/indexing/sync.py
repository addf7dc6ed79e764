"""`Syncer`: incremental indexing for a `KnowledgeBase`: hash, compare, chunk, embed the misses, write.

A knowledge base owns one syncer per write, built on the parts it hands over (`IndexTarget`: records,
chunk store, manifest, embedding, components), and calls it while holding its writer lock.

For each file: an unchanged size and modification time means unchanged; otherwise the
content hash decides. New and changed documents are processed in groups:

1. they are chunked, tagged, given AutoContext; each chunk's id is a hash of its document,
   position, embedded text and metadata;
2. their records are marked `pending` (a crash from here on makes the next run redo them);
3. only ids the store does not have are embedded (through the embedding cache) and added;
   ids of the document that are no longer produced are deleted;
4. their records are marked `ok` with the new hash and chunk ids.

The decisions (hash, compare, move: `rag.indexing.plan.Plan`) are made here, on the caller's side; loading, chunking,
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
    >>> report = Syncer(target).sync(["docs/"], cleanup="incremental")   # doctest: +SKIP
    >>> print(report.summary())                                 # doctest: +SKIP
    added 3, updated 0, unchanged 12, moved 0, deleted 0, skipped 1 (...)
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Union

from langchain_core.documents import Document

from rag.indexing.executors import LocalExecutor
from rag.indexing.folder_source import FolderSource
from rag.indexing.ingest import docs_hash
from rag.indexing.kb_parts import IndexTarget
from rag.indexing.loaders import Note, clean_text, iter_files, path_text
from rag.indexing.moves import moved_candidates
from rag.indexing.plan import Plan
from rag.indexing.reconcile import lacking, read_stamp, save_stamp
from rag.indexing.records import DocumentRecord
from rag.indexing.report import IndexReport
from rag.indexing.source_sync import SourcePlan, check_source, stale_under
from rag.indexing.access import refresh_permissions
from rag.models.devices import embedding_device
from rag.stores.chunk_store import DAMAGED_MARKER, DamagedStoreError
from rag.stores.registry import store_stamp

logger = logging.getLogger(__name__)

__all__ = ["CLEANUP_MODES", "IndexReport", "Source", "Syncer"]

Source = Union[str, Path, Document]  # noqa: UP007 - a runtime alias
CLEANUP_MODES = (None, "incremental", "full")


class Syncer:
    """Brings a knowledge base's store in line with the sources given (the caller holds the writer lock).

    Args:
        target: the parts of the knowledge base it writes (`IndexTarget`).
    """

    def __init__(self, target: IndexTarget) -> None:
        self.target = target

    def sync(self, sources: Source | Sequence[Source], *, include: str | Sequence[str] = "**/*",
             exclude: str | Sequence[str] = (), cleanup: str | None = None,
             progress: Callable[[str, int], None] | None = None, force: bool = False,
             follow_symlinks: bool = False, executor: Any = None) -> IndexReport:
        """Index `sources` (see the module docstring) and return what changed.

        `executor`: where loading, chunking, AutoContext and embedding run (`rag.indexing.executors`;
        None: this process).
        """
        start, target = time.perf_counter(), self.target
        emit = progress or (lambda event, amount: None)
        report = IndexReport()
        self.recover(report)
        records = target.records.all()
        files, roots, grouped = _collect(sources, include=include, exclude=exclude, follow_symlinks=follow_symlinks,
                                         report=report)
        emit("files_total", len(files) + len(grouped))
        plan = Plan(target, files, grouped, records, force, report, moves=moved_candidates(records))
        (executor or LocalExecutor()).run(target, plan, report, emit)
        target.records.put_many(plan.touched)
        # a changed rule or argument reaches unchanged documents too: their chunks' metadata, nothing embedded
        refresh_permissions(target, target.components.access, sorted(plan.seen), grouped)
        if stale := _stale(records, plan.seen, roots, cleanup):
            report.chunks_deleted += target.delete_records(stale)
            report.deleted += [r.source for r in stale]
        self._stamp()
        report.seconds = time.perf_counter() - start
        if not report.device and report.embedded:
            report.device = embedding_device(target.embedding_model)
        return report

    def sync_source(self, source: Any, *, progress: Callable[[str, int], None] | None = None, force: bool = False,
                    executor: Any = None) -> IndexReport:
        """Bring the store in line with a `rag.sources.Source`: fetch what is new or changed, delete what vanished
        under its prefix (`rag.indexing.source_sync`). A `FolderSource` is a folder synced as `sync` syncs it
        (records by path, size and time, moves), with `cleanup="incremental"`."""
        if isinstance(source, FolderSource):
            return self.sync([source.path], include=source.include, exclude=source.exclude, cleanup="incremental",
                             progress=progress, force=force, follow_symlinks=source.follow_symlinks,
                             executor=executor)
        check_source(source)
        start, target = time.perf_counter(), self.target
        emit = progress or (lambda event, amount: None)
        report = IndexReport()
        self.recover(report)
        records = target.records.all()
        plan = SourcePlan(target, [], {}, records, force, report, source=source)
        (executor or LocalExecutor()).run(target, plan, report, emit)
        if plan.complete and (stale := stale_under(records, plan.seen, source.prefix)):
            report.chunks_deleted += target.delete_records(stale)
            report.deleted += [r.source for r in stale]
        self._stamp()
        report.seconds = time.perf_counter() - start
        return report

    def recover(self, report: IndexReport | None = None) -> None:
        """Repair a damaged Chroma collection; finish deletions a killed writer left half done; index again the
        documents whose chunks the store lacks (`rag.indexing.reconcile`; noted in `report`)."""
        self.target.separate()   # from a collection an older rag let it share with another knowledge base
        self._repair_damaged()
        self._reconcile(report)
        interrupted = [r for r in self.target.records.all().values() if r.state == "deleting"]
        if interrupted:
            self.target.delete_records(interrupted)

    def _reconcile(self, report: IndexReport | None) -> None:
        """Records whose chunks the store no longer holds all of are marked `updating`: this run reads their
        documents again (as updated), later runs until it has. Checked only when the store may have changed
        under the records (`rag.indexing.reconcile`); nothing is deleted, nothing is forgotten."""
        target = self.target
        records = [r for r in target.records.all().values() if r.state == "ok" and r.chunk_ids]
        if not records:
            return
        if target.remote:
            if target.chunks.count() >= sum(len(r.chunk_ids) for r in records):
                return
        elif read_stamp(target.home) == store_stamp(target.directory) is not None:
            return
        missing = lacking(target.chunks, records)
        if not missing:
            return
        logger.warning("knowledge base %r: its store lacks chunks of %d of the %d document(s) its records list "
                       "(store files moved aside or restored from an older copy?): indexing them again",
                       target.name, len(missing), len(records))
        for rec in missing:
            rec.state = "updating"
        target.records.put_many(missing)
        if report is not None:
            report.notes += [Note(r.source, "its chunks were missing from the store (moved aside, restored from "
                                  "an older copy?): indexed again") for r in missing]

    def _stamp(self) -> None:
        """Save the identity of the store file this run wrote (an embedded store), for the next `_reconcile`."""
        if not self.target.remote:
            save_stamp(self.target.home, store_stamp(self.target.directory))

    def _repair_damaged(self) -> None:
        """After a read found the Chroma collection damaged (its marker file), check it as a search would; if
        Chroma still cannot read it, replace it by an empty one and drop the records, so this run indexes the
        documents again (from the embedding cache). Without the marker nothing is opened (a no-op stays cheap)."""
        target = self.target
        marker = target.home / DAMAGED_MARKER
        if target.remote or not (marker.exists() or marker.is_symlink()):
            return
        try:
            target.chunks.check()
        except DamagedStoreError as exc:
            logger.warning("%s; rebuilding it from the documents of this run", str(exc).split("; it is damaged")[0])
            target.chunks.rebuild()
            target.records.delete(*target.records.all())
        marker.unlink(missing_ok=True)


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


def _stale(records: dict[str, DocumentRecord], seen: set[str], roots: list[str],
           cleanup: str | None) -> list[DocumentRecord]:
    """Records to delete: every one not seen ("full"), or those under the folders given ("incremental")."""
    if cleanup == "full":
        return [r for k, r in records.items() if k not in seen]
    if cleanup == "incremental":
        return [r for k, r in records.items()
                if k not in seen and any(k == root or k.startswith(root.rstrip(os.sep) + os.sep) for root in roots)]
    return []
