"""The chain's input step: the door every request enters by, where it is checked and resolved once, and the
retrieval it runs.

`input_step(rag, defaults)` is the first step of `RAG(...).chain()` (`RAG.retrieval_step`): it checks
the input (a question string or a dict with `"question"`), resolves the request once into a
`rag.compose.request.RagRequest` (`RAG.open_request`: the pipeline settings, each resource's search
settings, the principal), puts it in the run's config for every stage, and runs the RAG's
`resources_retrieval_chain`. `retrieve`, `airag`, chat, `rag ask`, the HTTP routes and MCP all enter here.

A RAG's own retrieval is built here too (`resources_chain`, what `RAG.resources_retrieval_chain` returns
unless a subclass overrides it): one parallel branch per resource reading the request the input step
resolved (`rag.compose.pipeline.search_branch`: rephrase, route, search), then the aggregate (`combine`:
fuse, rerank, sections, diversify, expand / RSE, budget). So a request is followed in one place, from the
door to its context.

Example:
    >>> normalise_input("Where is Rome?")
    {'question': 'Where is Rome?'}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from langchain_core.documents import Document
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, RunnableParallel
from langchain_core.runnables.utils import ConfigurableFieldSpec, get_unique_config_specs

from rag.base.errors import InputError
from rag.base.tracing import set_run_attributes
from rag.compose.pipeline import Branch, combine, search_branch, tag_resource
from rag.compose.request import BUILD_KEY, CONFIG_SPECS, RAG_REQUEST_KEY, SINK_KEY, RagRequest, configurable
from rag.compose.resource import Resource
from rag.compose.retrieval_settings import RetrievalSettings

__all__ = ["OpensRequests", "RetrievesResources", "aggregate_documents", "enter", "input_step", "normalise_input",
           "resources_chain"]


class OpensRequests(Protocol):
    """What the input step needs of a `RAG`: its retrieval, and resolving one request."""

    @property
    def resources_retrieval_chain(self) -> Runnable[str, list[Document]]: ...

    def open_request(self, value: Any, config: RunnableConfig | None, *,
                     defaults: Mapping[str, Any] | None = None) -> RagRequest: ...


class RetrievesResources(Protocol):
    """What a RAG's own retrieval (`resources_chain`) needs of it: its resources, settings and run's request."""

    @property
    def resources(self) -> list[Resource]: ...

    @property
    def retrieval(self) -> RetrievalSettings | None: ...

    def request_for(self, question: str, config: RunnableConfig | None) -> RagRequest: ...


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


def aggregate_documents(results: Mapping[str, list[Document]]) -> list[Document]:
    """Merge `{resource: docs}` into one list, tag `metadata["resource"]`, drop duplicates.

    The documents are fused by reciprocal rank (`rag.compose.pipeline.combine` without settings):
    every resource's first hit, then every second hit, ..., so no resource's best match is pushed
    to the end of the context by another's long tail; a chunk found by several resources keeps
    its first resource's tag and moves up.

    Example:
        >>> a, b, c = (Document(page_content=t) for t in "abc")
        >>> [(d.page_content, d.metadata["resource"]) for d in aggregate_documents({"r1": [a, b], "r2": [a, c]})]
        [('a', 'r1'), ('b', 'r1'), ('c', 'r2')]
    """
    return combine([Branch("", name, [""], {0: tag_resource(docs or [], name)}) for name, docs in results.items()],
                   [], None).context


def resources_chain(rag: RetrievesResources) -> Runnable[str, list[Document]]:
    """A RAG's retrieval: one parallel branch per resource, then the aggregate (`RAG.resources_retrieval_chain`).

    A plain RAG (`retrieval` None) runs the seed's branches: each resource's own search with its settings and
    the request's k and filter, fused (`aggregate_documents`).
    """
    if not rag.resources:
        return RunnableLambda(lambda _: [], name="no_resources")
    if rag.retrieval is None:
        parallel = RunnableParallel({r.name: r.as_runnable() for r in rag.resources})
        return (parallel | RunnableLambda(aggregate_documents, name="aggregate")).with_config(run_name="resources")
    parallel = RunnableParallel({r.name: _branch(rag, r) for r in rag.resources})
    return (parallel | _aggregate(rag)).with_config(run_name="resources")


def _branch(rag: RetrievesResources, resource: Resource) -> Runnable[str, Branch]:
    """One resource's half of the pipeline: rephrase, route, search (`search_branch`)."""

    def run(question: str, config: RunnableConfig) -> Branch:
        request = rag.request_for(question, config)
        settings = request.settings
        branch = search_branch(question, resource, settings, search_kwargs=request.for_resource(resource.name),
                               config=config)
        set_run_attributes(config, resource=resource.name, k=branch.max_chunks or settings.k, filter=branch.filter is not None,
                           documents=sum(len(docs) for docs in branch.lists.values()))
        return branch

    return RunnableLambda(run, name=resource.name)


def _aggregate(rag: RetrievesResources) -> Runnable[Mapping[str, Branch], list[Document]]:
    """The cross-resource half: fuse, rerank, sections, diversify, expand / RSE, budget (`combine`); the run's
    `RAGResult` goes to the sink `retrieve` / `airag` put in the config (`SINK_KEY`)."""

    def aggregate(branches: Mapping[str, Branch], config: RunnableConfig) -> list[Document]:
        question = next(iter(branches.values())).question if branches else ""
        result = combine(list(branches.values()), rag.resources, rag.request_for(question, config).settings)
        sink = configurable(config).get(SINK_KEY)
        if isinstance(sink, list):
            sink.append(result)
        return result.context

    return RunnableLambda(aggregate, name="aggregate")
