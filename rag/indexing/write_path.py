"""The library's one write path: load -> chunk -> AutoContext -> embed -> write, into a knowledge base's storage.

Every front door that writes calls it: `rag.KnowledgeBase` (`add_documents`, `update_document`,
`delete_document`), `Resource.from_directory` / `from_texts` / `from_documents` with a directory,
`HybridRetriever.from_documents(persist_directory=...)`, `build_index`, the config kinds, `rag index`
and the FinanceBench benchmark. A write takes the knowledge base's writer lock, creates the knowledge
base if needed and runs its `Syncer` (`rag.indexing.sync`) over its `IndexTarget`
(`rag.indexing.kb_parts`); store failures become a `StoreError` naming the cause and the fix. Nothing
is written outside the lock.

Example:
    >>> import tempfile
    >>> from langchain_core.documents import Document
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> target = IndexTarget("notes", tempfile.mkdtemp(), embedding=DeterministicFakeEmbedding(size=16))
    >>> index_sources(target, [Document(page_content="Paris is in France.", metadata={"source": "geo"})]).added
    ['geo']
    >>> index_sources(target, [Document(page_content="Paris is in France.", metadata={"source": "geo"})]).unchanged
    ['geo']
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.documents import Document

from rag.base.acl import Permissions, PermissionsLike
from rag.base.errors import ConfigError, RagError
from rag.base.tracing import index_span
from rag.indexing.access import AccessRules, set_permissions
from rag.indexing.executors import ExecutorLike, executor_from
from rag.indexing.kb_parts import IndexTarget
from rag.indexing.limits import LimitsLike, LoadLimits
from rag.indexing.loaders import path_text
from rag.indexing.store_files import store_write_error
from rag.indexing.source_sync import check_source
from rag.indexing.sync import CLEANUP_MODES, IndexReport, Source, Syncer
from rag.stores.registry import is_engine_error

__all__ = ["base_access", "change_permissions", "delete_source", "find_record", "index_sources", "reindex_source",
           "sync_source", "write"]

T = TypeVar("T")


def write(target: IndexTarget, run: Callable[[], T]) -> T:
    """Run a write under `target`'s lock, creating the knowledge base first; store failures become `StoreError`.

    Raises:
        StoreError: another process is writing (after the lock timeout), or the store cannot be written.
    """
    with target.lock:
        try:
            target.create()
            return run()
        except RagError:
            raise
        except (OSError, sqlite3.Error) as exc:
            raise store_write_error(exc, target.directory, f"cannot write knowledge base {target.name!r}") from exc
        except Exception as exc:
            if is_engine_error(exc):  # the store engine's errors on a full disk or damaged files
                raise store_write_error(exc, target.directory, f"cannot write knowledge base {target.name!r}") from exc
            raise


def index_sources(target: IndexTarget, sources: Source | Sequence[Source], *, include: str | Sequence[str] = "**/*",
                  exclude: str | Sequence[str] = (), cleanup: str | None = None,
                  progress: Callable[[str, int], None] | None = None, follow_symlinks: bool = False,
                  executor: ExecutorLike = None, syncer: Syncer | None = None, limits: LimitsLike = None,
                  permissions: PermissionsLike | None = None) -> IndexReport:
    """Index files, folders or Documents into `target`; unchanged ones are skipped without embedding.

    The arguments are `rag.KnowledgeBase.add_documents`'; `syncer` is the knowledge base's own (one is
    made for `target` when None); `limits`: the run's cost limits per file (`LoadLimits`, a mapping, or None
    for the defaults).

    Raises:
        ConfigError: an unknown cleanup mode, executor or limit (before the lock is taken).
        StoreError: see `write`.
    """
    if cleanup not in CLEANUP_MODES:
        raise ConfigError(f"cleanup must be one of {', '.join(map(repr, CLEANUP_MODES))}; got {cleanup!r}")
    runner = executor_from(executor)   # (a bad executor or limit fails before the lock is taken)
    load_limits = LoadLimits.of(limits)
    access = base_access(target).with_given(permissions)
    syncer = syncer or Syncer(target)

    def run() -> IndexReport:
        target.components.limits = load_limits   # (under the lock: this write's, every write sets its own)
        target.components.access = access
        with index_span("rag.index", knowledge_base=target.name, cleanup=cleanup or "none",
                        executor=runner.name) as span:
            report = syncer.sync(sources, include=include, exclude=exclude, cleanup=cleanup, progress=progress,
                                 follow_symlinks=follow_symlinks, executor=runner)
            span.set_attributes({"rag.added": len(report.added), "rag.updated": len(report.updated),
                                 "rag.unchanged": len(report.unchanged), "rag.skipped": len(report.skipped),
                                 "rag.chunks_added": report.chunks_added, "rag.embedded": report.embedded})
            return report

    return write(target, run)


def sync_source(target: IndexTarget, source: Any, *, progress: Callable[[str, int], None] | None = None,
                executor: ExecutorLike = None, syncer: Syncer | None = None, limits: LimitsLike = None,
                force: bool = False) -> IndexReport:
    """Sync a `rag.sources.Source` into `target` under its writer lock (see `rag.indexing.source_sync`).

    New and changed items are fetched and indexed, vanished ones deleted, unchanged ones not even fetched;
    `limits`, `executor` and `progress` are `index_sources`'; `force` fetches and re-reads every item.

    Raises:
        ConfigError: not a `Source`, an unknown executor or limit (before the lock is taken).
        StoreError: see `write`.
    """
    check_source(source)
    runner = executor_from(executor)
    load_limits = LoadLimits.of(limits)
    syncer = syncer or Syncer(target)

    def run() -> IndexReport:
        target.components.limits = load_limits
        with index_span("rag.sync", knowledge_base=target.name, source=type(source).__name__,
                        executor=runner.name) as span:
            report = syncer.sync_source(source, progress=progress, force=force, executor=runner)
            span.set_attributes({"rag.added": len(report.added), "rag.updated": len(report.updated),
                                 "rag.unchanged": len(report.unchanged), "rag.deleted": len(report.deleted),
                                 "rag.skipped": len(report.skipped), "rag.embedded": report.embedded})
            return report

    return write(target, run)


def reindex_source(target: IndexTarget, source: str | Path, documents: Sequence[Document] | None = None, *,
                   syncer: Syncer | None = None, limits: LimitsLike = None) -> IndexReport:
    """Re-index one file now within `limits` (see `index_sources`), or replace a source's content with `documents`."""
    if documents is not None:
        docs = [Document(page_content=d.page_content, metadata={**d.metadata, "source": str(source)})
                for d in documents]
        return index_sources(target, docs, syncer=syncer)
    syncer = syncer or Syncer(target)
    load_limits = LoadLimits.of(limits)

    def run() -> IndexReport:
        target.components.limits = load_limits
        target.components.access = base_access(target)
        return syncer.sync([source], force=True)

    return write(target, run)


