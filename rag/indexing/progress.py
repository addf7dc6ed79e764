"""How `rag index` shows its progress: one readable line in a terminal, a line every few seconds when piped.

`IndexProgress` counts the events of `KnowledgeBase.add_documents(progress=...)` (`files_total`,
`file`, `pages`, `chunks`, `embeddings`) and reads them as one short line: files done of the
total, pages (of PDFs, only when there were any: a Markdown or HTML file is one file, not a page),
chunks, embeddings with their rate, and the time left, estimated from the files done. `lines`
is what a pipe or a log file gets instead of a live bar: the same line after the first file and
then at most every `every` seconds (`rag index` prints it once more at the end).

Example:
    >>> now = [0.0]
    >>> p = IndexProgress(clock=lambda: now[0])
    >>> for event, n in [("files_total", 4), ("file", 1), ("chunks", 30), ("embeddings", 30)]:
    ...     p.update(event, n)
    >>> now[0] = 10.0
    >>> p.line()
    '1/4 files, 30 chunks, 30 embedded (3.0/s), 0:30 left'
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["IndexProgress", "lines"]


def _rate(n: int, seconds: float) -> str:
    per_second = n / seconds if seconds > 0 else 0.0
    return f"{per_second:,.0f}/s" if per_second >= 10 else f"{per_second:.1f}/s"


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds + 0.5), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class IndexProgress:
    """The counts of one indexing run and the line that shows them.

    Args:
        clock: seconds, monotonic (a fake one in tests).
    """

    def __init__(self, *, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.start = clock()
        self.counts = {"files_total": 0, "file": 0, "pages": 0, "chunks": 0, "embeddings": 0}

    def update(self, event: str, amount: int) -> None:
        """Count one progress event (`files_total` sets the total; the others add up)."""
        if event == "files_total":
            self.counts[event] = amount
        elif event in self.counts:
            self.counts[event] += amount

    def elapsed(self) -> float:
        return max(self.clock() - self.start, 0.0)

    def left(self) -> float | None:
        """Seconds left, from the share of files done (None before the first file)."""
        done, total = self.counts["file"], self.counts["files_total"]
        if not done or not total:
            return None
        return self.elapsed() * (total - done) / done

    def line(self) -> str:
        """`3/17 files, 12 pages, 240 chunks, 200 embedded (35/s), 1:05 left`."""
        c = self.counts
        parts = [f"{c['file']:,}/{c['files_total']:,} files"]
        if c["pages"]:
            parts.append(f"{c['pages']:,} pages")
        parts.append(f"{c['chunks']:,} chunks")
        parts.append(f"{c['embeddings']:,} embedded ({_rate(c['embeddings'], self.elapsed())})")
        left = self.left()
        if left is not None and c["file"] < c["files_total"]:
            parts.append(f"{_duration(left)} left")
        elif c["file"] and c["file"] == c["files_total"]:
            parts.append(f"{_duration(self.elapsed())} elapsed")
        return ", ".join(parts)


def lines(progress: IndexProgress, stream: TextIO, *, every: float = 5.0) -> Callable[[str, int], None]:
    """A progress callback for output that is not a terminal: the line after the first file, then every `every` s.

    Example:
        >>> import io
        >>> now, out = [0.0], io.StringIO()
        >>> on_event = lines(IndexProgress(clock=lambda: now[0]), out, every=5)
        >>> for t in (0, 1, 2, 6, 7, 12):
        ...     now[0] = t
        ...     on_event("file", 1)
        >>> [line.split(",")[0] for line in out.getvalue().splitlines()]
        ['indexing: 1/0 files', 'indexing: 4/0 files', 'indexing: 6/0 files']
    """
    last: list[float | None] = [None]

    def on_event(event: str, amount: int) -> None:
        progress.update(event, amount)
        now = progress.clock()
        first = event == "file" and progress.counts["file"] == 1
        if first or (last[0] is not None and now - last[0] >= every):
            print(f"indexing: {progress.line()}", file=stream, flush=True)
            last[0] = now

    return on_event
