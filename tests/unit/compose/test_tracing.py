"""OpenTelemetry traces: the span tree of a query, of retrieve() and of an indexing run; off by default."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.config import get_callback_manager_for_config
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag.base.tracing import (
    TRACING_ENV,
    OpenTelemetryCallbackHandler,
    disable_tracing,
    enable_tracing,
    index_span,
    stage,
    tracing_callbacks,
    tracing_enabled,
)
from rag.compose.generator import RAG
from rag.compose.knowledge_base import KnowledgeBase
from rag.compose.resource import Resource
from rag.compose.retrieve import retrieve
from rag.generation.extractive import ExtractiveAnswerer
from rag.generation.rag_with_source import rag_chain_from_docs
from tests.unit.spans import span_tree

TEXTS = ["Paris is in France.", "Rome is in Italy.", "Madrid is in Spain."]


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    exporter.provider = provider  # type: ignore[attr-defined]
    yield exporter
    disable_tracing()


def _span(exporter: InMemorySpanExporter, name: str):
    return next(s for s in exporter.get_finished_spans() if s.name == name)


def _resource(texts=TEXTS) -> Resource:
    return Resource.from_texts("cities", list(texts), metadatas=[{"source": f"c{i}.txt"} for i in range(len(texts))],
                               embedding=DeterministicFakeEmbedding(size=16), search_kwargs={"k": 2})


def test_rag_chain_run_becomes_a_span_tree_with_resource_attributes(exporter):
    handler = OpenTelemetryCallbackHandler(tracer_provider=exporter.provider)
    rag = RAG(resources=[_resource()], generation_chain=rag_chain_from_docs(ExtractiveAnswerer()))
    rag.chain().invoke("Where is Rome?", {"callbacks": [handler],
                                          "configurable": {"retrieval_chain": {"cities": {"search_kwargs": {
                                              "filter": {"source": {"$ne": "x"}}}}}}})
    assert span_tree(exporter) == [(0, "RAG"), (1, "retrieve"), (2, "resources"), (3, "cities"), (4, "search/cities"),
                                   (3, "aggregate"), (4, "fuse"), (4, "evidence"), (4, "diversify"), (4, "select"), (4, "budget"),
                                   (1, "generate"), (2, "answer")]
    resource = dict(_span(exporter, "cities").attributes)
    # the resource's k caps its chunks in the context; its candidates are searched fetch_k deep
    assert resource == {"rag.run_type": "chain", "rag.resource": "cities", "rag.k": 2, "rag.filter": True,
                        "rag.documents": 3}
    assert _span(exporter, "budget").attributes["rag.documents"] == 2


def test_retrieve_stages_are_child_runs_of_the_calling_run(exporter):
    handler = OpenTelemetryCallbackHandler(tracer_provider=exporter.provider)
    both = [_resource(), Resource.from_texts("more", TEXTS[:1], embedding=DeterministicFakeEmbedding(size=16))]
    step = RunnableLambda(lambda q: retrieve(q, both, k=1, max_tokens=50, token_counter="approx"), name="ask")
    step.invoke("Where is Rome?", {"callbacks": [handler]})
    assert span_tree(exporter) == [(0, "ask"), (1, "resources"), (2, "cities"), (3, "search/cities"), (2, "more"),
                                   (3, "search/more"), (2, "aggregate"), (3, "fuse"), (3, "evidence"), (3, "diversify"), (3, "select"),
                                   (3, "budget")]
    search = dict(_span(exporter, "search/cities").attributes)
    assert (search["rag.resource"], search["rag.k"], search["rag.documents"]) == ("cities", 100, 3), search
    assert _span(exporter, "budget").attributes["rag.documents"] == 1


def test_a_failing_stage_ends_its_span_with_the_error_type_only(exporter):
    handler = OpenTelemetryCallbackHandler(tracer_provider=exporter.provider)

    def fail(question: str) -> None:
        with stage("rerank"):
            raise ValueError(f"secret {question}")

    with pytest.raises(ValueError):
        RunnableLambda(fail, name="ask").invoke("my question", {"callbacks": [handler]})
    span = _span(exporter, "rerank")
    assert span.status.status_code.name == "ERROR" and span.attributes["error.type"] == "ValueError"
    assert "my question" not in str(span.status.description)


def test_indexing_run_has_load_chunk_embed_write_spans(exporter, tmp_path):
    enable_tracing(tracer_provider=exporter.provider)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nParis is in France.\n")
    (docs / "b.txt").write_text("Rome is in Italy.\n")
    kb = KnowledgeBase("kb", tmp_path / "kbs", embedding=DeterministicFakeEmbedding(size=16))
    kb.add_documents(docs)
    assert span_tree(exporter) == [(0, "rag.index"), (1, "rag.index.load"), (1, "rag.index.load"), (1, "rag.index.chunk"),
                              (1, "rag.index.embed"), (1, "rag.index.write")]
    root = dict(_span(exporter, "rag.index").attributes)
    assert root["rag.added"] == 2 and root["rag.chunks_added"] == 2 and root["rag.knowledge_base"] == "kb"
    embed = dict(_span(exporter, "rag.index.embed").attributes)
    assert embed["rag.texts"] == 2 and embed["rag.cache_hits"] == 0
    exporter.clear()
    (docs / "c.txt").write_text("Madrid is in Spain.\n")
    kb.add_documents(docs)
    assert [name for _, name in span_tree(exporter)].count("rag.index.load") == 1     # unchanged files are not loaded
    kb.close()


def test_a_failing_indexing_step_records_the_error_type_only(exporter, tmp_path):
    """No exception message, stack trace or file path in an indexing span (the type only)."""
    enable_tracing(tracer_provider=exporter.provider)
    docs = tmp_path / "secret-folder"
    docs.mkdir()
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
    (docs / "ok.txt").write_text("Rome is in Italy.\n")
    kb = KnowledgeBase("kb", tmp_path / "kbs", embedding=DeterministicFakeEmbedding(size=16))
    report = kb.add_documents(docs)
    assert [Path(s.path).name for s in report.skipped] == ["broken.pdf"]
    failed = [s for s in exporter.get_finished_spans() if s.status.status_code.name == "ERROR"]
    assert failed and all(s.attributes["error.type"] for s in failed)
    for span in exporter.get_finished_spans():
        assert not span.events, [e.name for e in span.events]          # no recorded exception, no stack trace
        text = f"{span.status.description} {dict(span.attributes)}"
        assert "secret-folder" not in text and "Traceback" not in text
    kb.close()


def test_off_by_default_no_handler_no_span(exporter, monkeypatch):
    monkeypatch.delenv(TRACING_ENV, raising=False)
    assert not tracing_enabled() and tracing_callbacks() == []
    manager = get_callback_manager_for_config({})
    assert not any(isinstance(h, OpenTelemetryCallbackHandler) for h in manager.handlers)
    with index_span("rag.index") as span:
        span.set_attribute("rag.added", 1)
    RAG(resources=[_resource()], generation_chain=rag_chain_from_docs(ExtractiveAnswerer())).chain().invoke("Rome")
    assert exporter.get_finished_spans() == ()


def test_environment_variable_adds_the_handler_to_every_run(monkeypatch):
    monkeypatch.setenv(TRACING_ENV, "1")
    manager = get_callback_manager_for_config({})
    assert [type(h) for h in manager.handlers if isinstance(h, OpenTelemetryCallbackHandler)] == \
        [OpenTelemetryCallbackHandler]
    monkeypatch.setenv(TRACING_ENV, "false")
    assert not any(isinstance(h, OpenTelemetryCallbackHandler) for h in get_callback_manager_for_config({}).handlers)


def test_enable_tracing_gives_one_shared_handler_for_servers(exporter):
    handler = enable_tracing(tracer_provider=exporter.provider)
    assert tracing_callbacks() == [handler] and tracing_enabled()
    disable_tracing()
    assert tracing_callbacks() == []


_WORDS = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz"), min_size=4, max_size=9)
_SENTENCE = st.lists(_WORDS, min_size=3, max_size=6).map(lambda ws: " ".join(ws) + ".")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=_SENTENCE, texts=st.lists(_SENTENCE, min_size=1, max_size=3, unique=True))
def test_no_span_attribute_holds_the_question_or_document_text(exporter, question, texts):
    exporter.clear()
    handler = OpenTelemetryCallbackHandler(tracer_provider=exporter.provider, capture_content=False)
    rag = RAG(resources=[_resource(texts)], generation_chain=rag_chain_from_docs(ExtractiveAnswerer()))
    out = rag.chain().invoke(question, {"callbacks": [handler]})
    RunnableLambda(lambda q: retrieve(q, rag, k=1, token_counter="approx")).invoke(question, {"callbacks": [handler]})
    values = [str(v) for s in exporter.get_finished_spans() for v in s.attributes.values()]
    assert values
    for secret in [question, *texts, out["answer"]]:
        assert not any(secret in v for v in values if len(secret) > 8)


def test_content_capture_records_question_and_answer_only_when_asked(exporter):
    handler = OpenTelemetryCallbackHandler(tracer_provider=exporter.provider, capture_content=True)
    rag = RAG(resources=[_resource()], generation_chain=rag_chain_from_docs(ExtractiveAnswerer()))
    out = rag.chain().invoke("Where is Rome?", {"callbacks": [handler]})
    root = dict(_span(exporter, "RAG").attributes)
    assert root["rag.question"] == "Where is Rome?" and root["rag.answer"] == out["answer"]
    assert not any(t in str(v) for s in exporter.get_finished_spans() for v in s.attributes.values() for t in TEXTS
                   if t not in out["answer"])


def test_otlp_export_is_only_installed_when_tracing_is_on_and_an_endpoint_is_set(monkeypatch):
    from rag.base.tracing_export import configure_otlp_export

    monkeypatch.delenv(TRACING_ENV, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
    assert configure_otlp_export() is False           # tracing is off
    monkeypatch.setenv(TRACING_ENV, "1")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    assert configure_otlp_export() is False           # nowhere to send spans
