"""Helpers for the Ray executor tests, importable by Ray workers (this folder is on their PYTHONPATH)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings


class StallingEmbedding(Embeddings):
    """DeterministicFakeEmbedding(size) that stalls once, so a test can kill -9 the process it runs in.

    On its `stall_at`-th call in a process, the first process to claim `flag` writes its pid to
    `flag` and sleeps (it is killed there); every other call, and every other process, embeds at
    once. `stall_at=0` never stalls.
    """

    def __init__(self, size: int, flag: str, stall_at: int = 0) -> None:
        self.size, self.flag, self.stall_at = size, flag, stall_at
        self.inner = DeterministicFakeEmbedding(size=size)
        self.calls = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        if self.stall_at and self.calls == self.stall_at and self._claim():
            time.sleep(600)   # killed here by the test
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)

    def _claim(self) -> bool:
        try:
            fd = os.open(self.flag + ".claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        os.close(fd)
        partial = Path(self.flag + ".tmp")
        partial.write_text(str(os.getpid()))
        partial.rename(self.flag)   # the pid appears whole
        return True


def wait_for_pid(flag: Path, *, alive: object = None, timeout: float = 300.0) -> int:
    """The pid a `StallingEmbedding` wrote to `flag` (waits for it; `alive()` False stops the wait)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if flag.exists():
            return int(flag.read_text())
        if callable(alive) and not alive():
            break
        time.sleep(0.05)
    raise AssertionError(f"no process stalled (no {flag})")
