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
Neighbour expansion and RSE read chunks from the resource's chunk source (its retriever's
`chunk_source`: a knowledge base, the BM25 index of a `HybridRetriever` / `BM25Retriever`, or the
Chroma store of a vector-store retriever). The stages live in `rag.core.pipeline`; a `RAG` with
retrieval settings runs the same ones.

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
from typing import Any

from langchain_core.retrievers import BaseRetriever
from pydantic import ValidationError

from rag.base.errors import ConfigError, InputError
from rag.base.result import RAGResult
from rag.base.tracing import stage
from rag.core.pipeline import chunk_source, combine, search_branch
from rag.core.resource import Resource
from rag.core.retrieval_settings import RetrievalSettings

__all__ = ["RetrievalSettings", "aretrieve", "chunk_source", "retrieve", "retrieval_settings"]


def retrieval_settings(**kwargs: Any) -> RetrievalSettings:
    """Validated `RetrievalSettings`; a `ConfigError` names the bad or unknown option and lists the valid ones.

    Example:
        >>> try:
        ...     retrieval_settings(k=0)
        ... except ConfigError as err:
        ...     print(err)
        invalid retrieval setting k=0: Input should be greater than or equal to 1
    """
    unknown = sorted(set(kwargs) - set(RetrievalSettings.model_fields))
    if unknown:
        raise ConfigError(f"unknown retrieve option(s) {unknown}; valid: {', '.join(RetrievalSettings.model_fields)}")
    try:
        return RetrievalSettings(**kwargs)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(part) for part in error["loc"])
        raise ConfigError(f"invalid retrieval setting {key}={kwargs.get(key, error.get('input'))!r}: {error['msg']}") \
            from None


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


def retrieve(question: str, resources_or_rag: Any, **kwargs: Any) -> RAGResult:
    """Run the retrieval path described by `kwargs` (see `RetrievalSettings`) and record every step.

    Args:
        question: the user question (a non-empty string).
        resources_or_rag: a `Resource`, a list of them, a `RAG`, or any retriever.
        **kwargs: `RetrievalSettings` fields.

    Raises:
        InputError: an empty question. ConfigError: a bad option (the message lists the valid ones).
    """
    if not isinstance(question, str) or not question.strip():
        raise InputError("the question must be a non-empty string")
    settings = retrieval_settings(**kwargs)
    resources = _resources(resources_or_rag)
    start = time.perf_counter()
    with stage("search", k=settings.fetch_k, filter=settings.filter is not None) as current:
        if len(resources) == 1:
            branches = [search_branch(question, resources[0], settings, config=current.config)]
        else:
            with ThreadPoolExecutor(max_workers=min(8, len(resources)), thread_name_prefix="rag-retrieve") as pool:
                branches = list(pool.map(lambda res: search_branch(question, res, settings, config=current.config),
                                         resources))
    result = combine(branches, resources, settings)
    result.timings["total"] = time.perf_counter() - start
    return result


async def aretrieve(question: str, resources_or_rag: Any, **kwargs: Any) -> RAGResult:
    """Async `retrieve` (runs in a worker thread; its searches run concurrently inside)."""
    return await asyncio.to_thread(retrieve, question, resources_or_rag, **kwargs)
