"""`LeaseLock`: a knowledge base's writer lock kept in its engine (Qdrant, Milvus) as a lease, and what it is worth.

PostgreSQL has advisory locks (`rag.stores.pg_tables`); Qdrant and Milvus have none, so a knowledge
base on them keeps its writer lock as one entry of its side collection (`rag.stores.kb_side`): the
holder's name and the wall-clock time of its last heartbeat. A writer takes the lock when the entry
is absent or stale (no heartbeat for `lease` seconds: its holder died), renews it from a background
thread every `lease / 6` seconds while it writes, and deletes it when done. What makes it a lock
differs by engine, and is what the engine's `LockCell` says (`exact`):

- **Qdrant: a compare-and-set.** The claim is one upsert with Qdrant's `update_filter` ("replace
  the point only if its heartbeat is stale", insert it when absent), applied by the shard's leader
  one update after another; the renewal is conditional on the holder too, and so is the delete.
  Two writers never both hold it while the holders' clocks agree within `lease - lease / 6` seconds
  (NTP keeps them within milliseconds).
- **Milvus: timed mutual exclusion (Fischer's algorithm).** Milvus has no conditional write: a
  writer that finds the entry absent or stale writes its name, waits `settle` seconds and reads it
  back; it holds the lock if its name is still there. Two writers both hold it only if one of them
  paused longer than `settle` seconds between reading the entry and writing it (a stop of the
  process, a swap storm); and a renewal is a read then a write, not atomic. It keeps well-behaved
  writers on different machines from interleaving, which is what a writer lock is for here; it is
  not a lock against a hostile or frozen writer. A deployment that needs one keeps its knowledge
  base on pgvector.

Every writer also takes the folder's lock file (`rag.indexing.kb_server.ServerWriterLock`), so
writers on one machine exclude each other exactly whatever the engine. A writer that dies leaves
the entry behind: the next writer takes it over once it is stale (after `lease` seconds, 60 by
default), and a writer told not to wait (`--lock-timeout 0`) is refused with the holder's name and
the age of its last heartbeat.

Example:
    >>> cell = MemoryCell()
    >>> first, second = LeaseLock(cell, "KB"), LeaseLock(cell, "KB")
    >>> first.acquire(0.0)
    >>> try:
    ...     second.acquire(0.0)
    ... except StoreError as exc:
    ...     print(str(exc)[:44])
    the knowledge base in KB is being written by
    >>> first.release(); second.acquire(0.0); second.release()
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from typing import Protocol

from rag.base.errors import StoreError

__all__ = ["LEASE_SECONDS", "LeaseLock", "LockCell", "MemoryCell", "owner_name"]

#: seconds without a heartbeat after which a holder is taken for dead
LEASE_SECONDS = 60.0
_POLL = 0.2


def owner_name() -> str:
    """A name for this holder: host, process and a random part (two locks of one process differ)."""
    return f"{socket.gethostname()[:64]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class LockCell(Protocol):
    """The one entry of the engine that holds the lock (see the module docstring)."""

    #: whether `claim` is a compare-and-set (else a blind write, checked after `settle` seconds)
    exact: bool

    def holder(self) -> tuple[str, float] | None:
        """(holder, wall-clock time of its last heartbeat), or None when nobody holds it."""
        ...

    def claim(self, owner: str, now: float, stale_before: float) -> None:
        """Write (owner, now) if the entry is absent or its heartbeat older than `stale_before`."""
        ...

    def renew(self, owner: str, now: float) -> None:
        """Write (owner, now) if `owner` holds the entry."""
        ...

    def clear(self, owner: str) -> None:
        """Delete the entry if `owner` holds it."""
        ...


class MemoryCell:
    """A `LockCell` in memory, with a compare-and-set (for examples and tests of the protocol)."""

    exact = True

    def __init__(self) -> None:
        self.value: tuple[str, float] | None = None
        self._lock = threading.Lock()

    def holder(self) -> tuple[str, float] | None:
        return self.value

    def claim(self, owner: str, now: float, stale_before: float) -> None:
        with self._lock:
            if self.value is None or self.value[1] < stale_before:
                self.value = (owner, now)

    def renew(self, owner: str, now: float) -> None:
        with self._lock:
            if self.value is not None and self.value[0] == owner:
                self.value = (owner, now)

    def clear(self, owner: str) -> None:
        with self._lock:
            if self.value is not None and self.value[0] == owner:
                self.value = None


class LeaseLock:
    """The writer lock of the knowledge base `where`, held in `cell` (see the module docstring).

    Args:
        cell: the engine's entry.
        where: how messages name the knowledge base (e.g. ``Qdrant (collection docs)``).
        lease: seconds without a heartbeat after which a holder is taken for dead.
        settle: seconds a blind claim waits before reading it back (`cell.exact` False).
    """

    def __init__(self, cell: LockCell, where: str, *, lease: float = LEASE_SECONDS, settle: float = 1.0) -> None:
        self.cell, self.where, self.lease, self.settle = cell, where, lease, settle
        self.owner = owner_name()
        self._stop: threading.Event | None = None
        self._beat: threading.Thread | None = None
        #: set when a heartbeat found the entry held by another writer (the lease lapsed)
        self.lost = False

    def _mine(self) -> bool:
        found = self.cell.holder()
        return found is not None and found[0] == self.owner

    def acquire(self, timeout: float) -> None:
        """Take the lock, waiting up to `timeout` seconds.

        Raises:
            StoreError: another writer holds it after `timeout` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            found = self.cell.holder()
            now = time.time()
            if found is None or found[1] < now - self.lease:
                self.cell.claim(self.owner, now, now - self.lease)
                if not self.cell.exact:
                    time.sleep(self.settle)
                if self._mine():
                    self._start()
                    return
                found = self.cell.holder() or found
            if time.monotonic() >= deadline:
                raise self._busy(found, timeout)
            time.sleep(_POLL)

    def _busy(self, found: tuple[str, float] | None, timeout: float) -> StoreError:
        waited = f" after waiting {timeout:g} s" if timeout else ""
        who = "another process"
        if found is not None:
            who = f"{found[0]} (last heartbeat {max(time.time() - found[1], 0.0):.0f} s ago)"
        return StoreError(f"the knowledge base in {self.where} is being written by {who}{waited}; only one writer "
                          f"at a time. Wait for it to finish, or pass a lock timeout (rag index --lock-timeout "
                          f"SECONDS); a writer that died is taken over {self.lease:g} s after its last heartbeat")

    def _start(self) -> None:
        self.lost = False
        stop = self._stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.lease / 6):
                try:
                    self.cell.renew(self.owner, time.time())
                    if not self._mine():
                        self.lost = True
                        return
                except Exception:   # an engine hiccup: the next beat tries again, well within the lease
                    continue

        self._beat = threading.Thread(target=beat, name="rag-writer-lease", daemon=True)
        self._beat.start()

    def release(self) -> None:
        """Stop the heartbeat and delete the entry (if this writer still holds it)."""
        stop, beat, self._stop, self._beat = self._stop, self._beat, None, None
        if stop is None:
            return
        stop.set()
        if beat is not None:
            beat.join()
        self.cell.clear(self.owner)
