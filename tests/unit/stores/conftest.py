"""One PostgreSQL + pgvector server for every store test of the session (started only if one needs it)."""

from __future__ import annotations

import pytest

from rag.base.errors import MissingDependencyError, StoreError
from rag.testing.pg_server import pg_server


@pytest.fixture(scope="session")
def pg_url(tmp_path_factory: pytest.TempPathFactory):
    """The SQLAlchemy URL of a running PostgreSQL with pgvector; the test FAILS if it cannot start."""
    try:
        with pg_server(tmp_path_factory.mktemp("pgdata")) as url:
            yield url
    except (MissingDependencyError, StoreError) as exc:
        pytest.fail(f"the pgvector backend cannot run here: {exc}")
