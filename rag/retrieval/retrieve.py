"""`retrieve`: run a whole retrieval path and return every intermediate step as a `RAGResult`.

```
question ─► rephrase ─► route ─► search every (resource, query), concurrently ─► fuse (RRF)
         ─► route boost ─► rerank ─► page diversity ─► named sections
         ─► RSE segments | neighbour expansion | top k
         ─► token budget ─► context
```

Every step is optional except search, fusion and the budget, and each one is recorded:
``rephrased_questions``; ``stages["candidates/<resource>"]`` (per resource, every query, with
the retriever's scores, e.g. dense / bm25 / rrf for a `HybridRetriever`), ``stages["fused"]``,
``stages["filtered"]`` (after routing), ``stages["reranked"]``, ``stages["diversified"]``,
``stages["sections"]`` (after promoting the sections the question names; ``extras["sections"]``
says which); ``segments`` (RSE);
``context`` (after the budget, tagged ``metadata["resource"]``); ``timings`` per step in seconds
and ``extras`` (route, token counter, settings).

Settings are validated by `RetrievalSettings` (unknown keys are rejected with the valid ones).
Neighbour expansion and RSE read chunks from the resource's chunk source: the BM25 index of a
`HybridRetriever` / `BM25Retriever`, or the Chroma store of a vector-store retriever.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from rag.core.resource import Resource
    >>> res = Resource.from_texts("notes", ["Paris is in France.", "Rome is in Italy."],
    ...                           embedding=DeterministicFakeEmbedding(size=16))
    >>> result = retrieve("Where is Rome?", res, k=1, max_tokens=50, token_counter="approx")
    >>> len(result.context), sorted(result.timings)[:3]
    (1, ['budget', 'fuse', 'search'])
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Literal

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStoreRetriever
from pydantic import BaseModel, ConfigDict, Field

from rag.core.errors import ConfigError
from rag.core.filters import and_filters
from rag.core.resource import Resource
from rag.core.result import Candidate, RAGResult
from rag.core.tracing import stage
from rag.retrieval.budget import TokenCounter, apply_budget
from rag.retrieval.expansion import expand_neighbours
from rag.retrieval.fusion import documents_to_scored, fuse
from rag.retrieval.packing import diversify
from rag.retrieval.rerank import blend_rerank
from rag.retrieval.rse import RSEConfig, relevant_segments, segment_documents

__all__ = ["RetrievalSettings", "aretrieve", "chunk_source", "retrieve"]


class RetrievalSettings(BaseModel):
    """Options of `retrieve` (all keyword arguments).

    Attributes:
        k: chunks in the context when neither RSE nor expansion is used (also the rerank cut).
        fetch_k: candidates per (resource, query) and kept after fusion.
        filter: a portable metadata filter for every resource.
        rephrase: a `Rephraser`, or modes for one ("keywords", "feedback", "hyde", "multi_query").
        llm: the chat model for the LLM rephrase modes.
        router: a `DocumentRouter`; routing "filter" restricts search to the routed documents,
            "boost" adds ``route_weight * document score`` to the fused scores.
        reranker: a `Reranker`, "embedding" (the offline `EmbeddingReranker`) or None.
        rerank_weight: 1 orders by the reranker's score alone; below 1 the normalised reranker and
            first-stage scores are blended (`rag.retrieval.rerank.blend_rerank`).
        expand: neighbour expansion window (0 = none); ignored when `rse` is set.
        rse: an RSE preset name or `RSEConfig` (None = none); `rse_overrides` replace preset fields.
        max_tokens: the context budget (None = unlimited); `token_counter`: auto, minilm, approx.
        fusion: how lists of several resources / queries are fused ("rrf" or "convex").
        page_diversity: `rag.retrieval.packing.diversify` discount (0 = off): a chunk loses this
            much of its normalised score per better chunk already taken from its page.
        sections: a `rag.retrieval.sections.SectionRouter` (None = off): the opening chunk of each
            section whose heading the question names goes in after the first `section_at` results
            (with a top-k context, earlier when needed so that every promoted chunk is within `k`).
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    k: int = Field(default=8, ge=1)
    fetch_k: int = Field(default=40, ge=1)
    filter: dict[str, Any] | None = None
    rephrase: Any = None
    llm: Any = None
    router: Any = None
    routing: Literal["filter", "boost"] = "filter"
    route_weight: float = 0.5
    reranker: Any = None
    expand: int = Field(default=0, ge=0)
    rse: str | RSEConfig | None = None
    rse_overrides: dict[str, Any] = Field(default_factory=dict)
    max_tokens: int | None = Field(default=4000, ge=1)
    token_counter: str = "auto"
    fusion: Literal["rrf", "convex"] = "rrf"
    page_diversity: float = Field(default=0.0, ge=0.0)
    rerank_weight: float = Field(default=1.0, ge=0.0, le=1.0)
    sections: Any = None
    section_at: int = Field(default=3, ge=0)


