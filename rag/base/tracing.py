"""OpenTelemetry traces of queries and indexing runs, built on LangChain's callback system.

Off by default: no handler, no span, nothing but one environment lookup per LangChain run. It
is switched on by the environment (`RAG_TRACING=1`) or by `enable_tracing()` (what a config's
`tracing: {enabled: true}` does in `rag serve` and `rag index`). Spans go to OpenTelemetry's
global tracer provider, so the operator's usual SDK setup (an OTLP exporter, say) receives them.

```
query    chat.completions ─► ConversationalRAG ─► retrieve ─► condense (─► chat <model>)
                 │                    │                    └► resources ─► <resource> ..., aggregate
                 │                    └► generate ─► chat <model>
                 └► checks
retrieve() search ─► search/<resource> ... ─► fuse ─► rerank ─► select ─► budget
indexing rag.index ─► rag.index.load (per file) ─► rag.index.chunk ─► rag.index.embed ─► rag.index.write
```

`OpenTelemetryCallbackHandler` turns LangChain runs into spans (a run's parent run is its
span's parent), so LangChain's own tracing (LangSmith and others) keeps working beside it.
Plumbing runs (`RunnableSequence`, `RunnableParallel`, prompts, output parsers) get no span of
their own; their children attach to the nearest traced ancestor. Attributes are what an
operator needs: `rag.resource`, `rag.k`, `rag.filter` (present or not), `rag.documents`
(returned), `gen_ai.request.model`, `gen_ai.usage.input_tokens` / `output_tokens`,
`rag.cache_hits`. The question, the answer and document text are never recorded unless the
operator sets `RAG_TRACING_CONTENT=1` (or `enable_tracing(capture_content=True)`): then
`rag.question` and `rag.answer` are added.

Code that is not a runnable reports stages with `stage()` (a child run of the current run, so
the handler and any other tracer see it; `rag.base.stages`) and `index_span()` (indexing, a plain
span); code below a stage reports to it with `note_stage()`.

Example:
    >>> from langchain_core.runnables import RunnableLambda
    >>> handler = OpenTelemetryCallbackHandler()        # uses the global tracer provider
    >>> RunnableLambda(lambda q: q.upper(), name="shout").invoke("hi", {"callbacks": [handler]})
    'HI'
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.documents import Document
from langchain_core.outputs import LLMResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tracers.context import register_configure_hook
from langchain_core.utils.env import env_var_is_set

from rag.base.llm_calls import call_usage, requested_model
from rag.base.stages import Stage, note_stage, stage  # noqa: F401  (part of this module's interface)

__all__ = [
    "TRACING_CONTENT_ENV",
    "TRACING_ENV",
    "OpenTelemetryCallbackHandler",
    "Stage",
    "disable_tracing",
    "enable_tracing",
    "index_span",
    "note_stage",
    "set_run_attributes",
    "stage",
    "tracing_callbacks",
    "tracing_enabled",
]

TRACING_ENV = "RAG_TRACING"
TRACING_CONTENT_ENV = "RAG_TRACING_CONTENT"
_SCALARS = (str, bool, int, float)
_PLUMBING_PREFIXES = ("Runnable", "RunnableSequence", "RunnableParallel")
_PLUMBING_SUFFIXES = ("PromptTemplate", "OutputParser", "Parser")


@dataclass
class _State:
    enabled: bool = False
    capture_content: bool = False
    handler: OpenTelemetryCallbackHandler | None = None
    provider: Any = None


_STATE = _State()
# Read by LangChain's configure hook: set in a context, or RAG_TRACING in the environment, adds the handler
# to every run (the hook does not add a second one when a run already has one).
_HOOK_VAR: ContextVar[OpenTelemetryCallbackHandler | None] = ContextVar("rag_tracing_handler", default=None)


def tracing_enabled() -> bool:
    """True when spans are emitted: `enable_tracing()` was called or `RAG_TRACING` is set."""
    return _STATE.enabled or env_var_is_set(TRACING_ENV)


def _capture_content() -> bool:
    return _STATE.capture_content or env_var_is_set(TRACING_CONTENT_ENV)


def enable_tracing(*, capture_content: bool = False, tracer_provider: Any = None) -> OpenTelemetryCallbackHandler:
    """Switch traces on for this process; returns the shared handler.

    Args:
        capture_content: also record the question and the answer (never document text).
        tracer_provider: where spans go; None uses OpenTelemetry's global provider.
    """
    _STATE.enabled = True
    _STATE.capture_content = capture_content
    _STATE.provider = tracer_provider
    _STATE.handler = OpenTelemetryCallbackHandler(tracer_provider=tracer_provider, capture_content=capture_content)
    _HOOK_VAR.set(_STATE.handler)
    return _STATE.handler


def disable_tracing() -> None:
    """Undo `enable_tracing()` (the environment variable, if set, still applies)."""
    _STATE.enabled = False
    _STATE.capture_content = False
    _STATE.handler = None
    _STATE.provider = None
    _HOOK_VAR.set(None)


def tracing_callbacks() -> list[BaseCallbackHandler]:
    """The handler to add to a run's callbacks when `enable_tracing()` is on, else `[]`.

    Servers add it to each request's config: their requests run in threads and tasks that do
    not see the context where `enable_tracing()` was called.
    """
    return [_STATE.handler] if _STATE.enabled and _STATE.handler is not None else []


def _tracer(provider: Any = None) -> Any:
    from opentelemetry import trace

    return trace.get_tracer("rag", tracer_provider=provider or _STATE.provider)


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
        self.tracer = _tracer(tracer_provider)
        self.capture_content = _capture_content() if capture_content is None else capture_content
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
        span = self.tracer.start_span(name, context=context, attributes=_clean(attributes))
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
            span.set_attributes(_clean(attributes))
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
            span.set_attributes(_clean(attributes))

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


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
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


def set_run_attributes(config: RunnableConfig | None, **attributes: Any) -> None:
    """Add attributes to the span of the run whose config this is (inside a `RunnableLambda`).

    Does nothing when the run has no `OpenTelemetryCallbackHandler`.
    """
    callbacks = (config or {}).get("callbacks")
    if not isinstance(callbacks, BaseCallbackManager) or callbacks.parent_run_id is None:
        return
    for handler in callbacks.handlers:
        if isinstance(handler, OpenTelemetryCallbackHandler):
            handler.set_attributes(callbacks.parent_run_id, {f"rag.{k}": v for k, v in attributes.items()})


class _NoSpan:
    """What `index_span` yields when tracing is off: attribute calls do nothing."""

    def set_attribute(self, key: str, value: Any) -> None:
        return None

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        return None


_NO_SPAN = _NoSpan()


@contextlib.contextmanager
def index_span(name: str, *, parent: Any = None, **attributes: Any) -> Iterator[Any]:
    """A span for an indexing step (`rag.index.*`), or a no-op when tracing is off.

    Args:
        name: the span name.
        parent: a span to attach to (for work handed to another thread); default the current one.
        **attributes: scalar attributes (counts, names; never text), recorded as `rag.<name>`.
    """
    if not tracing_enabled():
        yield _NO_SPAN
        return
    from opentelemetry import trace

    context = trace.set_span_in_context(parent) if parent is not None and parent is not _NO_SPAN else None
    start = _clean({f"rag.{k}": v for k, v in attributes.items()})
    # OpenTelemetry would record the exception's message and stack trace (file paths, document text):
    # as for every other span, an error records its type only
    from opentelemetry.trace import Status, StatusCode

    with _tracer().start_as_current_span(name, context=context, attributes=start, record_exception=False,
                                         set_status_on_exception=False) as span:
        try:
            yield span
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__name__)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise


register_configure_hook(_HOOK_VAR, True, OpenTelemetryCallbackHandler, TRACING_ENV)
