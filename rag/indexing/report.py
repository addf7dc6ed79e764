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
        device: where and how the chunks were embedded (e.g. `cpu int8 (onnx)`, `cuda fp16 (torch)`);
            empty when nothing was embedded or the model does not say.
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
    device: str = ""

    @property
    def chunks_per_second(self) -> float:
        """Chunks written per second of the run's wall time (0 when none were)."""
        return self.chunks_added / self.seconds if self.chunks_added and self.seconds > 0 else 0.0

    @property
    def changed(self) -> bool:
        """Whether the store was written."""
        return bool(self.added or self.updated or self.deleted or self.moved or self.chunks_added
                    or self.chunks_deleted)

    def summary(self) -> str:
        """One line: documents added / updated / unchanged / moved / deleted / skipped, chunks, time, and the
        chunks per second and embedding device when chunks were written.

        Example:
            >>> IndexReport(chunks_added=120, embedded=120, seconds=4.0, device="cpu int8 (onnx)").summary()[-87:]
            '120 chunk(s) written, 0 removed, 120 embedded; 4.00 s, 30.0 chunks/s on cpu int8 (onnx)'
        """
        rate = f", {self.chunks_per_second:,.1f} chunks/s" if self.chunks_per_second else ""
        where = f" on {self.device}" if rate and self.device and self.embedded else ""
        return (f"added {len(self.added)}, updated {len(self.updated)}, unchanged {len(self.unchanged)}, "
                f"moved {len(self.moved)}, deleted {len(self.deleted)}, skipped {len(self.skipped)} document(s); "
                f"{self.chunks_added} chunk(s) written, {self.chunks_deleted} removed, {self.embedded} embedded; "
                f"{self.seconds:.2f} s{rate}{where}")
