"""Files read once, from one open descriptor: no link followed, nothing that blocks, nothing unbounded.

A folder can change while it is indexed: a file listed by the walk can be replaced by a symlink to a
file outside the folder, by a FIFO (whose `open()` waits for a writer for ever) or by a link to
`/dev/zero` (which never ends). Every read of an indexed file therefore goes through `read_file`:

1. the file is opened once, `O_NOFOLLOW | O_NONBLOCK` (a symlink is refused by the kernel, a FIFO
   opens without waiting for a writer);
2. the open descriptor is checked with `fstat`: a regular file, not empty, at most `max_bytes`;
3. its bytes are read from that descriptor, and no more than `max_bytes` of them (a file that grows
   while it is read is refused).

No swap between the check and the read can change what is read: both look at the same open file.
The walk (`rag.indexing.loaders.iter_files`) hands over the target of a link it accepts (one inside
the folder, or any with `follow_symlinks=True`), so what it accepted is a plain name here.

Example:
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "a.txt"
    >>> _ = path.write_bytes(b"hello")
    >>> read_file(path, max_bytes=100).data
    b'hello'
    >>> fifo = path.with_name("pipe.txt"); os.mkfifo(fifo)
    >>> read_file(fifo, max_bytes=100)
    Traceback (most recent call last):
    ...
    rag.base.errors.LoaderError: .../pipe.txt: not a regular file (a FIFO); not read
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from rag.base.errors import LoaderError
from rag.indexing.text_safety import path_text

__all__ = ["FileBytes", "check_file", "read_changed", "read_file"]

_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_BLOCK = 1 << 20
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


@dataclass(frozen=True)
class FileBytes:
    """A file's bytes and the size and modification time of the open file they were read from."""

    data: bytes
    size: int
    mtime_ns: int


def _open(path: Path) -> int:
    try:
        return os.open(path, _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.EMLINK and os.path.islink(path)):  # (EMLINK: BSD)
            raise LoaderError(f"{path_text(path)}: is a symbolic link (replaced after the folder was listed?); "
                              "not followed") from exc
        raise LoaderError(f"{path_text(path)}: cannot read ({exc.strerror or exc})") from exc


def _check(path: Path, st: os.stat_result, *, max_bytes: int) -> None:
    """Refuse what is not a regular file, is empty or is larger than `max_bytes` (`st`: the open file's `fstat`)."""
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a file")
        raise LoaderError(f"{path_text(path)}: not a regular file ({kind}); not read")
    if st.st_size == 0:
        raise LoaderError(f"{path_text(path)}: empty file")
    if st.st_size > max_bytes:
        raise LoaderError(f"{path_text(path)}: {st.st_size:,} bytes is more than max_bytes={max_bytes:,}")


def read_file(path: str | Path, *, max_bytes: int) -> FileBytes:
    """The bytes of the regular file at `path`, read from one descriptor opened without following a link.

    Raises:
        LoaderError: a symbolic link, not a regular file (FIFO, device, socket, folder), empty, larger than
            `max_bytes` (also when it grows past it while read), or unreadable.
    """
    got = read_changed(path, max_bytes=max_bytes, known=None)
    if got is None:  # (only a known size and time give None)
        raise LoaderError(f"{path_text(path)}: cannot read")
    return got


def read_changed(path: str | Path, *, max_bytes: int, known: tuple[int, int] | None) -> FileBytes | None:
    """`read_file`, or None without reading when the open file's (size, mtime_ns) are `known` (an unchanged file
    costs one `open` and one `fstat`).

    Raises:
        LoaderError: as `read_file`.
    """
    path = Path(path)
    fd = _open(path)
    try:
        st = os.fstat(fd)
        _check(path, st, max_bytes=max_bytes)
        if known is not None and (st.st_size, st.st_mtime_ns) == tuple(known):
            return None
        blocks, total = [], 0
        while block := os.read(fd, min(_BLOCK, max_bytes + 1 - total)):
            blocks.append(block)
            total += len(block)
            if total > max_bytes:
                raise LoaderError(f"{path_text(path)}: grew past max_bytes={max_bytes:,} while it was read")
        return FileBytes(b"".join(blocks), total, st.st_mtime_ns)
    except OSError as exc:
        raise LoaderError(f"{path_text(path)}: cannot read ({exc.strerror or exc})") from exc
    finally:
        os.close(fd)


def check_file(path: str | Path, *, max_bytes: int) -> None:
    """Refuse what `read_file` refuses without reading the bytes (for a plugin loader, which opens the file itself).

    Raises:
        LoaderError: as `read_file`.
    """
    path = Path(path)
    fd = _open(path)
    try:
        _check(path, os.fstat(fd), max_bytes=max_bytes)
    finally:
        os.close(fd)
