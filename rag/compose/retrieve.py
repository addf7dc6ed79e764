"""`retrieve`: the retrieval of `RAG(...).chain()`, with every intermediate step in a `RAGResult`.

`retrieve(question, resources)` runs the retrieval step of `RAG(resources=resources).chain()`
(the recommended pipeline, `RetrievalSettings()`), so its context is the chain's; keyword
arguments change `RetrievalSettings` fields for this call.

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
Neighbour expansion and RSE read chunks from the resource's chunk source (its retriever's
`chunk_source`: a knowledge base, the BM25 index of a `HybridRetriever` / `BM25Retriever`, or the
Chroma store of a vector-store retriever). The stages live in `rag.compose.pipeline`.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from rag.compose.resource import Resource
    >>> res = Resource.from_texts("notes", ["Paris is in France.", "Rome is in Italy."],
    ...                           embedding=DeterministicFakeEmbedding(size=16))
    >>> result = retrieve("Where is Rome?", res, k=1, max_tokens=50, token_counter="approx")
    >>> len(result.context), {"search", "fuse", "budget"} <= set(result.timings)
    (1, True)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig, RunnableLambda

from rag.base.acl import PRINCIPAL_KEY, PUBLIC_BY_DEFAULT_KEY
from rag.base.errors import ConfigError
from rag.base.result import Candidate, RAGResult
from rag.base.text import lexical_overlap, tokenize
from rag.compose.generator import RAG
from rag.compose.input_step import enter
from rag.compose.pipeline import chunk_source
from rag.compose.request import OVERRIDES_KEY, SINK_KEY, configurable
from rag.compose.resource import Resource
from rag.compose.retrieval_settings import RetrievalSettings, retrieval_settings

__all__ = ["RetrievalSettings", "aretrieve", "as_retrieval_rag", "chunk_source", "retrieve", "retrieval_settings",
           "run_retrieval"]

#: The generation chain of a RAG built only to retrieve (never called).
_NO_GENERATION = RunnableLambda(lambda _: "", name="no_generation")


def as_retrieval_rag(resources_or_rag: Any) -> RAG:
    """The `RAG` whose chain `retrieve` runs: the RAG itself, or a default `RAG` over the resources."""
    if isinstance(resources_or_rag, RAG):
        return resources_or_rag
    if isinstance(resources_or_rag, Resource):
        resources = [resources_or_rag]
    elif isinstance(resources_or_rag, BaseRetriever):
        resources = [Resource.from_retriever("default", resources_or_rag)]
    elif isinstance(resources_or_rag, Sequence) and resources_or_rag and all(
            isinstance(r, Resource) for r in resources_or_rag):
        resources = list(resources_or_rag)
    else:
        raise ConfigError(f"retrieve needs a Resource, a list of Resources, a RAG or a retriever; "
                          f"got {type(resources_or_rag).__name__}")
    return RAG(resources=resources, generation_chain=_NO_GENERATION)


def run_retrieval(rag: RAG, question: str, *, options: dict[str, Any] | None = None,
                  config: RunnableConfig | None = None) -> RAGResult:
    """Run the retrieval step of `rag.chain()` (its input step, `rag.compose.input_step.enter`, then its
    `resources_retrieval_chain`) and record what it did.

    `options` are `RetrievalSettings` fields applied on top of the RAG's settings and the request's; the
    input step checks them with the question and the rest of the request, before any search.
    The pipeline's aggregate hands back its `RAGResult` (every stage, timings, extras); a RAG whose
    `resources_retrieval_chain` is its own records the documents it returned as stage ``"retrieved"``.
    """
    sink: list[RAGResult] = []
    values = {**configurable(config), SINK_KEY: sink}
    if options:
        values[OVERRIDES_KEY] = {**(values.get(OVERRIDES_KEY) or {}), **options}
    start = time.perf_counter()
    inputs, config = enter(rag, question, {**(config or {}), "configurable": values})   # the chain's input step
    context = rag.resources_retrieval_chain.invoke(inputs["question"], config)
    result = sink[-1] if sink else _recorded(question, context)
    result.context = list(context)
    result.timings["total"] = result.timings["retrieve"] = time.perf_counter() - start
    return result


def _recorded(question: str, docs: Sequence[Document]) -> RAGResult:
    """A result whose stage ``"retrieved"`` holds `docs` with their retriever score, rank and lexical overlap."""
    result = RAGResult(question=question)
    terms = tokenize(question)
    result.add_stage("retrieved", [
        Candidate(document=d, score=_score(d), resource=d.metadata.get("resource"),
                  scores={"lexical": round(lexical_overlap(terms, tokenize(d.page_content)), 4), "rank": float(rank)})
        for rank, d in enumerate(docs, start=1)])
    return result


def _score(doc: Document) -> float | None:
    for key in ("score", "relevance_score", "rerank_score", "rrf_score"):
        value = doc.metadata.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def retrieve(question: str, resources_or_rag: Any, *, principal: Any = None, public_by_default: bool = False,
             **kwargs: Any) -> RAGResult:
    """Run the retrieval of `RAG(...).chain()` and record every step (a view of the chain).

    The context is the one `RAG(resources=...).chain().invoke(question)` returns (the RAG's own
    when a `RAG` is given), with `kwargs` (`RetrievalSettings` fields) on top of its settings.

    Args:
        question: the user question (a non-empty string).
        resources_or_rag: a `Resource`, a list of them, a `RAG`, or any retriever.
        principal: who is asking (`rag.base.acl.Principal`): only chunks it may read are searched, in every
            stage (the chain's `configurable["principal"]`); `public_by_default` also shows chunks without
            permissions.
        **kwargs: `RetrievalSettings` fields.

    Raises:
        InputError: an empty question. ConfigError: a bad option (the message lists the valid ones); both
        from the chain's input step, before any search.
    """
    config = None if principal is None else {"configurable": {PRINCIPAL_KEY: principal,
                                                              PUBLIC_BY_DEFAULT_KEY: public_by_default}}
    return run_retrieval(as_retrieval_rag(resources_or_rag), question, options=kwargs, config=config)


async def aretrieve(question: str, resources_or_rag: Any, **kwargs: Any) -> RAGResult:
    """Async `retrieve` (runs in a worker thread; its searches run concurrently inside; `principal=` too)."""
    return await asyncio.to_thread(retrieve, question, resources_or_rag, **kwargs)
