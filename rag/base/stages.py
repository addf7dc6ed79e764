"""Stages of a query that are not runnables: `stage()` runs a block as a child run, `note_stage()` reports to it.

The pipeline runs each of its steps (search, fuse, rerank, ...) in a `stage`, a child run of the current
LangChain run, so `rag.base.tracing`'s handler (and LangSmith, or any other tracer) sees it as a span;
without a handler it costs a context variable. Code below a stage that holds no config (a store's search)
reports what it did to the innermost open stage with `note_stage`: attributes for its span, seconds for
the pipeline's timings (the permission plan, `rag.stores.permission_plan`, says which path it took).

Example:
    >>> with stage("search") as current:
    ...     note_stage(plan="post-filter", seconds={"plan.post-filter": 0.25})
    >>> current.attributes, current.timings
    ({'plan': 'post-filter'}, {'plan.post-filter': 0.25})
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import (
    ensure_config,
    get_callback_manager_for_config,
    patch_config,
    var_child_runnable_config,
)

__all__ = ["Stage", "note_stage", "stage"]

_SCALARS = (str, bool, int, float)


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Only scalar, non-None values (what OpenTelemetry accepts)."""
    return {k: v for k, v in attributes.items() if isinstance(v, _SCALARS)}


@dataclass
class Stage:
    """A stage in progress: `config` for the work inside it, `attributes` reported when it ends, and `timings`
    (seconds per step) that code inside it reported with `note_stage` (the pipeline adds them to its own)."""

    config: RunnableConfig
    attributes: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


# the innermost `stage` of this context (what `note_stage` reports to)
_CURRENT_STAGE: ContextVar[Stage | None] = ContextVar("rag_current_stage", default=None)


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
        current = Stage(config, dict(attributes))
        marker = _CURRENT_STAGE.set(current)
        try:
            yield current
        finally:
            _CURRENT_STAGE.reset(marker)
        return
    run = manager.on_chain_start(None, {}, name=name)
    current = Stage(patch_config(config, callbacks=run.get_child()), dict(attributes))
    token = var_child_runnable_config.set(current.config)
    marker = _CURRENT_STAGE.set(current)
    try:
        yield current
    except BaseException as exc:
        run.on_chain_error(exc)
        raise
    else:
        run.on_chain_end({"rag_attributes": _clean(current.attributes)})
    finally:
        _CURRENT_STAGE.reset(marker)
        var_child_runnable_config.reset(token)


def note_stage(*, seconds: Mapping[str, float] | None = None, **attributes: Any) -> None:
    """Report to the innermost open `stage` of this context (nothing when none is open): `attributes` for its span
    (a text value joins the values reported before it, "a,b"; a number adds up) and `seconds` for its timings.

    Code below the pipeline (a store's search) says what it did this way, without a config in hand.

    Example:
        >>> with stage("search") as s:
        ...     note_stage(plan="post-filter", seconds={"plan": 0.5})
        ...     note_stage(plan="native", seconds={"plan": 0.25})
        >>> s.attributes, s.timings
        ({'plan': 'post-filter,native'}, {'plan': 0.75})
    """
    current = _CURRENT_STAGE.get()
    if current is None:
        return
    for key, value in attributes.items():
        before = current.attributes.get(key)
        if isinstance(value, str) and isinstance(before, str) and value not in before.split(","):
            value = f"{before},{value}"
        elif isinstance(value, int | float) and isinstance(before, int | float) and not isinstance(value, bool):
            value = before + value
        elif before is not None and isinstance(value, str):
            value = before
        current.attributes[key] = value
    for key, value in (seconds or {}).items():
        current.timings[key] = current.timings.get(key, 0.0) + value