def _resources(resources_or_rag: Any) -> list[Resource]:
    if isinstance(resources_or_rag, Resource):
        return [resources_or_rag]
    if isinstance(resources_or_rag, BaseRetriever):
        return [Resource.from_retriever("default", resources_or_rag)]
    if hasattr(resources_or_rag, "resources"):
        return list(resources_or_rag.resources)
    if isinstance(resources_or_rag, Sequence) and resources_or_rag and all(
            isinstance(r, Resource) for r in resources_or_rag):
        return list(resources_or_rag)
    raise ConfigError(f"retrieve needs a Resource, a list of Resources, a RAG or a retriever; "
                      f"got {type(resources_or_rag).__name__}")


def chunk_source(resource: Resource) -> Any:
    """Where to read a resource's neighbouring chunks (BM25 index or Chroma store), or None."""
    retriever = resource.retriever
    for attr in ("bm25", "index", "source"):
        if getattr(retriever, attr, None) is not None and hasattr(getattr(retriever, attr), "get_documents"):
            return getattr(retriever, attr)
    inner = getattr(retriever, "retriever", None)
    if isinstance(inner, BaseRetriever):
        return chunk_source(Resource.from_retriever(resource.name, inner))
    if isinstance(retriever, VectorStoreRetriever):
        return retriever.vectorstore
    return None


def _candidates(docs: Sequence[Document], resource: str | None = None) -> list[Candidate]:
    return [Candidate(document=d, score=d.metadata.get("score"), resource=resource or d.metadata.get("resource"),
                      scores=dict(d.metadata.get("scores") or {})) for d in docs]


@contextmanager
def _timed(result: RAGResult, step: str, **attributes: Any):
    """Time a step and run it as a child run (`rag.core.tracing.stage`) that tracers see."""
    start = time.perf_counter()
    try:
        with stage(step, **attributes) as current:
            yield current
    finally:
        result.timings[step] = result.timings.get(step, 0.0) + time.perf_counter() - start


def _reranker(value: Any) -> Any:
    if value == "embedding":
        from rag.retrieval.rerank import EmbeddingReranker

        return EmbeddingReranker()
    if value is not None and not hasattr(value, "rerank"):
        raise ConfigError(f"reranker must be a Reranker, 'embedding' or None; got {value!r}")
    return value


def retrieve(question: str, resources_or_rag: Any, **kwargs: Any) -> RAGResult:
    """Run the retrieval path described by `kwargs` (see `RetrievalSettings`) and record every step.

    Args:
        question: the user question.
        resources_or_rag: a `Resource`, a list of them, a `RAG`, or any retriever.
        **kwargs: `RetrievalSettings` fields.
    """
    unknown = sorted(set(kwargs) - set(RetrievalSettings.model_fields))
    if unknown:
        raise ConfigError(f"unknown retrieve option(s) {unknown}; valid: {', '.join(RetrievalSettings.model_fields)}")
    settings = RetrievalSettings(**kwargs)
    resources = _resources(resources_or_rag)
    reranker = _reranker(settings.reranker)
    counter = TokenCounter(settings.token_counter)
    result = RAGResult(question=question)
    start = time.perf_counter()

    queries = [question]
    if settings.rephrase is not None:
        with _timed(result, "rephrase"):
            queries = _rephraser(settings, resources).rephrase(question)
        result.rephrased_questions = queries[1:]

    flt = settings.filter
    route = None
    if settings.router is not None:
        with _timed(result, "route"):
            route = settings.router.route(question)
        result.extras["route"] = {"values": route.values, "confident": route.confident,
                                  "scores": dict(list(route.scores.items())[:10])}
        if settings.routing == "filter" and route.values:
            flt = and_filters(flt, {settings.router.key: {"$in": route.values}})

    with _timed(result, "search", k=settings.fetch_k, filter=flt is not None, queries=len(queries)) as current:
        per_list = _search(resources, queries, settings.fetch_k, flt, current.config)
    for res in resources:
        docs = [d for (name, _), ds in per_list.items() if name == res.name for d in ds]
        result.add_stage(f"candidates/{res.name}", _candidates(docs, res.name))

    with _timed(result, "fuse", lists=len(per_list)) as current:
        lists = {f"{name}|{qi}": documents_to_scored(docs) for (name, qi), docs in per_list.items()}
        fused = fuse(lists, method=settings.fusion, top_k=settings.fetch_k) if len(lists) > 1 else \
            [(d, float(d.metadata.get("score", -i))) for i, d in enumerate(next(iter(per_list.values()), []))]
        current.attributes["documents"] = len(fused)
    result.add_stage("fused", _candidates([d for d, _ in fused]))

    if route is not None and settings.routing == "boost":
        with _timed(result, "route"):
            fused = settings.router.boost(question, fused, weight=settings.route_weight)
        result.add_stage("filtered", _candidates([d for d, _ in fused]))

    scored = fused
    if reranker is not None:
        with _timed(result, "rerank"):
            scored = reranker.rerank(question, [d for d, _ in fused])
            if settings.rerank_weight < 1.0:
                scored = blend_rerank(fused, scored, weight=settings.rerank_weight)
        result.add_stage("reranked", _candidates([d for d, _ in scored]))

    if settings.page_diversity:
        with _timed(result, "diversify"):
            scored = diversify(scored, discount=settings.page_diversity)
        result.add_stage("diversified", _candidates([d for d, _ in scored]))

    if settings.sections is not None:
        if not hasattr(settings.sections, "promote"):
            raise ConfigError(f"sections must be a SectionRouter or None, got {type(settings.sections).__name__}")
        with _timed(result, "sections"):
            top_k = settings.k if settings.rse is None and not settings.expand else None  # a top-k context
            scored, named = settings.sections.promote(question, scored, at=settings.section_at, within=top_k,
                                                      filter=flt)
        result.extras["sections"] = [{"heading": s.heading, "document": s.document, "score": round(s.score, 4)}
                                     for s in named]
        result.add_stage("sections", _candidates([d for d, _ in scored]))

    with _timed(result, "select"):
        context = _select(result, resources, scored, settings)
    with _timed(result, "budget", max_tokens=settings.max_tokens) as current:
        result.context = apply_budget(context, settings.max_tokens, counter=counter)
        current.attributes["documents"] = len(result.context)
    result.timings["total"] = time.perf_counter() - start
    result.extras["token_counter"] = counter.name
    result.extras["context_tokens"] = sum(d.metadata.get("tokens", 0) for d in result.context)
    result.extras["settings"] = settings.model_dump(exclude={"llm", "router", "reranker", "rephrase", "sections"}, mode="json")
    return result


