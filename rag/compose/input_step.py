"""The chain's input step: the door every request enters by, where it is checked and resolved once.

`input_step(rag, defaults)` is the first step of `RAG(...).chain()` (`RAG.retrieval_step`): it checks
the input (a question string or a dict with `"question"`), resolves the request once into a
`rag.compose.request.RagRequest` (`RAG.open_request`: the pipeline settings, each resource's search
settings, the principal), puts it in the run's config for every stage, and runs the RAG's
`resources_retrieval_chain`. `retrieve`, `airag`, chat, `rag ask`, the HTTP routes and MCP all enter here.

Example:
    >>> normalise_input("Where is Rome?")
    {'question': 'Where is Rome?'}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from langchain_core.documents import Document
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.utils import ConfigurableFieldSpec, get_unique_config_specs

from rag.base.errors import InputError
from rag.compose.request import BUILD_KEY, CONFIG_SPECS, RAG_REQUEST_KEY, RagRequest, configurable

__all__ = ["OpensRequests", "enter", "input_step", "normalise_input"]


class OpensRequests(Protocol):
    """What the input step needs of a `RAG`: its retrieval, and resolving one request."""

    @property
    def resources_retrieval_chain(self) -> Runnable[str, list[Document]]: ...

    def open_request(self, value: Any, config: RunnableConfig | None, *,
                     defaults: Mapping[str, Any] | None = None) -> RagRequest: ...


def enter(rag: OpensRequests, value: Any, config: RunnableConfig | None, *,
          defaults: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], RunnableConfig]:
    """What the input step does before retrieval: check the input and resolve the request once.

    Returns the input as a dict and the run's config with the `RagRequest` in it (`RAG_REQUEST_KEY`),
    which every stage reads and trusts. `retrieve` / `airag` and MCP `search` call it, then the RAG's
    `resources_retrieval_chain`, as the chain's first step does (their traces keep their shape).

    Raises:
        InputError: no question. ConfigError: a bad setting (the message lists the valid ones).
    """
    inputs = normalise_input(value)
    config = config or {}
    request = rag.open_request(inputs, config, defaults=defaults or None)
    return inputs, {**config, "configurable": {**configurable(config), RAG_REQUEST_KEY: request}}


def input_step(rag: OpensRequests, defaults: Mapping[str, Any] | None = None) -> Runnable[Any, dict[str, Any]]:
    """`question -> {"question", "context", <other input keys>}`: check, resolve once, retrieve.

    Args:
        rag: the RAG whose retrieval runs (a subclass's own `resources_retrieval_chain` included).
        defaults: build-time per-resource settings (`chain(retrieval_chain=...)`), validated.
    """
    retrieval = rag.resources_retrieval_chain

    # One step normalises the input and retrieves: no extra run or thread hop per call.
    def retrieve(value: Any, config: RunnableConfig) -> dict[str, Any]:
        inputs, config = enter(rag, value, config, defaults=defaults)
        return {**inputs, "context": retrieval.invoke(inputs["question"], config)}

    async def aretrieve(value: Any, config: RunnableConfig) -> dict[str, Any]:
        inputs, config = enter(rag, value, config, defaults=defaults)
        return {**inputs, "context": await retrieval.ainvoke(inputs["question"], config)}

    first: Runnable = _RetrieveStep(retrieve, aretrieve)
    if defaults:
        # Build-time settings ride on the retrieval step's config: every runnable inside it sees
        # them, also retrievers nested in other retrievers (which pass on only the context's config).
        first = first.with_config(configurable={BUILD_KEY: defaults})
    return first


class _RetrieveStep(RunnableLambda):
    """The chain's first step (input check, retrieval); declares the per-request settings it reads."""

    def __init__(self, func: Callable[..., Any], afunc: Callable[..., Any]) -> None:
        super().__init__(func, afunc=afunc, name="retrieve")

    @property
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        return get_unique_config_specs([*CONFIG_SPECS, *super().config_specs])


def normalise_input(value: Any) -> dict[str, Any]:
    """The chain's input as a dict with a non-empty string `question` (`InputError` otherwise)."""
    if isinstance(value, str):
        question = value
        value = {"question": value}
    elif isinstance(value, Mapping):
        if "question" not in value:
            raise InputError(f"the input dict has no 'question' key (got keys {sorted(map(str, value))}); "
                             "pass a question string or {'question': ...}")
        question = value.get("question")
        value = dict(value)
    else:
        raise InputError(f"a RAG chain takes a question string or a dict with 'question', got {type(value).__name__}")
    if not isinstance(question, str) or not question.strip():
        raise InputError("the question must be a non-empty string")
    return value
