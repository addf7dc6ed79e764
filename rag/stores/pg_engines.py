"""The process's connection pools to PostgreSQL: one `langchain_postgres.PGEngine` per database URL.

Every pgvector store rag opens on a database shares that database's engine (its SQLAlchemy pool and
the background event loop `PGEngine` runs its coroutines on). An engine per open kept its pooled
connections until garbage collection, so a process that opened the same knowledge base again and
again (a `rag ask` per question in one process, a server rebuilding its chain) held two more
connections each time and met PostgreSQL's "too many clients" (`bench/answers.py` on the jinja
corpus, 2026-11-29). Connections are checked before use (``pool_pre_ping``), so a server that
restarted is reconnected to.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["engine_for"]

_ENGINES: dict[str, Any] = {}
_LOCK = threading.Lock()


def engine_for(url: str) -> Any:
    """The process's one `PGEngine` for the SQLAlchemy `url` (made on first use)."""
    from langchain_postgres import PGEngine

    with _LOCK:
        if url not in _ENGINES:
            _ENGINES[url] = PGEngine.from_connection_string(url, pool_pre_ping=True)
        return _ENGINES[url]
