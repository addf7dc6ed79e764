"""Evidence aggregation (`aggregate_evidence`, `retrieve(document_evidence=..., page_evidence=...)`)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from rag.base.errors import ConfigError
from rag.compose.resource import Resource
from rag.compose.retrieve import retrieve
from rag.retrieval.aggregation import aggregate_evidence, document_key
from rag.retrieval.lexical import BM25Retriever


def _chunk(doc: str, page: int | None, text: str) -> Document:
    meta = {"doc_id": doc, "chunk_index": abs(hash(text)) % 10_000}
    if page is not None:
        meta["page"] = page
    return Document(page_content=text, id=text, metadata=meta)


def test_a_document_with_several_good_chunks_passes_a_lone_look_alike():
    scored = [(_chunk("other", 1, "look-alike"), 1.0), (_chunk("gold", 4, "answer"), 0.9),
              (_chunk("gold", 5, "context"), 0.85), (_chunk("gold", 6, "more"), 0.8), (_chunk("x", 1, "noise"), 0.0)]
    assert [d.id for d, _ in aggregate_evidence(scored)] == [d.id for d, _ in scored]    # weights 0: no change
    assert [d.id for d, _ in aggregate_evidence(scored, document_weight=0.5)][:2] == ["answer", "context"]


def test_a_page_with_several_good_chunks_lifts_its_weaker_chunk():
    scored = [(_chunk("d", 1, "lone"), 1.0), (_chunk("d", 2, "title"), 0.95), (_chunk("d", 3, "x"), 0.7),
              (_chunk("d", 2, "table"), 0.6), (_chunk("d", 4, "y"), 0.0)]
    order = [d.id for d, _ in aggregate_evidence(scored, page_weight=0.5)]
    assert order.index("table") < order.index("x")


@settings(max_examples=60, deadline=None)
@given(scores=st.lists(st.floats(0, 10, allow_nan=False), min_size=0, max_size=30),
       pages=st.lists(st.integers(0, 3), min_size=30, max_size=30),
       page_weight=st.floats(0, 2), document_weight=st.floats(0, 2), depth=st.integers(1, 40), top=st.integers(1, 5))
def test_only_the_order_of_the_top_depth_changes(scores, pages, page_weight, document_weight, depth, top):
    scored = sorted(((_chunk(f"d{p % 2}", p, f"c{i}"), s) for i, (s, p) in enumerate(zip(scores, pages))),
                    key=lambda pair: -pair[1])
    out = aggregate_evidence(scored, page_weight=page_weight, document_weight=document_weight, depth=depth, top=top)
    assert sorted(d.id for d, _ in out) == sorted(d.id for d, _ in scored)
    assert [d.id for d, _ in out[depth:]] == [d.id for d, _ in scored[depth:]]
    assert [s for _, s in out] == sorted((s for _, s in out), reverse=True)


@settings(max_examples=40, deadline=None)
@given(scores=st.lists(st.floats(0, 10, allow_nan=False), min_size=2, max_size=20), weight=st.floats(0.01, 3))
def test_one_document_holding_every_candidate_keeps_its_order(scores, weight):
    scored = sorted(((_chunk("only", None, f"c{i}"), s) for i, s in enumerate(scores)), key=lambda pair: -pair[1])
    out = aggregate_evidence(scored, document_weight=weight)
    assert [d.id for d, _ in out] == [d.id for d, _ in scored]


@pytest.mark.parametrize(("kwargs", "message"), [({"page_weight": -1}, "page_weight must be a number >= 0"),
                                                 ({"document_weight": True}, "document_weight must be a number"),
                                                 ({"depth": 0}, "depth must be a positive integer"),
                                                 ({"top": 1.5}, "top must be a positive integer")])
def test_bad_settings_are_rejected_with_the_value(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        aggregate_evidence([], **kwargs)


def test_document_key_falls_back_from_doc_id_to_name_to_source_to_the_chunk():
    assert document_key(Document(page_content="x", metadata={"doc_id": "a", "doc_name": "b"})) == "a"
    assert document_key(Document(page_content="x", metadata={"doc_name": "b", "source": "c"})) == "b"
    assert document_key(Document(page_content="x", metadata={"source": "c"})) == "c"
    assert document_key(Document(page_content="x")) != document_key(Document(page_content="y"))


def test_retrieve_applies_document_evidence_and_records_the_stage():
    manual = [Document(page_content=t, id=f"m{i}", metadata={"doc_id": "manual", "chunk_index": i})
              for i, t in enumerate(["compare two files line by line and show the lines", "compare files by line",
                                     "compare files, ignoring case", "the lines of files"])]
    other = [Document(page_content="compare files line by line", id="o0",
                      metadata={"doc_id": "other", "chunk_index": 0})]
    resource = Resource.from_retriever("docs", BM25Retriever.from_documents(manual + other))
    off = {"page_evidence": 0, "document_evidence": 0}
    plain = retrieve("compare files line by line", resource, k=5, max_tokens=None, page_diversity=0, **off)
    assert plain.context[0].id == "o0"
    smoothed = retrieve("compare files line by line", resource, k=5, max_tokens=None, page_diversity=0,
                        page_evidence=0, document_evidence=1.0)
    assert smoothed.context[0].metadata["doc_id"] == "manual"
    assert "evidence" in smoothed.stages and "evidence" in smoothed.timings
    assert "evidence" not in plain.stages
    assert smoothed.context[0].metadata["scores"]["evidence"] > 1.0
    with pytest.raises(ValueError, match="document_evidence"):
        retrieve("compare", resource, document_evidence=-0.5)
