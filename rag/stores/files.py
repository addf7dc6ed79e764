"""Safe access to the files of a store directory: no symlinks followed, disk-full errors that say so.

A store directory may come from somewhere else (a repository that ships `.rag/`), so nothing in
it is trusted to be what its name says:

- `open_nofollow` opens a store file with `O_NOFOLLOW` (and `O_EXCL` for temporary files), so a
  lock or temporary file that is a symlink never makes the writer truncate the link's target;
- `refuse_symlinks` raises `StoreError` for store files (records, caches, Chroma's database)
  that are symlinks, before SQLite or Chroma open them and follow the link;
- `write_atomic` writes a file through a temporary file opened without following links and
  renames it into place (and fsyncs it);
- `store_child` checks a name read from a store's own file (a pointer such as `bm25.json`'s
  `directory`) before joining it: one plain path component of an expected form, naming an
  entry directly inside the store that is not a symlink, so nothing a store says leads outside it;
- `store_write_error` turns an `OSError`, a `sqlite3.Error` or a Chroma error raised while
  writing into a `StoreError` that names the cause (full disk, damaged file) and the fix.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> target = Path(tempfile.mkdtemp()) / "manifest.json"
    >>> write_atomic(target, b"{}")
    >>> target.read_bytes()
    b'{}'
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import sqlite3
import stat
from collections.abc import Iterable
from pathlib import Path

from rag.base.errors import StoreError

__all__ = ["DISK_FULL_ERRNOS", "open_nofollow", "refuse_symlinks", "store_child", "store_condition", "store_write_error",
           "write_atomic"]

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
_SQLITE_FULL = ("database or disk is full", "disk i/o error", "no space left")
_LOCKED = ("database is locked", "database table is locked", "locked by another process")
_READ_ONLY = ("readonly database", "read-only file system", "read-only database")
READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def store_condition(exc: BaseException) -> str | None:
    """What a store engine's error says about the store's disk rather than its data: "full", "locked",
    "read-only", or None (anything else: maybe damage). The three are what every door reports as one line
    (`store_write_error`); none of them is damage, and none is repaired by rebuilding the store.

    Example:
        >>> store_condition(sqlite3.OperationalError("database is locked")), store_condition(ValueError("x"))
        ('locked', None)
    """
    text = str(exc).lower()
    if (isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS) or any(s in text for s in _SQLITE_FULL):
        return "full"
    if any(s in text for s in _LOCKED):
        return "locked"
    if (isinstance(exc, OSError) and exc.errno in READ_ONLY_ERRNOS) or any(s in text for s in _READ_ONLY):
        return "read-only"
    return None


def refuse_symlinks(paths: Iterable[str | Path]) -> None:
    """Raise `StoreError` if any of `paths` is a symlink (missing paths are fine).

    Raises:
        StoreError: naming the link, where it points and the fix.
    """
    for path in paths:
        path = Path(path)
        if path.is_symlink():
            raise StoreError(f"{path} is a symlink (to {os.readlink(path)!r}); rag does not follow symlinks inside a "
                             "store, so that a store copied from elsewhere cannot make it write other files. "
                             "Remove the link (rm it) and run again")


def store_child(home: str | Path, name: object, *, pattern: str, what: str) -> Path:
    """`home / name` for a `name` read from one of the store's own files, checked to stay inside `home`.

    `name` must be a string matching `pattern` in full (one path component: no separator, no
    ``..``, not absolute), and the entry it names must not be a symlink; the path is also checked
    after resolving, so no spelling reaches outside `home`.

    Example:
        >>> import tempfile
        >>> home = Path(tempfile.mkdtemp())
        >>> store_child(home, "bm25-x1", pattern=r"bm25-[A-Za-z0-9_]+", what="BM25 folder").name
        'bm25-x1'
        >>> try:
        ...     store_child(home, "../other/bm25-x1", pattern=r"bm25-[A-Za-z0-9_]+", what="BM25 folder")
        ... except StoreError as err:
        ...     print("is not a name of the form" in str(err))
        True

    Raises:
        StoreError: the name is not of the expected form, or names a symlink or a path outside `home`.
    """
    home = Path(home)
    text = name if isinstance(name, str) else None
    if text is None or not re.fullmatch(pattern, text) or text in (".", "..") or "/" in text or "\\" in text \
            or "\0" in text:
        raise StoreError(f"the {what} named in the store ({str(name)[:80]!r}) is not a name of the form {pattern} "
                         f"inside {home}: the store file naming it was edited or damaged")
    path = home / text
    refuse_symlinks([path])
    try:
        inside = path.resolve().parent == home.resolve()
    except (OSError, RuntimeError) as exc:
        raise StoreError(f"the {what} {path} cannot be resolved ({type(exc).__name__})") from exc
    if not inside:
        raise StoreError(f"the {what} {path} is not inside {home}: the store file naming it was edited or damaged")
    return path


def open_nofollow(path: str | Path, flags: int, mode: int = 0o644) -> int:
    """`os.open` without following a symlink at `path`; the file must be a regular file.

    Raises:
        StoreError: `path` is a symlink or not a regular file, or cannot be opened.
    """
    path = Path(path)
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP or path.is_symlink():
            refuse_symlinks([path])
        raise store_write_error(exc, path, f"cannot open {path}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise StoreError(f"{path} is not a regular file; remove it and run again")
    return fd


def write_atomic(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` through a new temporary file renamed over it (links are not followed).

    Raises:
        StoreError: the disk is full, or the file cannot be written (the old file is kept).
    """
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        tmp.unlink(missing_ok=True)  # a leftover (or a planted link) from an earlier run: unlink never follows it
    except OSError as exc:
        raise store_write_error(exc, tmp, f"cannot write {path}") from exc
    fd = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise store_write_error(exc, path, f"cannot write {path}") from exc


def _free_bytes(path: Path) -> int | None:
    for candidate in (path, *path.parents):
        try:
            return shutil.disk_usage(candidate).free
        except OSError:
            continue
    return None


def store_write_error(exc: BaseException, path: str | Path, action: str) -> StoreError:
    """A `StoreError` for a failed store write: the cause (full disk, damaged file) and the fix.

    Args:
        exc: the error raised by the OS, SQLite or Chroma.
        path: the store file or directory being written.
        action: what was being done, e.g. "cannot write the records of 'docs'".
    """
    path = Path(path)
    condition = store_condition(exc)
    free = _free_bytes(path)
    detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    if condition == "locked":
        return StoreError(f"{action}: {path} is locked by another process ({detail}). Wait for it to finish, or "
                          "stop it, and run the same command again")
    if condition == "read-only":
        return StoreError(f"{action}: {path} is read-only ({detail}). rag's stores are opened for writing even to "
                          "read them (Chroma updates its database on open): make the store directory writable, "
                          "or copy it to a writable disk, and run the same command again")
    if condition == "full" or (free is not None and free < 1 << 20):
        room = f" ({free:,} bytes free)" if free is not None else ""
        return StoreError(f"{action}: the disk holding {path} is full{room} ({detail}). Free some "
                          "space and run the same command again: documents that were being written are indexed "
                          "again, nothing else is lost")
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        return StoreError(f"{action}: {path} is damaged ({exc}). Delete the store directory's damaged file or the "
                          "whole store and index again")
    return StoreError(f"{action} ({detail}). Check that {path} is writable and not damaged, "
                      "then run the same command again")
