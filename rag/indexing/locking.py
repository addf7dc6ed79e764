"""`WriterLock`: one writer per store directory, released by the OS when the writer dies.

The lock is an advisory `flock` on a file in the store directory, so a writer killed with
`kill -9` never leaves a stale lock behind. The holder's pid is written into the file so the
error raised in a second writer says who is writing. Readers never take the lock. The lock file
is opened without following symlinks: a `write.lock` that is a link (planted in a store copied
from elsewhere) is refused with a `StoreError`, never truncated through.

Example:
    >>> import tempfile
    >>> with WriterLock(tempfile.mkdtemp()) as lock:
    ...     lock.held
    True
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from types import TracebackType

from rag.base.errors import StoreError
from rag.indexing.store_files import open_nofollow, store_write_error

__all__ = ["LOCK_FILE", "WriterLock"]

LOCK_FILE = "write.lock"
_POLL_SECONDS = 0.05


class WriterLock:
    """An exclusive, re-entrant (per object) lock on a store directory.

    Args:
        directory: the store directory (created if missing).
        timeout: seconds to wait for another writer; 0 fails at once with `StoreError`.

    Raises:
        StoreError: when another process holds the lock after `timeout` seconds, or the lock
            file is a symlink or not a regular file.
    """

    def __init__(self, directory: str | Path, *, timeout: float = 0.0) -> None:
        if timeout < 0:
            raise StoreError(f"lock timeout must be >= 0 seconds, got {timeout}")
        self.path = Path(directory) / LOCK_FILE
        self.timeout = timeout
        self._fd: int | None = None
        self._depth = 0
        self._thread_lock = threading.RLock()

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def _holder(self) -> str:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                pid = os.read(fd, 32).decode("ascii", "replace").strip()
            finally:
                os.close(fd)
        except OSError:
            pid = ""
        return f"process {pid}" if pid else "another process"

    def acquire(self) -> None:
        """Take the lock, waiting up to `timeout` seconds."""
        import fcntl

        self._thread_lock.acquire()
        if self._fd is not None:
            self._depth += 1
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = open_nofollow(self.path, os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            self._thread_lock.release()
            raise StoreError(f"cannot create the lock file {self.path}: {exc}") from exc
        except StoreError:
            self._thread_lock.release()
            raise
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = self._holder()
                    os.close(fd)
                    self._thread_lock.release()
                    waited = f" after waiting {self.timeout:g} s" if self.timeout else ""
                    raise StoreError(
                        f"{self.path.parent} is being written by {holder}{waited}; only one writer at a time. "
                        "Wait for it to finish, or pass a lock timeout (rag index --lock-timeout SECONDS)."
                    ) from None
                time.sleep(_POLL_SECONDS)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode("ascii"))
        except OSError as exc:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            self._thread_lock.release()
            raise store_write_error(exc, self.path, f"cannot write the lock file {self.path}") from exc
        self._fd = fd
        self._depth = 1

    def release(self) -> None:
        """Release one level of the lock (the file lock goes with the last one)."""
        import fcntl

        if self._fd is None:
            return
        self._depth -= 1
        if self._depth == 0:
            fd, self._fd = self._fd, None
            try:
                os.ftruncate(fd, 0)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
        self._thread_lock.release()

    def __enter__(self) -> WriterLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
