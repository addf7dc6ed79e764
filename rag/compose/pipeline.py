"""The one retrieval pipeline, in two halves: per-resource `search_branch` and cross-resource `combine`.

```
per resource (a RAG's parallel branches)     once (a RAG's aggregate step)
question ─► route ─► rephrase ─► search  ─►  fuse ─► route boost ─► evidence ─► rerank ─► page diversity
                                             ─► named sections ─► RSE | neighbours | top k ─► budget
```

`rag.retrieve` runs `search_branch` for every resource (concurrently) and then `combine`; a `RAG`
with retrieval settings runs the same two functions as its `RunnableParallel` branches and its
aggregate, so a one-resource `RAG` returns exactly the context `retrieve()` returns. Every step
is recorded in the `RAGResult` (`stages`, `timings`, `extras`).

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from rag.compose.resource import Resource
    >>> res = Resource.from_texts("notes", ["Paris is in France.", "Rome is in Italy."],
    ...                           embedding=DeterministicFakeEmbedding(size=16))
    >>> settings = RetrievalSettings(k=1, max_tokens=50, token_counter="approx")
    >>> branch = search_branch("Where is Rome?", res, settings)
    >>> len(combine([branch], [res], settings).context)
    1
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig
from langchain_core.vectorstores import VectorStoreRetriever

from rag.base.errors import ConfigError
from rag.base.filters import and_filters
from rag.base.portable import ChunkSource, find_chunk_source
from rag.base.result import Candidate, RAGResult
from rag.base.tracing import stage
from rag.compose.resource import Resource
from rag.compose.retrieval_settings import Reranking, RetrievalSettings, Routing
from rag.retrieval.aggregation import aggregate_evidence
from rag.retrieval.comparisons import comparison_sides, side_question
from rag.retrieval.budget import apply_budget, token_counter
from rag.retrieval.expansion import expand_neighbours
from rag.retrieval.fusion import doc_key, documents_to_scored, fuse, minmax
from rag.retrieval.packing import diversify
from rag.retrieval.rephrase import Rephraser
from rag.retrieval.rerank import EmbeddingReranker, blend_rerank
from rag.retrieval.rse import relevant_segments, segment_documents
from rag.stores.registry import chunks_of

__all__ = ["Branch", "chunk_source", "combine", "search_branch", "tag_resource"]


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
    k: int | None = None    # the k the user gave this resource: at most this many of its chunks in the context
    router: Routing | None = None      # the router that chose `route`


@contextmanager
def _timed(timings: dict[str, float], step: str, config: RunnableConfig | None = None, *,
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

    `search_kwargs` (a request's settings for this resource) are applied on top of the pipeline's:
    their `filter` is combined with `$and`; their `k` (`max_chunks`), else the resource's own,
    caps the context at that many chunks of this resource (candidates are still `fetch_k` deep).
    Routing uses `settings.router`, else the resource's own `router`; when the route and the
    caller's filter share no document, the caller's filter wins (the search runs without the route).
    """
    timings: dict[str, float] = {}
    request = dict(search_kwargs or {})
    flt = and_filters(settings.filter, request.pop("filter", None))
    router = None if settings.routing == "off" else (settings.router or resource.router)
    route, routed = None, flt
    if router is not None:
        with _timed(timings, "route"):
            route = router.route(question)
        if settings.routing != "boost" and route.values:   # "filter" or "both"
            routed = and_filters(flt, {router.key: {"$in": route.values}})
    queries = [question]
    if settings.rephrase is not None:
        with _timed(timings, "rephrase"):
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
    wanted = request.pop("k", resource.search_kwargs.get("k"))
    k = max(settings.fetch_k, wanted or 0)
    with _timed(timings, "search", config, run_name=f"search/{resource.name}", resource=resource.name, k=k,
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
    """Every query's results from `resource`, tagged with its name (queries searched concurrently)."""
    kwargs = {**kwargs, **({"filter": flt} if flt else {})}
    if len(queries) == 1:
        return {0: tag_resource(resource.retrieve(queries[0], search_kwargs=kwargs, config=config), resource.name)}
    with ThreadPoolExecutor(max_workers=min(8, len(queries)), thread_name_prefix="rag-search") as pool:
        found = list(pool.map(lambda q, context: context.run(resource.retrieve, q, search_kwargs=kwargs, config=config),
                              queries, [contextvars.copy_context() for _ in queries]))   # (a store's notes reach the stage)
    return {qi: tag_resource(docs, resource.name) for qi, docs in enumerate(found)}


def combine(branches: Sequence[Branch], resources: Sequence[Resource], settings: RetrievalSettings | None) -> RAGResult:
    """Fuse the branches and run the cross-resource stages (the aggregate half of the pipeline).

    With `settings` None only fusion runs: every branch's documents, fused by reciprocal rank
    (equal to interleaving by rank when no document is found twice), tagged with their resource,
    duplicates dropped, nothing cut. That is a `RAG` without retrieval settings.
    """
    question = branches[0].question if branches else ""
    result = RAGResult(question=question)
    for branch in branches:
        for step, seconds in branch.timings.items():
            result.timings[step] = result.timings.get(step, 0.0) + seconds
        result.add_stage(f"candidates/{branch.resource}",
                         _candidates([d for docs in branch.lists.values() for d in docs], branch.resource))
    if branches and branches[0].queries[1:]:
        result.rephrased_questions = branches[0].queries[1:]
    lists = {f"{b.resource}|{qi}": documents_to_scored(docs) for b in branches for qi, docs in b.lists.items()}
    with _timed(result.timings, "fuse", lists=len(lists)) as current:
        fused = _fuse(lists, settings, _query_weights(branches, settings))
        current.attributes["documents"] = len(fused)
    result.add_stage("fused", _candidates([d for d, _ in fused]))
    limits = [b.k for b in branches]
    if settings is not None and limits and all(limits):
        settings = settings.model_copy(update={"k": min(settings.k, sum(limits))})
    if settings is None:
        originals = _first_seen(branches)
        result.context = [originals[doc_key(d)] for d, _ in fused]
        return result
    return _refine(result, fused, branches, list(resources), settings)


def _first_seen(branches: Sequence[Branch]) -> dict[str, Document]:
    """Each document as its first branch and list returned it (the copy the context keeps), by `doc_key`."""
    originals: dict[str, Document] = {}
    for branch in branches:
        for docs in branch.lists.values():
            for doc in docs:
                originals.setdefault(doc_key(doc), doc)
    return originals


def _fuse(lists: dict[str, list[tuple[Document, float]]], settings: RetrievalSettings | None,
          weights: dict[str, float] | None = None) -> list[tuple[Document, float]]:
    if len(lists) == 1:
        ((_, only),) = lists.items()
        return [(d, float(d.metadata.get("score", -i))) for i, (d, _) in enumerate(only)]
    if settings is None:
        return fuse(lists, method="rrf")
    return fuse(lists, method=settings.fusion, weights=weights, top_k=settings.fetch_k)


def _query_weights(branches: Sequence[Branch], settings: RetrievalSettings | None) -> dict[str, float] | None:
    """`question_weight` for the question's lists, the rest shared by the rephrasings (None: equal weights)."""
    if settings is None or settings.question_weight is None or all(len(b.queries) < 2 for b in branches):
        return None
    share = settings.question_weight
    return {f"{b.resource}|{qi}": 1.0 if len(b.queries) < 2 else
            share if qi == 0 else (1 - share) / (len(b.queries) - 1)
            for b in branches for qi in b.lists}


def _refine(result: RAGResult, fused: list[tuple[Document, float]], branches: Sequence[Branch],
            resources: list[Resource], settings: RetrievalSettings) -> RAGResult:
    """Route boost, rerank, diversify, sections, select, budget."""
    question, counter = result.question, token_counter(settings.token_counter)
    routed = [b for b in branches if b.route is not None]
    # one filter every branch's filter implies: what a stage after the search adds must match all of them
    distinct = list({id(b.filter): b.filter for b in branches}.values())   # (the same object: no repr of a
    if len(distinct) > 1:                                                   # principal's 1,000 groups)
        distinct = list({repr(f): f for f in distinct}.values())
    flt = and_filters(*distinct) if branches else settings.filter
    if routed:
        route = routed[0].route
        if _caller_filtered(routed[0]):   # report only documents the filtered search could return
            route = route.within(d.metadata.get(routed[0].router.key) for d, _ in fused)
        result.extras["route"] = {"values": route.values, "confident": route.confident,
                                  "scores": dict(list(route.scores.items())[:10])}
        if settings.routing in ("boost", "both"):   # on min-max normalised fused scores
            with _timed(result.timings, "route"):
                for router in {id(b.router): b.router for b in routed}.values():
                    normalised = minmax([score for _, score in fused])
                    fused = router.boost(question, [(d, s) for (d, _), s in zip(fused, normalised, strict=True)],
                                         weight=settings.route_weight)
            result.add_stage("filtered", _candidates([d for d, _ in fused]))
    scored = fused
    if settings.page_evidence or settings.document_evidence:
        with _timed(result.timings, "evidence"):
            scored = aggregate_evidence(scored, page_weight=settings.page_evidence,
                                        document_weight=settings.document_evidence, top=settings.evidence_top,
                                        depth=settings.fetch_k)
        result.add_stage("evidence", _candidates([d for d, _ in scored]))
    reranker = _reranker(settings.reranker)
    if reranker is not None:
        with _timed(result.timings, "rerank"):
            scored = _rerank(reranker, question, scored, settings)
        result.add_stage("reranked", _candidates([d for d, _ in scored]))
    if settings.page_diversity:
        with _timed(result.timings, "diversify"):
            scored = diversify(scored, discount=settings.page_diversity)
        result.add_stage("diversified", _candidates([d for d, _ in scored]))
    section_routers = [settings.sections] if settings.sections is not None else \
        [r.sections for r in resources if r.sections is not None]
    if section_routers:
        scored = _sections(result, scored, settings, flt, section_routers)
    caps = {b.resource: b.k for b in branches if b.k}
    if caps:   # a resource's own k: at most that many of its chunks, its best ones
        scored = _capped(scored, caps)
    with _timed(result.timings, "select"):
        context = _select(result, resources, scored, settings, {b.resource: b.filter for b in branches})
    with _timed(result.timings, "budget", max_tokens=settings.max_tokens) as current:
        result.context = apply_budget(context, settings.max_tokens, counter=counter)
        current.attributes["documents"] = len(result.context)
    result.extras["token_counter"] = counter.name
    result.extras["context_tokens"] = sum(d.metadata.get("tokens", 0) for d in result.context)
    result.extras["settings"] = settings.model_dump(exclude={"llm", "router", "reranker", "rephrase", "sections",
                                                             "token_counter", "filter"}, mode="json")
    # the filter as it is (canonical, read-only): a principal's holds one condition per group, not copied per request
    result.extras["settings"]["filter"] = settings.filter
    result.extras["settings"]["token_counter"] = (settings.token_counter if isinstance(settings.token_counter, str)
                                                  else counter.name)
    return result


def _capped(scored: list[tuple[Document, float]], caps: Mapping[str, int]) -> list[tuple[Document, float]]:
    """`scored` with at most `caps[r]` chunks of each capped resource `r` (the first ones, in order)."""
    taken: dict[str, int] = {}
    kept = []
    for doc, score in scored:
        resource = doc.metadata.get("resource")
        taken[resource] = taken.get(resource, 0) + 1
        if resource not in caps or taken[resource] <= caps[resource]:
            kept.append((doc, score))
    return kept


def _caller_filtered(branch: Branch) -> bool:
    """Whether a branch searched with a filter of the caller's (not only its route's `$in`)."""
    route_only = branch.route is not None and branch.route.values and \
        branch.filter == and_filters({branch.router.key: {"$in": branch.route.values}})
    return branch.filter is not None and not route_only


def _rerank(reranker: Reranking, question: str, fused: list[tuple[Document, float]],
            settings: RetrievalSettings) -> list[tuple[Document, float]]:
    """Rerank the top `rerank_depth` candidates (blended with the first stage below weight 1); the rest follow."""
    head, tail = (fused, []) if settings.rerank_depth is None else (fused[: settings.rerank_depth],
                                                                    fused[settings.rerank_depth:])
    scored = reranker.rerank(question, [d for d, _ in head])
    if settings.rerank_weight < 1.0:
        scored = blend_rerank(head, scored, weight=settings.rerank_weight)
    if not tail:
        return scored
    floor = min([0.0, *(score for _, score in scored)]) - 1e-6
    return scored + [(d, floor) for d, _ in tail]


def _sections(result: RAGResult, scored: list[tuple[Document, float]], settings: RetrievalSettings,
              flt: dict[str, Any] | None, routers: list[Any]) -> list[tuple[Document, float]]:
    """Promote the opening chunks of the sections the question names (each resource's router in turn)."""
    named: list[Any] = []
    with _timed(result.timings, "sections"):
        top_k = settings.k if settings.rse is None and not settings.expand else None  # a top-k context
        for router in routers:
            if not callable(getattr(router, "promote", None)):
                raise ConfigError(f"sections must be a SectionRouter or None, got {type(router).__name__}")
            at = settings.section_at if settings.section_at is not None else router.at
            scored, found = router.promote(result.question, scored, at=at, within=top_k, filter=flt)
            named += found
    result.extras["sections"] = [{"heading": s.heading, "document": s.document, "score": round(s.score, 4)}
                                 for s in named]
    result.add_stage("sections", _candidates([d for d, _ in scored]))
    return scored


def chunk_source(resource: Resource) -> ChunkSource | None:
    """Where to read a resource's neighbouring chunks (its retriever's `chunk_source`), or None.

    A LangChain `VectorStoreRetriever` over a store of the registry reads its chunk store.
    """
    found = find_chunk_source(resource.retriever)
    if found is None and isinstance(resource.retriever, VectorStoreRetriever):
        return chunks_of(resource.retriever.vectorstore)
    return found


def tag_resource(docs: list[Document], name: str) -> list[Document]:
    """Copies of `docs` with `metadata["resource"] = name`."""
    return [Document(page_content=d.page_content, metadata={**d.metadata, "resource": name}, id=d.id) for d in docs]


def _candidates(docs: Sequence[Document], resource: str | None = None) -> list[Candidate]:
    return [Candidate(document=d, score=d.metadata.get("score"), resource=resource or d.metadata.get("resource"),
                      scores=dict(d.metadata.get("scores") or {})) for d in docs]


def _reranker(value: Any) -> Any:
    if value == "embedding":
        return EmbeddingReranker()
    if value is not None and not hasattr(value, "rerank"):
        raise ConfigError(f"reranker must be a Reranker, 'embedding' or None; got {value!r}")
    return value


def _rephraser(settings: RetrievalSettings, resource: Resource) -> Any:
    if hasattr(settings.rephrase, "rephrase"):
        return settings.rephrase
    modes = [settings.rephrase] if isinstance(settings.rephrase, str) else list(settings.rephrase)
    return Rephraser(modes=modes, llm=settings.llm, retriever=resource.retriever if "feedback" in modes else None)


def _select(result: RAGResult, resources: list[Resource], scored: list[tuple[Document, float]],
            settings: RetrievalSettings, filters: Mapping[str, dict[str, Any] | None]) -> list[Document]:
    """RSE segments, expanded neighbours, or the top k, per the settings.

    RSE and expansion read chunks back with each resource's search filter (`filters`, by resource
    name), so they never add a chunk its search could not have returned.
    """
    if settings.rse is None and not settings.expand:
        return [d for d, _ in scored[: settings.k]]
    by_resource: dict[str, list[tuple[Document, float]]] = {}
    for doc, score in scored:
        by_resource.setdefault(doc.metadata.get("resource", resources[0].name), []).append((doc, score))
    sources = {res.name: chunk_source(res) for res in resources}
    missing = [name for name in by_resource if sources.get(name) is None]
    if missing:
        raise ConfigError(f"RSE and neighbour expansion need a chunk source; resource(s) {missing} have none "
                          "(use a knowledge base, a HybridRetriever, a BM25Retriever or a Chroma vector store)")
    if settings.rse is not None:
        segments = []
        for name, hits in by_resource.items():
            for seg in relevant_segments([hits], sources[name], preset=settings.rse, filter=filters.get(name),
                                         **settings.rse_overrides):
                seg.metadata["resource"] = name
                segments.append(seg)
        result.segments = sorted(segments, key=lambda s: -s.score)
        return segment_documents(result.segments)
    return _expanded(scored[: settings.k], by_resource, sources, resources[0].name, settings.expand, filters)


def _expanded(ranked: list[tuple[Document, float]], by_resource: Mapping[str, Any], sources: Mapping[str, Any],
              first: str, window: int, filters: Mapping[str, dict[str, Any] | None]) -> list[Document]:
    expanded: list[Document] = []
    for name in by_resource:
        top = [d for d, _ in ranked if d.metadata.get("resource", first) == name]
        for doc in expand_neighbours(top, sources[name], window=window, filter=filters.get(name)):
            doc.metadata["resource"] = name
            expanded.append(doc)
    if len(by_resource) > 1:
        return sorted(expanded, key=lambda d: -float(d.metadata.get("score", 0.0)))
    return expanded
