"""The store tests use the session's one PostgreSQL + pgvector server (`pg_url`, tests/conftest.py)."""
