"""One resource's half of the retrieval pipeline: `search_branch` (route, rephrase, search) and its `Branch`.

```
question ─► route ─► rephrase ─► search (every query; comparison sides) ─► Branch
```

A `RAG` runs `search_branch` as one parallel branch per resource (`rag.compose.pipeline` fuses the
branches and runs the cross-resource stages). The settings are the request's (`RagRequest`), validated
at its door: nothing here checks them again.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from rag.compose.resource import Resource
    >>> res = Resource.from_texts("notes", ["Paris is in France.", "Rome is in Italy."],
    ...                           embedding=DeterministicFakeEmbedding(size=16))
    >>> branch = search_branch("Where is Rome?", res, RetrievalSettings(fetch_k=1))
    >>> branch.resource, len(branch.lists[0])
    ('notes', 1)
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig

from rag.base.filters import and_filters
from rag.base.tracing import stage
from rag.compose.resource import Resource
from rag.compose.retrieval_settings import RetrievalSettings, Routing
from rag.compose.search_kwargs import max_chunks
from rag.retrieval.comparisons import comparison_sides, side_question
from rag.retrieval.rephrase import Rephraser

__all__ = ["Branch", "search_branch", "tag_resource", "timed"]


@dataclass
class Branch:
    """What one resource's branch found: its queries, route, and one result list per query."""

    question: str
    resource: str
    queries: list[str]
    lists: dict[int, list[Document]]
    filter: dict[str, Any] | None = None
    route: Any = None
    timings: dict[str, float] = field(default_factory=dict)
    max_chunks: int | None = None   # the cap the user gave this resource: at most this many of its chunks in the context
    router: Routing | None = None      # the router that chose `route`


@contextmanager
def timed(timings: dict[str, float], step: str, config: RunnableConfig | None = None, *,
          run_name: str | None = None, **attributes: Any) -> Iterator[Any]:
    """Time a step and run it as a child run (`rag.base.tracing.stage`, named `run_name` or the step)."""
    start = time.perf_counter()
    current = None
    try:
        with stage(run_name or step, config, **attributes) as current:
            yield current
    finally:
        timings[step] = timings.get(step, 0.0) + time.perf_counter() - start
        for inner, seconds in (current.timings if current is not None else {}).items():   # (a store's plan)
            timings[inner] = timings.get(inner, 0.0) + seconds


def search_branch(question: str, resource: Resource, settings: RetrievalSettings, *,
                  search_kwargs: Mapping[str, Any] | None = None, config: RunnableConfig | None = None) -> Branch:
    """Rephrase, route and search one resource (the per-resource half of the pipeline).

    `search_kwargs` (a request's settings for this resource, validated: the `RagRequest`'s, trusted
    here) are applied on top of the pipeline's: their `filter` is combined with `$and`; their
    `max_chunks` (the seed's `k`), else the resource's own, caps the context at that many chunks of
    this resource (candidates are still `fetch_k` deep).
    Routing uses `settings.router`, else the resource's own `router`; when the route and the
    caller's filter share no document, the caller's filter wins (the search runs without the route).
    """
    timings: dict[str, float] = {}
    request = dict(search_kwargs or {})
    flt = and_filters(settings.filter, request.pop("filter", None))
    router = None if settings.routing == "off" else (settings.router or resource.router)
    route, routed = None, flt
    if router is not None:
        with timed(timings, "route"):
            route = router.route(question)
        if settings.routing != "boost" and route.values:   # "filter" or "both"
            routed = and_filters(flt, {router.key: {"$in": route.values}})
    queries = [question]
    if settings.rephrase is not None:
        with timed(timings, "rephrase"):
            rephraser = _rephraser(settings, resource)
            # feedback's first search reads only what the search may return (the caller's filter and the route)
            queries = (rephraser.rephrase(question, search_kwargs={"filter": routed} if routed else None)
                       if isinstance(rephraser, Rephraser) else rephraser.rephrase(question))
    # side searches (opt-in): "X vs Y" searches each side too, without the route the question's names
    # chose: a route to one side's pages ("diff3") would hide the other's ("diff")
    sides = comparison_sides(question) if settings.side_searches and len(queries) == 1 else None
    side_queries = [side_question(question, sides, which) for which in (0, 1)] if sides else []
    # a k the user gave the resource (its search_kwargs or this request's) caps what it puts in the
    # context (see `combine`); candidates are still searched `fetch_k` deep
    wanted = max_chunks(request) or max_chunks(resource.search_kwargs)
    request.pop("k", None)
    k = max(settings.fetch_k, wanted or 0)   # the candidates searched (the retriever call's own k)
    with timed(timings, "search", config, run_name=f"search/{resource.name}", resource=resource.name, k=k,
                filter=routed is not None, queries=len(queries)) as current:
        lists = _search(resource, queries, {**request, "k": k}, routed, current.config)
        if routed is not flt and flt is not None and not any(lists.values()):
            routed = flt    # the route and the caller's filter share no document: the caller chose others
            lists = _search(resource, queries, {**request, "k": k}, routed, current.config)
        if side_queries:
            sided = _search(resource, side_queries, {**request, "k": k}, flt, current.config)
            lists.update({len(queries) + i: docs for i, docs in sided.items()})
            queries = [*queries, *side_queries]
        current.attributes["documents"] = sum(len(docs) for docs in lists.values())
    return Branch(question, resource.name, queries, lists, routed, route, timings, wanted, router)


def _search(resource: Resource, queries: list[str], kwargs: dict[str, Any], flt: dict[str, Any] | None,
            config: RunnableConfig | None) -> dict[int, list[Document]]:
    """Every query's results from `resource`, tagged with its name (queries searched concurrently).

    The settings are the request's, validated at its door: searched as they are (`Resource.search`)."""
    kwargs = {**resource.search_kwargs, **kwargs, **({"filter": flt} if flt else {})}
    if len(queries) == 1:
        return {0: tag_resource(resource.search(queries[0], kwargs, config=config), resource.name)}
    with ThreadPoolExecutor(max_workers=min(8, len(queries)), thread_name_prefix="rag-search") as pool:
        found = list(pool.map(lambda q, context: context.run(resource.search, q, kwargs, config=config),
                              queries, [contextvars.copy_context() for _ in queries]))   # (a store's notes reach the stage)
    return {qi: tag_resource(docs, resource.name) for qi, docs in enumerate(found)}


def tag_resource(docs: list[Document], name: str) -> list[Document]:
    """Copies of `docs` with `metadata["resource"] = name`."""
    return [Document(page_content=d.page_content, metadata={**d.metadata, "resource": name}, id=d.id) for d in docs]


def _rephraser(settings: RetrievalSettings, resource: Resource) -> Any:
    if hasattr(settings.rephrase, "rephrase"):
        return settings.rephrase
    modes = [settings.rephrase] if isinstance(settings.rephrase, str) else list(settings.rephrase)
    return Rephraser(modes=modes, llm=settings.llm, retriever=resource.retriever if "feedback" in modes else None)
