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

`OpenTelemetryCallbackHandler` (`rag.base.otel_handler`) turns LangChain runs into spans (a run's parent run is its
span's parent), so LangChain's own tracing (LangSmith and others) keeps working beside it.
Plumbing runs (`RunnableSequence`, `RunnableParallel`, prompts, output parsers) get no span of
their own; their children attach to the nearest traced ancestor. Attributes are what an
operator needs: `rag.resource`, `rag.k`, `rag.filter` (present or not), `rag.documents`
(returned), `gen_ai.request.model`, `gen_ai.usage.input_tokens` / `output_tokens`,
`rag.cache_hits`. The question, the answer and document text are never recorded unless the
operator sets `RAG_TRACING_CONTENT=1` (or `enable_tracing(capture_content=True)`): then
`rag.question` and `rag.answer` are added.

Code that is not a runnable reports stages with `stage()` (a child run of the current run, so
the handler and any other tracer see it) and `index_span()` (indexing, a plain span).

Example:
    >>> from langchain_core.runnables import RunnableLambda
    >>> handler = OpenTelemetryCallbackHandler()        # uses the global tracer provider
    >>> RunnableLambda(lambda q: q.upper(), name="shout").invoke("hi", {"callbacks": [handler]})
    'HI'
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import (
    ensure_config,
    get_callback_manager_for_config,
    patch_config,
    var_child_runnable_config,
)
from langchain_core.tracers.context import register_configure_hook
from langchain_core.utils.env import env_var_is_set

from rag.base.otel_handler import STATE, TRACING_CONTENT_ENV, OpenTelemetryCallbackHandler, clean, tracer

__all__ = [
    "TRACING_CONTENT_ENV",
    "TRACING_ENV",
    "OpenTelemetryCallbackHandler",
    "Stage",
    "disable_tracing",
    "enable_tracing",
    "index_span",
    "set_run_attributes",
    "stage",
    "tracing_callbacks",
    "tracing_enabled",
]

TRACING_ENV = "RAG_TRACING"

# Read by LangChain's configure hook: set in a context, or RAG_TRACING in the environment, adds the handler
# to every run (the hook does not add a second one when a run already has one).
_HOOK_VAR: ContextVar[OpenTelemetryCallbackHandler | None] = ContextVar("rag_tracing_handler", default=None)


def tracing_enabled() -> bool:
    """True when spans are emitted: `enable_tracing()` was called or `RAG_TRACING` is set."""
    return STATE.enabled or env_var_is_set(TRACING_ENV)


def enable_tracing(*, capture_content: bool = False, tracer_provider: Any = None) -> OpenTelemetryCallbackHandler:
    """Switch traces on for this process; returns the shared handler.

    Args:
        capture_content: also record the question and the answer (never document text).
        tracer_provider: where spans go; None uses OpenTelemetry's global provider.
    """
    STATE.enabled = True
    STATE.capture_content = capture_content
    STATE.provider = tracer_provider
    STATE.handler = OpenTelemetryCallbackHandler(tracer_provider=tracer_provider, capture_content=capture_content)
    _HOOK_VAR.set(STATE.handler)
    return STATE.handler


def disable_tracing() -> None:
    """Undo `enable_tracing()` (the environment variable, if set, still applies)."""
    STATE.enabled = False
    STATE.capture_content = False
    STATE.handler = None
    STATE.provider = None
    _HOOK_VAR.set(None)


def tracing_callbacks() -> list[BaseCallbackHandler]:
    """The handler to add to a run's callbacks when `enable_tracing()` is on, else `[]`.

    Servers add it to each request's config: their requests run in threads and tasks that do
    not see the context where `enable_tracing()` was called.
    """
    return [STATE.handler] if STATE.enabled and STATE.handler is not None else []


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


@dataclass
class Stage:
    """A stage in progress: `config` for the work inside it, `attributes` reported when it ends."""

    config: RunnableConfig
    attributes: dict[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def stage(name: str, config: RunnableConfig | None = None, **attributes: Any) -> Iterator[Stage]:
    """Run a block as a child run named `name` of the current run (or of `config`'s).

    Callback handlers (this module's, LangSmith, ...) see it as a chain run; its outputs are
    `{"rag_attributes": {...}}`, scalars only. Without any handler it only yields the config.

    Example:
        >>> with stage("fuse", k=4) as s:
        ...     s.attributes["documents"] = 3
    """
    config = ensure_config(config)
    manager = get_callback_manager_for_config(config)
    if not manager.handlers:
        yield Stage(config, dict(attributes))
        return
    run = manager.on_chain_start(None, {}, name=name)
    current = Stage(patch_config(config, callbacks=run.get_child()), dict(attributes))
    token = var_child_runnable_config.set(current.config)
    try:
        yield current
    except BaseException as exc:
        run.on_chain_error(exc)
        raise
    else:
        run.on_chain_end({"rag_attributes": clean(current.attributes)})
    finally:
        var_child_runnable_config.reset(token)


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
    start = clean({f"rag.{k}": v for k, v in attributes.items()})
    # OpenTelemetry would record the exception's message and stack trace (file paths, document text):
    # as for every other span, an error records its type only
    from opentelemetry.trace import Status, StatusCode

    with tracer().start_as_current_span(name, context=context, attributes=start, record_exception=False,
                                         set_status_on_exception=False) as span:
        try:
            yield span
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__name__)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise


register_configure_hook(_HOOK_VAR, True, OpenTelemetryCallbackHandler, TRACING_ENV)
