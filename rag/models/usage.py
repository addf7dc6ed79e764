"""Token usage and cost per step, collected from LangChain's `usage_metadata`.

`UsageTracker` is a callback handler: pass it in a run's `callbacks` and it adds up the
`usage_metadata` of every chat-model call (streamed or not) and prices them with
`rag.models.pricing`. Models that report no usage (the offline extractive answerer, some
fakes) leave the counts at zero.

Example:
    >>> from langchain_core.language_models import GenericFakeChatModel
    >>> from langchain_core.messages import AIMessage
    >>> msg = AIMessage(content="hi", usage_metadata={"input_tokens": 5, "output_tokens": 1, "total_tokens": 6})
    >>> tracker = UsageTracker()
    >>> _ = GenericFakeChatModel(messages=iter([msg])).invoke("hello", config={"callbacks": [tracker]})
    >>> tracker.summary()["total_tokens"]
    6
"""

from __future__ import annotations

import threading
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult
from langchain_core.runnables import RunnableConfig

from rag.base.llm_calls import call_usage, requested_model
from rag.models.pricing import cost

__all__ = ["UsageTracker", "add_usage", "empty_usage", "with_tracker"]


def empty_usage() -> dict[str, Any]:
    """Usage of a step that made no model call."""
    return {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "calls": 0, "cost": 0.0, "models": []}


def add_usage(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Sum two usage dicts; the cost is None if either is unknown."""
    out = {k: a.get(k, 0) + b.get(k, 0) for k in ("input_tokens", "output_tokens", "total_tokens", "calls")}
    costs = (a.get("cost", 0.0), b.get("cost", 0.0))
    out["cost"] = None if None in costs else round(costs[0] + costs[1], 8)
    out["models"] = sorted(set(a.get("models", [])) | set(b.get("models", [])))
    return out


class UsageTracker(BaseCallbackHandler):
    """Adds up token usage and cost of the chat-model calls of the runs it is attached to."""

    # A lock and a sum: run in the caller's thread, not one executor hop per event of an async run.
    run_inline = True

    @property
    def ignore_chain(self) -> bool:
        """Only model calls count: chain and retriever events are not even dispatched."""
        return True

    @property
    def ignore_retriever(self) -> bool:
        return True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._models: dict[UUID, str] = {}
        self._usage = empty_usage()

    def on_chat_model_start(self, serialized: dict[str, Any], messages: Any, *, run_id: UUID,
                            metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        name = requested_model(serialized, metadata, kwargs.get("invocation_params"))
        with self._lock:
            self._models[run_id] = name or "unknown"

    def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID, **kwargs: Any) -> None:
        self.on_chat_model_start(serialized, prompts, run_id=run_id, **kwargs)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            model = self._models.pop(run_id, "unknown")
        usage, named = call_usage(response)
        model = named or model
        step = {**usage, "calls": 1, "models": [model],
                "cost": cost(model, input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"])}
        with self._lock:
            self._usage = add_usage(self._usage, step)

    def summary(self) -> dict[str, Any]:
        """`{"input_tokens", "output_tokens", "total_tokens", "calls", "cost", "models"}` so far."""
        with self._lock:
            return dict(self._usage)


def with_tracker(config: RunnableConfig | None, tracker: UsageTracker) -> RunnableConfig:
    """A copy of the config with the tracker added to its callbacks."""
    config = dict(config or {})
    callbacks = config.get("callbacks")
    if callbacks is None:
        config["callbacks"] = [tracker]
    elif isinstance(callbacks, list):
        config["callbacks"] = [*callbacks, tracker]
    else:  # a callback manager
        manager = callbacks.copy()
        manager.add_handler(tracker, inherit=True)
        config["callbacks"] = manager
    return config  # type: ignore[return-value]
