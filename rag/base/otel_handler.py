"""The LangChain callback handler that turns runs into OpenTelemetry spans, and the switch it reads.

`rag.base.tracing` is the public face (switching traces on and off, `stage`, `set_run_attributes`,
`index_span`); this module holds what records a span: `OpenTelemetryCallbackHandler` (a run's parent
run is its span's parent; plumbing runs get no span; scalar attributes only, never text unless content
capture is on) and the process's tracing state (`STATE`) that `enable_tracing()` sets.

Example:
    >>> from langchain_core.runnables import RunnableLambda
    >>> RunnableLambda(lambda q: q.upper(), name="shout").invoke("hi", {"callbacks": [OpenTelemetryCallbackHandler()]})
    'HI'
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.outputs import LLMResult
from langchain_core.utils.env import env_var_is_set

from rag.base.llm_calls import call_usage, requested_model

__all__ = ["AUDIT_KEYS", "MAX_IDS_CHARS", "STATE", "TRACING_CONTENT_ENV", "OpenTelemetryCallbackHandler",
           "TracingState", "clean", "content_captured", "tracer"]

TRACING_CONTENT_ENV = "RAG_TRACING_CONTENT"
_SCALARS = (str, bool, int, float)
_PLUMBING_PREFIXES = ("Runnable", "RunnableSequence", "RunnableParallel")
_PLUMBING_SUFFIXES = ("PromptTemplate", "OutputParser", "Parser")


@dataclass
class TracingState:
    """The process's tracing switch (`rag.base.tracing.enable_tracing` / `disable_tracing` set it)."""

    enabled: bool = False
    capture_content: bool = False
    handler: OpenTelemetryCallbackHandler | None = None
    provider: Any = None


STATE = TracingState()


def content_captured() -> bool:
    """Whether the question and the answer are recorded (`enable_tracing(capture_content=True)` or the env)."""
    return STATE.capture_content or env_var_is_set(TRACING_CONTENT_ENV)


def tracer(provider: Any = None) -> Any:
    """rag's OpenTelemetry tracer (on `provider`, else the one `enable_tracing` was given, else the global one)."""
    from opentelemetry import trace

    return trace.get_tracer("rag", tracer_provider=provider or STATE.provider)


def _is_plumbing(name: str) -> bool:
    return name.startswith(_PLUMBING_PREFIXES) or name.endswith(_PLUMBING_SUFFIXES)


def _question(inputs: Any) -> str | None:
    if isinstance(inputs, str):
        return inputs
    if isinstance(inputs, Mapping):
        value = inputs.get("question") or inputs.get("input")
        return value if isinstance(value, str) else None
    return None


