"""Chroma's clients and what they hold: a directory's persistent client, a server's HTTP client, the collections
a client holds, and the identity of a directory's store (the Chroma backend's `DirectoryBackend` functions,
re-exported by `rag.stores.chroma_chunks`, the backend's module).

Example:
    >>> client = local_client()            # in memory (one per process: Chroma shares it)
    >>> reaches_server(client), isinstance(collections(client), list)
    (False, True)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rag.stores import chroma

__all__ = ["collections", "holds_store", "local_client", "reaches_server", "server_client", "store_stamp"]


def local_client(path: str | Path | None = None) -> Any:
    """A persistent client on the directory `path` (an in-process ephemeral one when None)."""
    return chroma.open_client(path)


def server_client(host: str, port: int, *, ssl: bool = False, headers: dict[str, str] | None = None) -> Any:
    """A client of a running Chroma server, checked with a heartbeat (raises on connection errors)."""
    return chroma.http_client(host, port, ssl=ssl, headers=headers)


def reaches_server(client: Any) -> bool:
    """Whether `client` is a Chroma server's (its collections are not in any knowledge base's directory)."""
    return bool(client.get_settings().chroma_server_host)


def collections(client: Any) -> list[str]:
    """The names of the collections `client` holds."""
    return [c if isinstance(c, str) else c.name for c in client.list_collections()]


def store_stamp(directory: str | Path) -> str | None:
    """The identity of the Chroma database file in `directory` (None when there is none): its device and
    inode, and the sequence number of the last write Chroma logged in it (`chroma.last_write`). A store moved
    aside and recreated, or restored from an older copy, differs (also when the new file reuses the inode of
    a deleted one); reads leave it as it is (`rag.indexing.reconcile`). The file's size and time are not part
    of it: Chroma writes the file on every open, reads included."""
    path = Path(directory) / "chroma.sqlite3"
    try:
        info = path.lstat()
    except OSError:
        return None
    return f"{info.st_dev}:{info.st_ino}:{chroma.last_write(path) if not path.is_symlink() else None}"


def holds_store(directory: str | Path) -> bool:
    """Whether `directory` holds a store of this backend (Chroma's database file)."""
    return (Path(directory) / "chroma.sqlite3").is_file()
