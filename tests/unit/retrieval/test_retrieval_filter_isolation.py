"""Tenant isolation is a property of the whole pipeline, not of the search alone.

For generated corpora (documents whose chunks carry different values of the filtered keys, as a
knowledge base's do when documents share a `source` or a PDF has pages), generated portable
filters and every retrieval setting (neighbour expansion, RSE, named sections, routing, page
diversity, several resources with a filter each), every piece of text that reaches the context
comes from a chunk that matches its resource's filter, and a route reports only such documents.
The pipeline is driven through its public entries only: `rag.retrieve` and `RAG(...).chain()`.

The lexical side runs through both indexes: the in-process `BM25Index` (kinds ``bm25``, ``hybrid``)
and the engine's SQLite FTS5 index with the filter inside its SQL (``fts``, ``fts-hybrid``; a real
knowledge base searches it too).

Every chunk's text holds a marker (``zq<doc>x<index>``), so text merged from neighbours or
segments is traced back to the chunks it came from.
"""

from __future__ import annotations

import re
import tempfile
import uuid
from pathlib import Path
from typing import Any

import chromadb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_chroma import Chroma
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag import retrieve
from rag.base.filters import matches
from rag.compose.generator import RAG
from rag.compose.resource import Resource
from rag.retrieval.hybrid import HybridRetriever
from rag.retrieval.lexical import BM25Index, BM25Retriever
from rag.retrieval.routing import DocumentRouter
from rag.retrieval.sections import SectionRouter
from rag.stores.fts_index import FTSIndex

MARKER = re.compile(r"zq(\d+)x(\d+)")
WORDS = ["revenue", "costs", "growth", "risk", "tenant", "margin", "cash", "debt"]
SECTIONS = ["Revenue", "Costs", "Risk"]
TENANTS = ["acme", "globex"]
_CLIENT = chromadb.EphemeralClient()
_EMBEDDING = DeterministicFakeEmbedding(size=16)


@st.composite
def corpora(draw: st.DrawFn) -> list[Document]:
    """Documents of 1-8 chunks; page, tenant and section vary from chunk to chunk within a document."""
    chunks = []
    for d in range(draw(st.integers(1, 4))):
        source = f"file{draw(st.integers(0, 2))}.md"   # documents may share a source
        for i in range(draw(st.integers(1, 8))):
            section = draw(st.sampled_from(SECTIONS))
            body = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6)))
            chunks.append(Document(
                page_content=f"{section}\nzq{d}x{i} {body}",
                metadata={"doc_id": f"d{d}", "chunk_index": i, "source": source, "title": f"Report {source}",
                          "page": draw(st.integers(0, 2)), "tenant": draw(st.sampled_from(TENANTS)),
                          "section": section}))
    return chunks


_conditions = st.one_of(
    st.builds(lambda v: {"page": v}, st.integers(0, 2)),
    st.builds(lambda v: {"tenant": v}, st.sampled_from(TENANTS)),
    st.builds(lambda v: {"section": {"$in": v}}, st.lists(st.sampled_from(SECTIONS), min_size=1, max_size=2)),
    st.builds(lambda v: {"page": {"$gte": v}}, st.integers(0, 2)),
    st.builds(lambda v: {"page": {"$ne": v}}, st.integers(0, 2)),
    st.builds(lambda v: {"tenant": {"$nin": [v]}}, st.sampled_from(TENANTS)),
)
filters = st.recursive(_conditions, lambda inner: st.one_of(
    st.builds(lambda a, b: {"$and": [a, b]}, inner, inner),
    st.builds(lambda a, b: {"$or": [a, b]}, inner, inner),
    st.builds(lambda a: {"$not": a}, inner)), max_leaves=3)


@st.composite
def pipeline_settings(draw: st.DrawFn, chunks: list[Document]) -> dict[str, Any]:
    chosen: dict[str, Any] = {"k": draw(st.integers(1, 6)), "fetch_k": draw(st.integers(1, 20)),
                              "max_tokens": None, "token_counter": "approx"}
    select = draw(st.sampled_from(["top_k", "expand", "rse"]))
    if select == "expand":
        chosen["expand"] = draw(st.integers(1, 3))
    elif select == "rse":
        chosen["rse"] = draw(st.sampled_from(["balanced", "precision", "find_all"]))
    if draw(st.booleans()):
        chosen["sections"] = SectionRouter(chunks, min_score=0.1)
        chosen["section_at"] = draw(st.integers(0, 2))
    if draw(st.booleans()):
        chosen["router"] = DocumentRouter.from_documents(chunks, key="source", fields=["source", "title"])
        chosen["routing"] = draw(st.sampled_from(["filter", "boost", "both"]))
    if draw(st.booleans()):
        chosen["page_diversity"] = 0.3
    chosen["page_evidence"] = draw(st.sampled_from([0.0, 0.2, 1.0]))
    chosen["document_evidence"] = draw(st.sampled_from([0.0, 0.1, 1.0]))
    return chosen