class OpenTelemetryCallbackHandler(BaseCallbackHandler):
    """Turns LangChain runs into OpenTelemetry spans (see the module docstring).

    Args:
        tracer_provider: where spans go; None uses OpenTelemetry's global provider.
        capture_content: record `rag.question` / `rag.answer`; None reads `RAG_TRACING_CONTENT`.
    """

    run_inline = True  # spans start and end in the run's own thread, in order

    def __init__(self, *, tracer_provider: Any = None, capture_content: bool | None = None) -> None:
        self.tracer = tracer(tracer_provider)
        self.capture_content = content_captured() if capture_content is None else capture_content
        self._lock = threading.Lock()
        self._spans: dict[UUID, Any] = {}
        self._alias: dict[UUID, UUID | None] = {}  # a run without a span -> its nearest traced ancestor

    # ------------------------------------------------------------------ span bookkeeping
    def _parent(self, parent_run_id: UUID | None) -> Any:
        with self._lock:
            while parent_run_id is not None and parent_run_id not in self._spans:
                parent_run_id = self._alias.get(parent_run_id)
            return self._spans.get(parent_run_id) if parent_run_id is not None else None

    def _start(self, run_id: UUID, parent_run_id: UUID | None, name: str, attributes: dict[str, Any]) -> None:
        from opentelemetry import trace

        if _is_plumbing(name):
            with self._lock:
                self._alias[run_id] = parent_run_id
            return
        parent = self._parent(parent_run_id)
        context = trace.set_span_in_context(parent) if parent is not None else None
        span = self.tracer.start_span(name, context=context, attributes=clean(attributes))
        with self._lock:
            self._spans[run_id] = span

    def _end(self, run_id: UUID, attributes: Mapping[str, Any] | None = None,
             error: BaseException | None = None) -> None:
        with self._lock:
            self._alias.pop(run_id, None)
            span = self._spans.pop(run_id, None)
        if span is None:
            return
        if attributes:
            span.set_attributes(clean(attributes))
        if error is not None:
            from opentelemetry.trace import Status, StatusCode

            # The type only: an exception's message may quote the question or a document.
            span.set_attribute("error.type", type(error).__name__)
            span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        span.end()

    def set_attributes(self, run_id: UUID, attributes: Mapping[str, Any]) -> None:
        """Add attributes to the span of a run that is still open (see `set_run_attributes`)."""
        with self._lock:
            span = self._spans.get(run_id)
        if span is not None:
            span.set_attributes(clean(attributes))

    # ------------------------------------------------------------------ chains and retrievers
    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *, run_id: UUID,
                       parent_run_id: UUID | None = None, metadata: dict[str, Any] | None = None,
                       **kwargs: Any) -> None:
        name = kwargs.get("name") or (serialized or {}).get("name") or "chain"
        attributes: dict[str, Any] = {"rag.run_type": "chain"}
        question = _question(inputs)
        if self.capture_content and question is not None and parent_run_id is None:
            attributes["rag.question"] = question
        if parent_run_id is None:   # who asked, on which route (`rag serve` puts them in the run's metadata)
            attributes.update({key: (metadata or {})[key] for key in AUDIT_KEYS if key in (metadata or {})})
        self._start(run_id, parent_run_id, str(name), attributes)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, _output_attributes(outputs, self.capture_content))

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, error=error)

    def on_retriever_start(self, serialized: dict[str, Any] | None, query: str, *, run_id: UUID,
                           parent_run_id: UUID | None = None, metadata: dict[str, Any] | None = None,
                           **kwargs: Any) -> None:
        meta = metadata or {}
        name = kwargs.get("name") or (serialized or {}).get("name") or "retriever"
        self._start(run_id, parent_run_id, str(name), {
            "rag.run_type": "retriever", "rag.retriever": meta.get("ls_retriever_name"),
            "db.system": meta.get("ls_vector_store_provider"), "rag.embedding": meta.get("ls_embedding_provider")})

    def on_retriever_end(self, documents: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, {"rag.documents": len(documents)})

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, error=error)

    # ------------------------------------------------------------------ models
    def on_chat_model_start(self, serialized: dict[str, Any] | None, messages: Any, *, run_id: UUID,
                            parent_run_id: UUID | None = None, metadata: dict[str, Any] | None = None,
                            **kwargs: Any) -> None:
        meta = metadata or {}
        model = requested_model(serialized, meta, kwargs.get("invocation_params")) or "model"
        self._start(run_id, parent_run_id, f"chat {model}", {
            "rag.run_type": "llm", "gen_ai.operation.name": "chat", "gen_ai.request.model": model,
            "gen_ai.system": meta.get("ls_provider"), "gen_ai.request.temperature": meta.get("ls_temperature"),
            "gen_ai.request.max_tokens": meta.get("ls_max_tokens")})

    def on_llm_start(self, serialized: dict[str, Any] | None, prompts: list[str], *, run_id: UUID,
                     parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self.on_chat_model_start(serialized, prompts, run_id=run_id, parent_run_id=parent_run_id, **kwargs)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        usage, model = call_usage(response)
        self._end(run_id, {"gen_ai.usage.input_tokens": usage["input_tokens"],
                           "gen_ai.usage.output_tokens": usage["output_tokens"], "gen_ai.response.model": model})

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, error=error)


#: Run metadata a root span records: the principal and route of a `rag serve` request (rag.server.audit).
AUDIT_KEYS = ("rag.principal", "rag.route")
#: The longest `rag.document_ids` attribute (the ids of the documents in a context, comma-separated).
MAX_IDS_CHARS = 4000


def clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Only scalar, non-None values (what OpenTelemetry accepts)."""
    return {k: v for k, v in attributes.items() if isinstance(v, _SCALARS)}


def _output_attributes(outputs: Any, capture_content: bool) -> dict[str, Any]:
    """Counts from a run's output (never its text, unless content capture is on for the answer)."""
    if isinstance(outputs, list) and outputs and all(isinstance(d, Document) for d in outputs):
        return {"rag.documents": len(outputs)}
    if not isinstance(outputs, Mapping):
        return {}
    attributes = {f"rag.{k}": v for k, v in (outputs.get("rag_attributes") or {}).items()}
    context = outputs.get("context")
    if isinstance(context, list):
        attributes["rag.documents"] = len(context)
        ids = dict.fromkeys(str(d.metadata.get("doc_id") or d.metadata.get("source") or "") for d in context
                            if isinstance(d, Document))
        attributes["rag.document_ids"] = ",".join(i for i in ids if i)[:MAX_IDS_CHARS]
    if capture_content and isinstance(outputs.get("answer"), str):
        attributes["rag.answer"] = outputs["answer"]
    return attributes