def base_access(target: IndexTarget) -> AccessRules:
    """The knowledge base's own permission rules (`KnowledgeBase(..., permissions=...)`), or none."""
    return getattr(target, "access", None) or AccessRules()


def change_permissions(target: IndexTarget, source: str | Path, permissions: PermissionsLike) -> int:
    """Give one document's stored chunks new permissions (under the writer lock); returns chunks changed.

    Raises:
        StoreError: no such document, or a store that cannot update metadata in place.
    """
    def run() -> int:
        return set_permissions(target, find_record(target, source), permissions)

    Permissions.of(permissions)   # (a bad value fails before the lock is taken)
    return write(target, run)


def delete_source(target: IndexTarget, source: str | Path) -> int:
    """Delete a document (by path, source or doc_id) and its chunks; returns chunks deleted.

    Raises:
        ConfigError: no such document (the message says where to look).
    """
    record = find_record(target, source)
    return write(target, lambda: target.delete_records([record]))


def find_record(target: IndexTarget, source: str | Path) -> Any:
    """The record of a document (by path, source or doc_id).

    Raises:
        ConfigError: no such document (the message says where to look).
    """
    key = path_text(source)
    record = target.records.find(key) or target.records.find(path_text(Path(source).resolve()))
    if record is None:
        raise ConfigError(f"no document {key!r} in knowledge base {target.name!r}; "
                          "see list_documents() for what it holds")
    return record
