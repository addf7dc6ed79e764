"""`IndexReport`: what one indexing run did (added, updated, moved, deleted, skipped, timings)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rag.indexing.loaders import Note, Skipped

__all__ = ["IndexReport"]


@dataclass
class IndexReport:
    """What an indexing run did.

    Attributes:
        added, updated, unchanged, deleted: document sources (paths as given).
        moved: (old source, new path) of documents found at a new place (re-pointed, not re-indexed).
        skipped: unreadable files with the reason (their previous chunks, if any, are kept).
        unsupported: files of types the loaders do not read.
        notes: parts of indexed files read more cheaply or left out, and why (a cost limit of
            `rag.indexing.limits.LoadLimits`, PDF pages without text and no OCR engine).
        pages, chunks_added, chunks_deleted, embedded: counts (`embedded` = vectors computed
            by the model, cache misses only).
        seconds: wall time.
    """

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    moved: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    pages: int = 0
    chunks_added: int = 0
    chunks_deleted: int = 0
    embedded: int = 0
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        """Whether the store was written."""
        return bool(self.added or self.updated or self.deleted or self.moved or self.chunks_added
                    or self.chunks_deleted)

    def summary(self) -> str:
        """One line: documents added / updated / unchanged / moved / deleted / skipped, chunks and time."""
        return (f"added {len(self.added)}, updated {len(self.updated)}, unchanged {len(self.unchanged)}, "
                f"moved {len(self.moved)}, deleted {len(self.deleted)}, skipped {len(self.skipped)} document(s); "
                f"{self.chunks_added} chunk(s) written, {self.chunks_deleted} removed, {self.embedded} embedded; "
                f"{self.seconds:.2f} s")