async def aretrieve(question: str, resources_or_rag: Any, **kwargs: Any) -> RAGResult:
    """Async `retrieve` (runs in a worker thread; its searches run concurrently inside)."""
    return await asyncio.to_thread(retrieve, question, resources_or_rag, **kwargs)


def _rephraser(settings: RetrievalSettings, resources: list[Resource]) -> Any:
    from rag.retrieval.rephrase import Rephraser

    if hasattr(settings.rephrase, "rephrase"):
        return settings.rephrase
    modes = [settings.rephrase] if isinstance(settings.rephrase, str) else list(settings.rephrase)
    return Rephraser(modes=modes, llm=settings.llm, retriever=resources[0].retriever if "feedback" in modes else None)


def _search(resources: list[Resource], queries: list[str], fetch_k: int, flt: dict[str, Any] | None,
            config: Any = None) -> dict[tuple[str, int], list[Document]]:
    jobs = [(res, qi, q) for res in resources for qi, q in enumerate(queries)]
    search_kwargs = {"k": fetch_k, **({"filter": flt} if flt else {})}

    def run(job: tuple[Resource, int, str]) -> list[Document]:
        res, _, query = job
        with stage(f"search/{res.name}", config, resource=res.name, k=fetch_k, filter=flt is not None) as current:
            docs = res.retrieve(query, search_kwargs=search_kwargs, config=current.config)
            current.attributes["documents"] = len(docs)
        return [Document(page_content=d.page_content, metadata={**d.metadata, "resource": res.name}, id=d.id)
                for d in docs]

    if len(jobs) == 1:
        return {(jobs[0][0].name, 0): run(jobs[0])}
    with ThreadPoolExecutor(max_workers=min(8, len(jobs)), thread_name_prefix="rag-retrieve") as pool:
        found = list(pool.map(run, jobs))
    return {(res.name, qi): docs for (res, qi, _), docs in zip(jobs, found, strict=True)}


def _select(result: RAGResult, resources: list[Resource], scored: list[tuple[Document, float]],
            settings: RetrievalSettings) -> list[Document]:
    """RSE segments, expanded neighbours, or the top k, per the settings."""
    if settings.rse is None and not settings.expand:
        return [d for d, _ in scored[: settings.k]]
    by_resource: dict[str, list[tuple[Document, float]]] = {}
    for doc, score in scored:
        by_resource.setdefault(doc.metadata.get("resource", resources[0].name), []).append((doc, score))
    sources = {res.name: chunk_source(res) for res in resources}
    missing = [name for name in by_resource if sources.get(name) is None]
    if missing:
        raise ConfigError(f"RSE and neighbour expansion need a chunk source; resource(s) {missing} have none "
                          "(use a HybridRetriever, BM25Retriever or a Chroma vector store)")
    if settings.rse is not None:
        segments = []
        for name, hits in by_resource.items():
            for seg in relevant_segments([hits], sources[name], preset=settings.rse, **settings.rse_overrides):
                seg.metadata["resource"] = name
                segments.append(seg)
        result.segments = sorted(segments, key=lambda s: -s.score)
        return segment_documents(result.segments)
    ranked = [(d, s) for d, s in scored[: settings.k]]
    expanded: list[tuple[Document, int]] = []
    for name, hits in by_resource.items():
        top = [d for d in ranked if d[0].metadata.get("resource", resources[0].name) == name]
        for doc in expand_neighbours([d for d, _ in top], sources[name], window=settings.expand):
            doc.metadata["resource"] = name
            expanded.append((doc, len(expanded)))
    return [d for d, _ in sorted(expanded, key=lambda p: -float(p[0].metadata.get("score", 0.0)))] \
        if len(by_resource) > 1 else [d for d, _ in expanded]