KINDS = ["bm25", "chroma", "hybrid", "fts", "fts-hybrid"]


def _fts(chunks: list[Document]) -> FTSIndex:
    index = FTSIndex(Path(tempfile.mkdtemp(prefix="iso-fts-")) / "lexical.sqlite")
    index.add([f"{c.metadata['doc_id']}-{c.metadata['chunk_index']}" for c in chunks],
              [c.page_content for c in chunks], [c.metadata for c in chunks])
    return index


def _resource(kind: str, name: str, chunks: list[Document]) -> Resource:
    if kind == "bm25":
        return Resource.from_retriever(name, BM25Retriever.from_documents(chunks))
    if kind == "fts":
        return Resource.from_retriever(name, BM25Retriever(index=_fts(chunks)))
    store = Chroma(client=_CLIENT, collection_name=f"iso-{uuid.uuid4().hex}", embedding_function=_EMBEDDING,
                   collection_metadata={"hnsw:space": "cosine"})
    store.add_documents(chunks, ids=[f"{c.metadata['doc_id']}-{c.metadata['chunk_index']}" for c in chunks])
    if kind == "chroma":
        return Resource.from_retriever(name, store.as_retriever())
    bm25 = _fts(chunks) if kind == "fts-hybrid" else BM25Index.from_documents(chunks)
    return Resource.from_retriever(name, HybridRetriever(vectorstore=store, bm25=bm25))


def _assert_isolated(context: list[Document], chunks: list[Document], allowed: dict[str, dict[str, Any]]) -> None:
    """Every marker in the context names a chunk matching the filter of the resource it came from."""
    by_marker = {f"zq{c.metadata['doc_id'][1:]}x{c.metadata['chunk_index']}": c for c in chunks}
    for doc in context:
        # a chunk promoted by a section router carries no resource tag: it must match every filter
        flts = [allowed[doc.metadata["resource"]]] if "resource" in doc.metadata else list(allowed.values())
        found = MARKER.findall(doc.page_content)
        assert found, doc.page_content
        for d, i in found:
            chunk = by_marker[f"zq{d}x{i}"]
            assert all(matches(chunk.metadata, flt) for flt in flts), (flts, chunk.metadata, doc.metadata)


_slow_ok = [HealthCheck.too_slow, HealthCheck.data_too_large]


@settings(max_examples=80, deadline=None, suppress_health_check=_slow_ok)
@given(data=st.data(), chunks=corpora(), flt=filters, kind=st.sampled_from(KINDS),
       question=st.lists(st.sampled_from(WORDS + SECTIONS), min_size=1, max_size=4).map(" ".join))
def test_retrieve_returns_only_chunks_matching_the_filter(data, chunks, flt, kind, question):
    options = data.draw(pipeline_settings(chunks))
    resource = _resource(kind, "docs", chunks)
    result = retrieve(question, resource, filter=flt, **options)
    _assert_isolated(result.context, chunks, {"docs": flt})
    for segment in result.segments or []:
        assert all(matches(c.metadata, flt) for c in chunks if c.metadata["doc_id"] == segment.doc_id
                   and c.metadata["chunk_index"] in segment.metadata["chunk_indices"])
    route = result.extras.get("route")
    if route is not None:
        visible = {c.metadata["source"] for c in chunks if matches(c.metadata, flt)}
        assert set(route["values"]) <= visible and set(route["scores"]) <= visible, (route, visible)


@settings(max_examples=30, deadline=None, suppress_health_check=_slow_ok)
@given(data=st.data(), chunks=corpora(), first=filters, second=filters,
       question=st.lists(st.sampled_from(WORDS + SECTIONS), min_size=1, max_size=4).map(" ".join))
