"""Traces of server requests: the span tree of one chat completion, and no question or document text in it."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import GenericFakeChatModel
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag.base.tracing import disable_tracing, enable_tracing
from rag.compose.generator import RAG
from rag.compose.resource import Resource
from rag.generation.rag_with_source import rag_chain_from_docs
from tests.unit.spans import span_attributes, span_tree

ROOT = Path(__file__).parents[3]


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    enable_tracing(tracer_provider=provider)
    yield exporter
    disable_tracing()


def test_chat_completion_request_is_one_trace_with_a_span_per_stage(exporter, make_client, make_rag):
    client = make_client(make_rag(), tenant_filter={"tenant": "acme"})
    r = client.post("/v1/chat/completions", json={"model": "rag", "stream": True,
                                                  "messages": [{"role": "user", "content": "How did revenue change?"}]})
    assert r.status_code == 200
    assert span_tree(exporter, siblings="name") == [
        (0, "chat.completions"),
        (1, "ConversationalRAG"),
        # the RAG's own chain on the standalone question: extras included
        (2, "condense_question"), (3, "condense"),
        (2, "extras"), (3, "count_docs"),
        (2, "generate"), (3, "chat generic-fake-chat-model"),
        (2, "retrieve"), (3, "resources"), (4, "aggregate"), (5, "budget"), (5, "diversify"), (5, "evidence"), (5, "fuse"),
        (5, "select"), (4, "reports"), (5, "search/reports"),
        (2, "save_turn"),
        (1, "checks"),
    ]
    root = span_attributes(exporter, "chat.completions")
    assert root["rag.model"] == "rag" and root["rag.stream"] is True and root["rag.documents"] == 2
    assert root["rag.completion_tokens"] > 0
    assert span_attributes(exporter, "reports") == {"rag.run_type": "chain", "rag.resource": "reports", "rag.k": 4,
                                          "rag.filter": True, "rag.documents": 2}    # the tenant filter
    assert span_attributes(exporter, "chat generic-fake-chat-model")["gen_ai.request.model"] == "generic-fake-chat-model"
    assert span_attributes(exporter, "checks")["rag.sentences"] == 1


def test_invoke_requests_are_traced_too(exporter, client):
    assert client.post("/invoke", json={"question": "revenue", "k": 1}).status_code == 200
    names = [name for _, name in span_tree(exporter, siblings="name")]
    assert names[0] == "rag-serve" and "reports" in names and "generate" in names


def test_no_request_no_trace_when_tracing_is_off(make_client):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    enable_tracing(tracer_provider=provider)
    disable_tracing()
    client = make_client()
    assert client.post("/v1/chat/completions", json={"model": "rag", "messages": [
        {"role": "user", "content": "revenue"}]}).status_code == 200
    assert exporter.get_finished_spans() == ()


_WORD = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz"), min_size=4, max_size=8)
_SENTENCE = st.lists(_WORD, min_size=3, max_size=5).map(lambda ws: " ".join(ws))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=_SENTENCE, earlier=_SENTENCE, texts=st.lists(_SENTENCE, min_size=1, max_size=3, unique=True))
def test_no_span_attribute_holds_the_conversation_or_document_text(exporter, make_client, question, earlier, texts):
    exporter.clear()
    resource = Resource.from_texts("notes", texts, embedding=DeterministicFakeEmbedding(size=16))
    rag = RAG(resources=[resource], generation_chain=rag_chain_from_docs(
        GenericFakeChatModel(messages=itertools.cycle([texts[0] + " [1]."]))))
    client = make_client(rag)
    messages = [{"role": "user", "content": earlier}, {"role": "assistant", "content": "ok"},
                {"role": "user", "content": question}]
    assert client.post("/v1/chat/completions", json={"model": "rag", "messages": messages}).status_code == 200
    values = [str(v) for s in exporter.get_finished_spans() for v in s.attributes.values()]
    assert len(values) > 20
    for secret in [question, earlier, *texts]:
        assert not any(secret in v for v in values)


def test_the_serving_docs_openai_example_runs(capsys):
    pytest.importorskip("langchain_openai")
    text = (ROOT / "docs" / "serving.md").read_text()
    code = re.search(r"<!-- openai-example -->\n```python\n(.*?)```", text, re.S).group(1)
    exec(compile(code, "docs/serving.md", "exec"), {})     # the documented example, as written
    out = capsys.readouterr().out
    assert "Lyon" in out and "acme.md" in out and "2023" in out
