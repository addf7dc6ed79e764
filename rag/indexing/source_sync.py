"""Syncing a `rag.sources.Source` into a knowledge base: list, compare versions, fetch what changed, delete what vanished.

`Syncer.sync_source` (called by `rag.indexing.write_path.sync_source`, under the writer lock) makes a
`SourcePlan` and runs it with the same executor, stages and record states as a sync of files
(`rag.indexing.plan.Plan`):

1. the source lists its items; an item whose record is `ok` with the same digest (its version, its
   access, its metadata, and what the run's load limits change in reading its kind of file) is
   unchanged: it is not fetched, loaded or embedded;
2. a new or changed item is fetched: a local file is read by the loader of its suffix within the
   run's `LoadLimits` (OCR, tables, sizes), Documents are taken as they are; the chunks get the item
   id as `source`, its metadata and its access (`acl_users`, `acl_groups`, `acl_public`);
3. records under the source's `prefix` that the listing no longer holds are deleted with their
   chunks, unless the listing was incomplete (`IncompleteListing`, or the listing itself failed).

An item that cannot be taken (a refused address, a response over the size limit, a path traversal,
a file that does not load) is skipped with the reason and the run goes on; an earlier version of it
stays indexed. A run killed in the middle leaves records `pending` / `updating`, and the next run
finishes them: chunk ids are content hashes, so nothing is duplicated.

Example:
    >>> report = Syncer(target).sync_source(WebSource("https://example.org/sitemap.xml"))   # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from rag.base.errors import ConfigError, LoaderError
from rag.indexing.chunking import document_id
from rag.indexing.ingest import Item
from rag.indexing.formats import loader_for
from rag.indexing.loaders import Skipped, clean_text, load_file, reader_tag
from rag.indexing.plan import Plan
from rag.indexing.records import WRITING, DocumentRecord
from rag.sources.base import IncompleteListing, Source, SourceError, SourceItem, local_name

__all__ = ["SourcePlan", "check_source", "stale_under"]

logger = logging.getLogger(__name__)


@dataclass
class SourcePlan(Plan):
    """A `Plan` whose work comes from a `Source`: only new and changed items are fetched (see the module docstring)."""

    source: Source | None = None
    complete: bool = True   # the listing reached its end: what it no longer holds may be deleted
    listing_error: str = ""
    fetched: int = 0   # items fetched this run (new or changed)

    def items(self, quiesce: Callable[[], None]) -> Iterator[Item | None]:
        """The changed items of the source, fetched and loaded; None for an item that needs nothing."""
        prefix = self.source.prefix
        self.source.previous({key: rec.source_state for key, rec in self.records.items()
                              if rec.source_state and rec.state == "ok" and key.startswith(prefix)})
        for listed in self._listing():
            yield self._item(listed, quiesce)

    def _listing(self) -> Iterator[SourceItem]:
        source = self.source
        try:
            for listed in source.items():
                if not isinstance(listed, SourceItem):
                    raise SourceError(f"{source!r}.items() yielded {type(listed).__name__}, not a SourceItem")
                yield listed
        except IncompleteListing as exc:
            self._stop(str(exc))
        except Exception as exc:  # noqa: BLE001 - a failed listing keeps what was indexed, and deletes nothing
            self._stop(f"listing {source!r} failed: {type(exc).__name__}: {exc}")

    def _stop(self, reason: str) -> None:
        self.complete, self.listing_error = False, clean_text(reason)
        self.report.skipped.append(Skipped(self.source.prefix, f"{self.listing_error}; nothing deleted this run"))
        logger.warning("%s; nothing deleted this run", self.listing_error)

    def _item(self, listed: SourceItem, quiesce: Callable[[], None]) -> Item | None:
        report, source = self.report, self.source
        key = clean_text(str(listed.id))
        if key in self.seen:
            return None   # listed twice (a sitemap naming a page twice): once is enough
        self.seen.add(key)
        if listed.error or not key.startswith(source.prefix):
            why = listed.error or f"id outside the source's prefix {source.prefix!r}"
            report.skipped.append(Skipped(key, clean_text(f"{key}: {why}")))
            return None
        suffix = Path(local_name(listed.name)).suffix.lower() if listed.name else ""
        if listed.name and loader_for(suffix) is None:
            report.unsupported.append(key)   # (a .zip / .gz is never fetched: compressed files are not opened)
            return None
        access = source.access_of(listed)
        reading = (self.target.components.limits.reading(suffix) + reader_tag(suffix)) if listed.name else ""
        digest = SourceItem(key, listed.version, metadata=listed.metadata, access=access).digest() + reading
        rec = self.records.get(key)
        if not self.force and rec is not None and rec.state == "ok" and rec.content_hash == digest:
            report.unchanged.append(key)
            if listed.state != rec.source_state:   # (new validators for the same content: kept for next time)
                self.target.records.put(replace(rec, source_state=str(listed.state)))
            return None
        notes: list[str] = []
        try:
            docs = self._fetch(listed, key, notes)
        except Exception as exc:  # noqa: BLE001 - one bad item never stops a run: it is skipped with the reason
            reason = str(exc) if isinstance(exc, LoaderError) else f"{type(exc).__name__}: {exc}"
            self._failed(key, rec, clean_text(reason if reason.startswith(key) else f"{key}: {reason}"), quiesce)
            return None
        extra = {**dict(listed.metadata), **(access.metadata() if access else {})}
        docs = [Document(page_content=d.page_content, metadata={**d.metadata, **extra, "source": key})
                for d in docs]
        status = "updated" if rec is not None and rec.state in ("ok", "updating") else "added"
        doc_id = rec.doc_id if rec else document_id(key)
        return Item(key, key, doc_id, digest, -1, -1, docs, status, known=rec is not None, notes=notes,
                    source_state=str(listed.state))

    def _fetch(self, listed: SourceItem, key: str, notes: list[str]) -> list[Document]:
        """The item's documents: fetched, and read by the loader of its suffix when it is a file."""
        fetched = self.source.fetch(listed)
        self.fetched += 1
        try:
            if fetched.path is not None:
                docs = load_file(fetched.path, limits=self.target.components.limits, notes=notes)
                return [Document(page_content=d.page_content,
                                 metadata={k: v for k, v in d.metadata.items() if k != "source"}) for d in docs]
            docs = fetched.documents
            if not isinstance(docs, list) or not all(isinstance(d, Document) for d in docs):
                raise SourceError(f"{key}: fetch gave {type(docs).__name__}, not a list of Documents")
            if not any(d.page_content.strip() for d in docs):
                raise SourceError(f"{key}: no text found")
            return [Document(page_content=clean_text(d.page_content), metadata=dict(d.metadata)) for d in docs]
        finally:
            fetched.cleanup()

    def _failed(self, key: str, rec: DocumentRecord | None, reason: str, quiesce: Callable[[], None]) -> None:
        """A skipped item; a half-written earlier attempt of it is removed (an indexed earlier version is kept)."""
        self.report.skipped.append(Skipped(key, reason))
        if rec is not None and rec.state in WRITING:
            quiesce()
            self.report.chunks_deleted += self.target.delete_records([rec])


def stale_under(records: dict[str, DocumentRecord], seen: set[str], prefix: str) -> list[DocumentRecord]:
    """The records under `prefix` that the listing (`seen`) no longer holds."""
    return [r for key, r in records.items() if key.startswith(prefix) and key not in seen]


def check_source(source: Any) -> Source:
    """`source` if it is a `Source` with a usable prefix, else a `ConfigError` saying what is valid."""
    if not isinstance(source, Source):
        raise ConfigError(f"expected a rag.sources.Source (ObjectStoreSource, WebSource, GitSource, LoaderSource, "
                          f"FolderSource), got {type(source).__name__}")
    prefix = getattr(source, "prefix", "")
    if not isinstance(prefix, str) or len(prefix) < 3:
        raise ConfigError(f"{type(source).__name__}.prefix must name the source (at least 3 characters: every item id "
                          f"starts with it, and what vanishes under it is deleted); got {str(prefix)[:60]!r}")
    return source
