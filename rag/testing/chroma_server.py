"""Start a throwaway Chroma server on loopback, for tests of `kind: chroma_server` resources.

The server always binds 127.0.0.1: Chroma servers up to 1.5.9 have a remote-code-execution
bug (CVE-2026-45829), so one must never listen on a public interface.

Example:
    >>> with chroma_server("/tmp/chroma-data") as server:        # doctest: +SKIP
    ...     import chromadb
    ...     chromadb.HttpClient(host=server.host, port=server.port).heartbeat()
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rag.base.errors import MissingDependencyError, StoreError

__all__ = ["ChromaServer", "chroma_executable", "chroma_server", "free_port"]

HOST = "127.0.0.1"


@dataclass(frozen=True)
class ChromaServer:
    """A running server: where it listens and its process."""

    host: str
    port: int
    process: subprocess.Popen

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def free_port() -> int:
    """A TCP port that is free on loopback right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def chroma_executable() -> str:
    """The `chroma` CLI installed with chromadb (next to this Python, or on PATH)."""
    beside = Path(sys.executable).parent / "chroma"
    if beside.exists():
        return str(beside)
    found = shutil.which("chroma")
    if not found:
        raise MissingDependencyError("the `chroma` command (installed with chromadb) is not on PATH")
    return found


@contextlib.contextmanager
def chroma_server(path: str | Path, *, port: int | None = None, timeout: float = 60.0,
                  log: str | Path | None = None) -> Iterator[ChromaServer]:
    """Run `chroma run --path PATH --host 127.0.0.1 --port PORT` until the block ends.

    Args:
        path: where the server keeps its data.
        port: the port; a free one when None.
        timeout: seconds to wait for the heartbeat.
        log: file for the server's output (discarded when None).
    """
    port = port or free_port()
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - closed below
    process = subprocess.Popen([chroma_executable(), "run", "--path", str(path), "--host", HOST, "--port", str(port)],
                               stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for_heartbeat(process, port, timeout)
        yield ChromaServer(HOST, port, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        if log:
            out.close()


def _wait_for_heartbeat(process: subprocess.Popen, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    url = f"http://{HOST}:{port}/api/v2/heartbeat"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise StoreError(f"the Chroma server exited with code {process.returncode} before answering on port {port}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise StoreError(f"the Chroma server did not answer on port {port} within {timeout:.0f} s")
