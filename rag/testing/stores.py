"""Empty stores of every backend a knowledge base can keep its chunks in, for tests and benchmarks.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> type(empty_store(KB_BACKENDS[-1], DeterministicFakeEmbedding(size=8), "/tmp", "notes")).__name__
    'InMemoryVectorStore'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from rag.stores.registry import DEFAULT, backend, names, scratch_store

__all__ = ["KB_BACKENDS", "empty_store"]

#: the registered backends other than the default one (a knowledge base keeps its chunks in the default unless told)
KB_BACKENDS = tuple(name for name in names() if name != DEFAULT)


def empty_store(name: str, embedding: Embeddings, workdir: str | Path, label: str, pg_url: str | None = None) -> Any:
    """A new, empty store of backend `name` called `label` (files under `workdir`; a server backend at `pg_url`).

    Raises:
        ConfigError: no such backend (the message lists them).
    """
    backend(name)
    return scratch_store(name, embedding, Path(workdir), label, url=pg_url)