def test_a_chain_over_several_resources_keeps_each_resource_filter(data, chunks, first, second, question):
    """Two resources over the same chunks, a per-request filter each, through `RAG(...).chain()`."""
    options = data.draw(pipeline_settings(chunks))
    options.pop("router", None), options.pop("routing", None)
    resources = [_resource(data.draw(st.sampled_from(["bm25", "fts"])), "a", chunks), _resource("chroma", "b", chunks)]
    chain = RAG(resources=resources, retrieval=options).chain()
    request = {"a": {"search_kwargs": {"filter": first}}, "b": {"search_kwargs": {"filter": second}}}
    out = chain.invoke(question, config={"configurable": {"retrieval_chain": request}})
    _assert_isolated(out["context"], chunks, {"a": first, "b": second})


def test_the_reported_case_expand_two_with_a_page_filter_returns_page_zero_only():
    """`expand: 2`, `filter: {"page": 0}` on a document whose pages alternate returned page-1 text."""
    chunks = [Document(page_content=f"zq0x{i} revenue growth", metadata={"doc_id": "d0", "chunk_index": i,
                                                                          "source": "a.pdf", "page": i % 2})
              for i in range(6)]
    for kind in KINDS:
        result = retrieve("revenue", _resource(kind, "docs", chunks), filter={"page": 0}, expand=2, k=3,
                          max_tokens=None, token_counter="approx")
        assert result.context
        _assert_isolated(result.context, chunks, {"docs": {"page": 0}})


#: each lexical path a knowledge base can take: FTS5 beside Chroma (the embedded default), the engine's own index
#: (Qdrant's sparse vectors, LanceDB's full-text index, Milvus' BM25 function); FTS5 beside the records (a collection
#: made elsewhere) is the default's index; pgvector's full-text search is checked against a real PostgreSQL in
#: tests/unit/stores/test_pg_lexical.py
ENGINES = ["default", "qdrant", "lancedb", "milvus"]


@pytest.fixture(scope="module", params=ENGINES)
def knowledge_base(request, tmp_path_factory):
    """A real knowledge base on each engine: markdown files whose chunks carry different `section` values."""
    from rag.compose.knowledge_base import KnowledgeBase
    from rag.indexing.chunking import TokenChunker
    from rag.testing.stores import empty_store

    root = tmp_path_factory.mktemp("kbiso")
    corpus = root / "corpus"
    corpus.mkdir()
    for f in range(3):
        body = "\n\n".join(f"# {s}\n\n" + " ".join(f"{s.lower()} {w} file{f}" for w in WORDS) * 3 for s in SECTIONS)
        (corpus / f"report{f}.md").write_text(body)
    store = None if request.param == "default" else empty_store(request.param, _EMBEDDING, root, "iso")
    kb = KnowledgeBase("iso", root / "store", embedding=_EMBEDDING, chunker=TokenChunker.sized(40), store=store)
    kb.add_documents(corpus)
    lexical = {"default": "FTSIndex", "qdrant": "QdrantLexical", "lancedb": "LanceLexical", "milvus": "MilvusLexical"}
    assert type(kb.storage.chunks.lexical).__name__ == lexical[request.param]   # the path this case is meant to check
    return kb


@settings(max_examples=30, deadline=None, suppress_health_check=[*_slow_ok, HealthCheck.function_scoped_fixture])
@given(data=st.data(), section=st.lists(st.sampled_from(SECTIONS), min_size=1, max_size=2),
       search=st.sampled_from(["hybrid", "dense", "bm25"]),
       question=st.lists(st.sampled_from(WORDS + SECTIONS), min_size=1, max_size=4).map(" ".join))
def test_a_knowledge_base_keeps_a_section_filter_in_every_stage(knowledge_base, data, section, search, question):
    chunks = knowledge_base.get_documents()
    assert len({c.metadata.get("section") for c in chunks}) > 1
    flt = {"section": {"$in": section}}
    options = data.draw(pipeline_settings(chunks))
    options.pop("router", None), options.pop("routing", None)
    result = retrieve(question, knowledge_base.as_resource(search=search), filter=flt, **options)
    by_id = {c.id: c for c in chunks}
    for doc in result.context:
        indices = doc.metadata.get("chunk_indices") or [doc.metadata.get("chunk_index")]
        members = [c for c in chunks if c.metadata.get("doc_id") == doc.metadata.get("doc_id")
                   and c.metadata.get("chunk_index") in indices]
        assert members and all(matches(c.metadata, flt) for c in members), (flt, doc.metadata)
        assert all(matches(by_id[d.id].metadata, flt) for d in [doc] if d.id in by_id)
