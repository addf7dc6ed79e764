"""Run an ASGI app under uvicorn in a background thread on loopback (for browser tests and benchmarks).

Example:
    >>> from rag.server.app import create_app                     # doctest: +SKIP
    >>> with live_server(create_app(rag)) as url:                  # doctest: +SKIP
    ...     httpx.get(url + "/health").json()["status"]
    'ok'
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from rag.testing.chroma_server import HOST, free_port

__all__ = ["live_server"]


@contextlib.contextmanager
def live_server(app: Any, *, port: int | None = None, timeout: float = 30.0, **uvicorn_kwargs: Any) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 until the block ends; yields the base URL."""
    import uvicorn

    port = port or free_port()
    config = uvicorn.Config(app, host=HOST, port=port, log_level="warning", lifespan="off", **uvicorn_kwargs)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"uvicorn did not start on {HOST}:{port}")
        time.sleep(0.02)
    try:
        yield f"http://{HOST}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=timeout)
