"""Per-backend behaviour beyond the shared suite: what a backend refuses, hostile strings, paging, FAISS files."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore, VectorStoreRetriever
from pydantic import Field

from rag import Resource
from rag.base.errors import FilterError, StoreError
from rag.base.filters import validate_filter
from rag.stores.faiss import FaissStore
from rag.stores.native import NativeFilterRetriever
from rag.stores.qdrant import translate as qdrant_filter
from tests.unit.stores.backends import BACKENDS, EMB, build, doc_id

# Strings that would end a quoted literal, start a comment or another clause, if spliced in unescaped.
HOSTILE = ['x" or 1 == 1 or "', "x' OR 1=1 --", 'a\\"b', "\\", '"', "'", "é ü", "line\nbreak", "tab\tx", "%_*"]


def _resource(request, backend: str, docs: list[Document]) -> Resource:
    pg = request.getfixturevalue("pg_url") if backend == "pgvector" else None
    store = build(backend, docs, request.getfixturevalue("tmp_path_factory").mktemp(backend), pg)
    return Resource.from_vectorstore(backend, store)


@pytest.mark.parametrize("backend", ["qdrant", "pgvector", "milvus", "faiss", "inmemory", "lancedb"])
def test_every_native_backend_gets_a_native_retriever(request, backend):
    resource = _resource(request, backend, [Document(id=doc_id("one"), page_content="x", metadata={"a": 1})])
    assert isinstance(resource.retriever, NativeFilterRetriever)
    assert resource.retriever.store.backend == backend


@pytest.mark.parametrize("backend", ["qdrant", "pgvector", "milvus", "lancedb"])
def test_hostile_strings_are_values_never_syntax(request, backend):
    docs = [Document(id=doc_id(f"h{i}"), page_content=f"h {i}", metadata={"s": s, "k'\"ey": s})
            for i, s in enumerate(HOSTILE)]
    resource = _resource(request, backend, docs)
    for i, s in enumerate(HOSTILE):
        for flt in ({"s": s}, {"k'\"ey": s}, {"s": {"$in": [s, "none"]}}):
            try:
                found = resource.retrieve("h", search_kwargs={"k": len(docs), "filter": flt})
            except FilterError as exc:   # Qdrant cannot address a key holding a double quote
                assert backend == "qdrant" and "qdrant cannot express" in str(exc) and '"' in next(iter(flt))
                continue
            assert [d.id for d in found] == [doc_id(f"h{i}")], (flt, [d.metadata for d in found])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=6))
def test_milvus_literals_hold_any_text_or_refuse_it(text):
    from rag.stores.milvus import literal

    try:
        quoted = literal(text)
    except FilterError as exc:
        assert "milvus cannot express" in str(exc)
        assert any(ord(c) < 32 or ord(c) == 127 for c in text)
        return
    body = quoted[1:-1]
    assert quoted[0] == quoted[-1] == '"'
    # every double quote inside is escaped: after removing escape pairs none is left
    assert '"' not in body.replace("\\\\", "").replace('\\"', "")


def test_lancedb_refuses_integers_its_doubles_cannot_hold():
    from rag.stores.lancedb import where_clause

    with pytest.raises(FilterError, match=r"lancedb cannot express \$eq: .*2\*\*53"):
        where_clause(validate_filter({"n": 2**60}), set())


def test_qdrant_refuses_what_it_cannot_compare_exactly():
    with pytest.raises(FilterError, match=r"qdrant cannot express \$gt: .*2\*\*53"):
        qdrant_filter(validate_filter({"n": {"$gt": 2**60}}))
    with pytest.raises(FilterError, match=r"qdrant cannot express \$eq: the field name"):
        qdrant_filter(validate_filter({'a"b': 1}))


# ---------------------------------------------------------------- the paging fallback
def _rare_store(n: int = 2000, every: int = 500) -> tuple[InMemoryVectorStore, set[str]]:
    store = InMemoryVectorStore(EMB)
    ids = [f"c{i}" for i in range(n)]
    store.add_texts([f"note {i}" for i in range(n)], metadatas=[{"rare": i % every == 3} for i in range(n)], ids=ids)
    return store, {f"c{i}" for i in range(n) if i % every == 3}


def test_a_plain_vector_store_retriever_is_paged_until_k_chunks_match():
    store, rare = _rare_store()
    resource = Resource.from_retriever("plain", VectorStoreRetriever(vectorstore=store))
    found = resource.retrieve("note", search_kwargs={"k": len(rare), "filter": {"rare": True}})
    assert {d.id for d in found} == rare


async def test_paging_works_on_the_async_path_too():
    store, rare = _rare_store()
    resource = Resource.from_retriever("plain", VectorStoreRetriever(vectorstore=store))
    found = await resource.aretrieve("note", search_kwargs={"k": len(rare), "filter": {"rare": True}})
    assert {d.id for d in found} == rare


class _Listing(BaseRetriever):
    """A retriever with a `k` field and no filter support; counts what it is asked for."""

    docs: list[Document]
    k: int = 4
    asked: list[int] = Field(default_factory=list)   # shared by the copies Resource makes

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        self.asked.append(self.k)
        return self.docs[: self.k]


def test_a_retriever_with_a_k_field_is_paged_and_stops_when_exhausted():
    docs = [Document(page_content=str(i), metadata={"n": i}) for i in range(50)]
    retriever = _Listing(docs=docs)
    resource = Resource.from_retriever("listing", retriever)
    assert [d.metadata["n"] for d in resource.retrieve("q", search_kwargs={"k": 2, "filter": {"n": {"$gte": 45}}})] \
        == [45, 46]
    assert retriever.asked == [4, 16, 64]     # 2k, then four times as many until 2 match
    retriever.asked.clear()
    assert resource.retrieve("q", search_kwargs={"k": 3, "filter": {"n": 1000}}) == []
    assert retriever.asked == [6, 24, 96]     # the retriever gave 50 < 96: nothing more to ask for


# ---------------------------------------------------------------- FAISS files
def test_faiss_saves_and_loads_without_pickle(tmp_path):
    docs = [Document(id=f"d{i}", page_content=f"text {i}", metadata={"n": i, "f": i / 2, "b": i % 2 == 0})
            for i in range(20)]
    store = build("faiss", docs, tmp_path, None)
    store.save(tmp_path / "faiss")
    assert sorted(p.name for p in (tmp_path / "faiss").iterdir()) == ["documents.sqlite", "index.faiss"]
    loaded = FaissStore.load(tmp_path / "faiss", EMB)
    flt = {"$or": [{"b": True}, {"f": {"$gt": 8}}]}
    assert [(d.id, d.metadata, round(s, 6)) for d, s in loaded.search_by_vector(EMB.embed_query("text 3"), k=8,
                                                                                 filter=flt)] == \
        [(d.id, d.metadata, round(s, 6)) for d, s in store.search_by_vector(EMB.embed_query("text 3"), k=8,
                                                                             filter=flt)]
    loaded.add_texts(["new"], metadatas=[{"n": 99}], ids=["d99"])
    assert [d.id for d in loaded.similarity_search("new", k=1, filter={"n": 99})] == ["d99"]


def test_a_faiss_store_whose_files_disagree_is_a_store_error(tmp_path):
    store = build("faiss", [Document(id="a", page_content="a"), Document(id="b", page_content="b")], tmp_path, None)
    store.save(tmp_path / "faiss")
    with sqlite3.connect(tmp_path / "faiss" / "documents.sqlite") as db:
        db.execute("DELETE FROM chunks WHERE id = 'b'")
    with pytest.raises(StoreError, match="the index holds 2 vectors but documents.sqlite 1 chunks"):
        FaissStore.load(tmp_path / "faiss", EMB)
    with pytest.raises(StoreError, match="no FAISS store"):
        FaissStore.load(tmp_path / "nowhere", EMB)


def test_every_backend_of_the_suite_is_listed():
    assert set(BACKENDS) >= {"chroma", "exact", "inmemory", "faiss", "qdrant", "pgvector", "milvus", "lancedb"}


# ---------------------------------------------------------------- LanceDB files
def test_a_lancedb_store_reopens_replaces_ids_and_grows_columns_for_new_keys(tmp_path):
    from rag.stores.lancedb import LanceStore

    store = LanceStore(EMB, uri=tmp_path / "db", table="notes")
    store.add_texts(["a", "b"], [{"n": 1}, {"n": 2}], ids=["a", "b"])
    store.add_texts(["b again", "c"], [{"n": "two"}, {"new key": True}], ids=["b", "c"])   # new kind, new key
    again = LanceStore(EMB, uri=tmp_path / "db", table="notes")
    assert sorted(d.id for d in again.similarity_search("x", k=10)) == ["a", "b", "c"]
    assert [d.page_content for d in again.get_by_ids(["b"])] == ["b again"]
    assert [d.id for d in again.similarity_search("x", k=10, filter={"new key": True})] == ["c"]
    assert sorted(d.id for d in again.similarity_search("x", k=10, filter={"n": {"$nin": [1]}})) == ["b", "c"]
    again.delete(["a"])
    assert sorted(d.id for d in store.similarity_search("x", k=10)) == ["b", "c"]


def test_milvus_filters_dynamic_fields_too(tmp_path):
    from langchain_milvus import Milvus

    store = Milvus(EMB, connection_args={"uri": str(tmp_path / "m.db")}, collection_name="dyn", enable_dynamic_field=True,
                   index_params={"metric_type": "COSINE", "index_type": "FLAT"}, auto_id=False, primary_field="pk")
    store.add_texts(["a", "b", "c"], metadatas=[{"n": 1, "s": "x"}, {"n": 2, "s": "y"}, {"s": "z"}], ids=["a", "b", "c"])
    resource = Resource.from_vectorstore("dyn", store)
    for flt, expected in (({"n": 1}, ["a"]), ({"n": {"$ne": 1}}, ["b", "c"]), ({"s": {"$nin": ["x", "z"]}}, ["b"])):
        found = resource.retrieve("a", search_kwargs={"k": 5, "filter": flt})
        assert sorted(d.id for d in found) == expected
    assert {k: v for k, v in resource.retrieve("a", search_kwargs={"k": 1})[0].metadata.items() if k != "score"} \
        == {"n": 1, "s": "x"}


@pytest.mark.parametrize("backend", ["faiss", "lancedb", "inmemory"])
def test_hybrid_search_takes_the_native_filter_of_its_dense_store(request, backend):
    from rag.retrieval.hybrid import HybridRetriever
    from rag.retrieval.lexical import BM25Index

    docs = [Document(id=f"c{i}", page_content=f"note number {i}", metadata={"rare": i % 500 == 3})
            for i in range(2000)]
    store = build(backend, docs, request.getfixturevalue("tmp_path"), None)
    hybrid = HybridRetriever(vectorstore=store, bm25=BM25Index.from_documents(docs), fetch_k=8)
    found = hybrid.invoke("note", k=4, filter={"rare": True})
    assert {d.id for d in found} == {"c3", "c503", "c1003", "c1503"}
    assert any("dense" in d.metadata.get("scores", {}) for d in found), [d.metadata for d in found]
