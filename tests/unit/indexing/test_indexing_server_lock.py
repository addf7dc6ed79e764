"""A writer's lock timeout bounds the folder's lock and the server's together (`ServerWriterLock`): a writer
told to wait 2 s does not wait 2 s for each. Real locks: the folder's lock file and a lease in a Qdrant side
collection (in memory)."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("qdrant_client")

from qdrant_client import QdrantClient  # noqa: E402

from rag.base.errors import StoreError  # noqa: E402
from rag.indexing.kb_server import ServerWriterLock  # noqa: E402
from rag.indexing.locking import WriterLock  # noqa: E402
from rag.stores.kb_side import SideTables  # noqa: E402
from rag.stores.qdrant_side import QdrantSide  # noqa: E402


def test_one_timeout_bounds_the_folders_lock_and_the_servers_together(tmp_path):
    side = QdrantSide(QdrantClient(location=":memory:"), "locks")
    elsewhere = ServerWriterLock(tmp_path / "other-machine", SideTables(side))
    elsewhere.acquire()   # a writer on another machine holds the server's lock throughout
    here, held = WriterLock(tmp_path / "mine"), threading.Event()

    def hold() -> None:   # a writer in this folder holds its lock for 1.5 s (taken and released in its own thread)
        with here:
            held.set()
            time.sleep(1.5)

    writer = threading.Thread(target=hold)
    writer.start()
    assert held.wait(10)
    lock = ServerWriterLock(tmp_path / "mine", SideTables(side), timeout=2.0)
    started = time.monotonic()
    with pytest.raises(StoreError, match="being written by"):
        lock.acquire()
    waited = time.monotonic() - started
    assert 1.5 <= waited < 3.0, waited   # (each lock its own 2 s: about 3.5 s)
    elsewhere.release()
    writer.join()
    lock.acquire()        # nobody holds either now
    lock.release()
