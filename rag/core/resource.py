"""Seed import path; `rag.compose.resource` defines Resource."""
from rag.compose.resource import Resource  # noqa: F401
