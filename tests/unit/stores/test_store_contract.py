"""The store contract (`rag.testing.store_conformance.StoreTests`) on every registered backend.

Each backend is its real engine (Chroma embedded and, once per module, a Chroma server on loopback;
PostgreSQL + pgvector from the session's server, `pg_url`; Qdrant in memory; Milvus Lite; LanceDB;
FAISS; LangChain's in-memory store), reached only through `rag.stores.registry`.
"""

from __future__ import annotations

import itertools

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.stores.registry import chunks_of, names, scratch_store
from rag.testing.store_conformance import DIMENSION, StoreTests

EMB = DeterministicFakeEmbedding(size=DIMENSION)
_labels = (f"contract{i}" for i in itertools.count())


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory):
    return tmp_path_factory.mktemp("contract")


@pytest.mark.parametrize("name", names())
class TestEveryBackend(StoreTests):
    """Every backend of the registry: a new store per test, from the backend's `scratch_store`."""

    @pytest.fixture
    def store(self, name: str, workdir, request: pytest.FixtureRequest):
        url = request.getfixturevalue("pg_url") if name == "pgvector" else None
        return chunks_of(scratch_store(name, EMB, workdir, next(_labels), url=url))

    def make_store(self):  # (the fixture above builds it, with the backend's name)
        raise NotImplementedError


class TestChromaServer(StoreTests):
    """A Chroma server's collection (what a knowledge base with `client=http_client(...)` keeps)."""

    @pytest.fixture(scope="class")
    def server(self, tmp_path_factory: pytest.TempPathFactory):
        from rag.testing.chroma_server import chroma_server

        with chroma_server(tmp_path_factory.mktemp("chroma-server")) as running:
            yield running

    @pytest.fixture
    def store(self, server):
        from rag.stores.chroma import http_client, new_chroma

        return chunks_of(new_chroma(next(_labels), EMB, client=http_client(server.host, server.port)))

    def make_store(self):  # (the fixture above builds it, on the class's server)
        raise NotImplementedError


class TestExactVectorStoreLayout(StoreTests):
    """`ExactVectorStore`'s chunk store (a store layout, not a registered backend: no update in place)."""

    def make_store(self):
        from rag.stores import ExactVectorStore

        return chunks_of(ExactVectorStore(EMB))


class TestPartitionedChromaLayout(StoreTests):
    """`PartitionedChroma`'s chunk store, partitioned on `topic` (a store layout: no update in place)."""

    def make_store(self):
        from rag.stores import PartitionedChroma

        return chunks_of(PartitionedChroma(next(_labels), EMB, partition_key="topic"))
