"""`Writer`: store writes in one background thread, at most one group in flight (see `rag.indexing.sync`)."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any

__all__ = ["Writer"]


class Writer:
    """Runs store writes in one background thread, at most one group in flight.

    Example:
        >>> stored = []
        >>> writer = Writer()
        >>> writer.submit(stored.append, "group 1")
        >>> writer.close()
        >>> stored
        ['group 1']
    """

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._future: Future | None = None

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        """Wait for the previous write (re-raising its error), then start `fn(*args)`."""
        self.wait()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rag-index-writer")
        # In the caller's context, so the writer's spans (rag.base.tracing) join the caller's trace.
        self._future = self._pool.submit(contextvars.copy_context().run, fn, *args)

    def wait(self) -> None:
        """Block until the write in flight is done; its exception is raised here."""
        future, self._future = self._future, None
        if future is not None:
            future.result()

    def close(self) -> None:
        """Wait for any write in flight and stop the thread (no store write may outlive `sync`).

        Used in `finally`: when the caller is already raising, that error wins and a second one
        from the writer is left on its future (it could only repeat or follow from the first).
        """
        if self._future is not None:
            wait_futures([self._future])
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
