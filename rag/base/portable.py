"""The retriever contracts: `PortableRetriever` (takes `k` and a portable `filter` per call) and
`ChunkSource` (reads stored chunks by filter, for neighbour expansion and RSE).

A retriever of this library is one method, `_search(query, *, k, filter, run_manager)`, returning
`(document, score)` pairs best first. The base class does the rest, on the sync and the async path:

- `k`: a field (the default) that a call's `k=` replaces; both are checked (`check_k`): an
  integer from 1 to `MAX_K`, never a bool, a float or 0 (0 is an error, not "the default": leave
  `k` out for the retriever's own);
- `filter`: a field (the default) ANDed with a call's `filter=` (a call narrows, never widens),
  both checked in the portable dialect (`rag.base.filters`); `_search` receives the canonical one;
- the score: written to `metadata["score"]` of a copy of each document (the stored one is not
  changed); None leaves the document as it is (a merged segment that carries its own score);
- the search options: the ones in the class's `search_options` reach `_search`; otherwise
  `score_threshold` drops the results scoring below it and `fetch_k` (a candidate pool's size) is
  ignored; any other keyword (`lambda_mult`, which asks for MMR, a typo) is a `ConfigError`
  listing the valid ones;
- the async path runs `_search` in a worker thread (the work behind it is blocking); a class with
  a real async search overrides `_asearch`;
- `chunk_source`: where the retriever's chunks can be read back (None: nowhere).

Example:
    >>> from langchain_core.documents import Document
    >>> class Echo(PortableRetriever):
    ...     def _search(self, query, *, k, filter, run_manager):
    ...         return [(Document(page_content=f"{query} {i}"), 1.0 / (i + 1)) for i in range(k)]
    >>> docs = Echo(k=3).invoke("q", k=2)
    >>> [(d.page_content, d.metadata["score"]) for d in docs]
    [('q 0', 1.0), ('q 1', 0.5)]
    >>> import asyncio
    >>> len(asyncio.run(Echo().ainvoke("q")))
    4
    >>> Echo().invoke("q", k=0)
    Traceback (most recent call last):
    ...
    rag.base.errors.ConfigError: k must be a positive integer, got 0 (leave k out for the default, 4)

A retriever whose chunks can be read back (a knowledge base, a BM25 index, a Chroma store)
returns them from its `chunk_source` property; a wrapper returns its inner retriever's.
`find_chunk_source(retriever)` asks the retriever, so `retrieve()` never probes attributes:

    >>> class Chunks:
    ...     def get_documents(self, filter=None):
    ...         return [Document(page_content="c")]
    >>> isinstance(Chunks(), ChunkSource)
    True
"""

from __future__ import annotations

import asyncio
import numbers
from typing import Any, ClassVar, Protocol, runtime_checkable

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, field_validator

from rag.base.errors import ConfigError, short_repr
from rag.base.filters import and_filters, validate_filter

__all__ = ["MAX_K", "PORTABLE_OPTIONS", "ChunkRanges", "ChunkSource", "PortableRetriever", "Scored", "check_k", "find_chunk_source"]

#: The search options besides `k` and `filter` that every portable retriever takes (`fetch_k` only sizes
#: a candidate pool, so a retriever without one ignores it; `score_threshold` the base class applies).
PORTABLE_OPTIONS = ("fetch_k", "score_threshold")
#: The largest `k` (and `fetch_k`): the stores' 32-bit limit, far above any corpus a call could return.
MAX_K = 2**31 - 1
#: What `_search` returns: documents best first, each with its score (None: keep the document's own).
Scored = list[tuple[Document, float | None]]


def check_k(k: Any, *, name: str = "k", default: int | None = None) -> int:
    """`k` as an int when it is an integer from 1 to `MAX_K`; else a `ConfigError` saying what is valid.

    0 is an error, not "the default" (a call leaves `k` out for that); bools and floats are errors
    (`2.0` is not a count); above `MAX_K` no store could return more, and some cannot take it.

    Example:
        >>> check_k(3)
        3
        >>> check_k(2.0)
        Traceback (most recent call last):
        ...
        rag.base.errors.ConfigError: k must be a positive integer, got 2.0
    """
    integral = isinstance(k, numbers.Integral) and not isinstance(k, bool)
    if integral and 1 <= int(k) <= MAX_K:
        return int(k)
    hint = ""
    if integral and int(k) == 0:
        hint = f" (leave {name} out for the default" + (f", {default})" if default is not None else ")")
    elif integral and int(k) > MAX_K:
        hint = f" above the largest k the stores take, {MAX_K:,}"
    raise ConfigError(f"{name} must be a positive integer, got {short_repr(k)}{hint}")


@runtime_checkable
class ChunkSource(Protocol):
    """Stored chunks readable by a portable filter (`{"doc_id": ..., "chunk_index": {"$in": [...]}}`)."""

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        """Chunks matching `filter` (all when None), in no particular order."""
        ...


@runtime_checkable
class ChunkRanges(Protocol):
    """A chunk source that reads one document's chunks by position directly (a lexical index: `BM25Index`, `FTSIndex`)."""

    def chunks_of(self, doc_id: Any, start: int, end: int) -> list[Document]:
        """The chunks of `doc_id` with `start <= chunk_index < end`."""
        ...


def find_chunk_source(retriever: Any) -> ChunkSource | None:
    """The retriever's `chunk_source` (None when it has none, e.g. a web search retriever)."""
    source = getattr(type(retriever), "chunk_source", None)
    if source is None:
        return _vectorstore_source(retriever)
    found = retriever.chunk_source
    return found if isinstance(found, ChunkSource) else None


def _vectorstore_source(retriever: Any) -> ChunkSource | None:
    # LangChain's VectorStoreRetriever: its store, when the store reads chunks back by filter
    store = getattr(retriever, "vectorstore", None)
    return store if isinstance(store, ChunkSource) else None


class PortableRetriever(BaseRetriever):
    """A `BaseRetriever` taking `k` and a portable `filter` per call; subclasses implement `_search`.

    Attributes:
        k: how many documents a call returns when it gives no `k` (a positive integer).
        filter: a default portable filter, ANDed with each call's.
        search_options: (class attribute) the options of `PORTABLE_OPTIONS` that `_search` takes.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    accepts_portable_filter: ClassVar[bool] = True
    search_options: ClassVar[tuple[str, ...]] = ()

    k: int = 4
    filter: dict[str, Any] | None = None

    @field_validator("k", mode="before")
    @classmethod
    def _check_k_field(cls, value: Any) -> Any:
        return value if value is None else check_k(value)

    @field_validator("filter", mode="before")
    @classmethod
    def _check_filter_field(cls, value: Any) -> Any:
        return validate_filter(value)

    @property
    def chunk_source(self) -> ChunkSource | None:
        """Where this retriever's chunks can be read back (None: nowhere). Wrappers return their inner one's."""
        return None

    def _search(self, query: str, *, k: int, filter: dict[str, Any] | None,
                run_manager: CallbackManagerForRetrieverRun, **options: Any) -> Scored:
        """The best `k` documents for `query` that match `filter` (canonical or None), with their scores."""
        raise NotImplementedError(f"{type(self).__name__} must implement _search(query, *, k, filter, run_manager)")

    async def _asearch(self, query: str, *, k: int, filter: dict[str, Any] | None,
                       run_manager: AsyncCallbackManagerForRetrieverRun, **options: Any) -> Scored:
        """Async `_search`; by default `_search` in a worker thread (the work behind it blocks)."""
        return await asyncio.to_thread(self._search, query, k=k, filter=filter, run_manager=run_manager.get_sync(),
                                       **options)

    def _call_settings(self, k: Any, filter: Any, options: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
        """The checked `k`, the combined canonical filter and the options `_search` takes."""
        unknown = sorted(set(options) - set(PORTABLE_OPTIONS) - set(self.search_options))
        if unknown:
            valid = ", ".join(("k", "filter", *dict.fromkeys((*self.search_options, *PORTABLE_OPTIONS))))
            raise ConfigError(f"unknown search setting(s) {unknown} for {type(self).__name__}; valid: {valid}")
        if k is not None:
            k = check_k(k, default=self.k)
        elif self.k is not None:
            k = self.k
        flt = and_filters(self.filter, filter)
        return k, flt, {key: value for key, value in options.items() if key in self.search_options}

    def _threshold(self, options: dict[str, Any]) -> float | None:
        """The `score_threshold` the base class applies (None when `_search` applies it itself)."""
        value = None if "score_threshold" in self.search_options else options.get("score_threshold")
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
            raise ConfigError(f"score_threshold must be a number, got {short_repr(value)}")
        return value

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: Any = None, filter: Any = None, **options: Any) -> list[Document]:
        k, flt, kept = self._call_settings(k, filter, options)
        threshold = self._threshold(options)
        return _scored(self._search(query, k=k, filter=flt, run_manager=run_manager, **kept), threshold)

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       k: Any = None, filter: Any = None, **options: Any) -> list[Document]:
        # LangChain's default async path would drop k and filter
        k, flt, kept = self._call_settings(k, filter, options)
        threshold = self._threshold(options)
        return _scored(await self._asearch(query, k=k, filter=flt, run_manager=run_manager, **kept), threshold)


def _scored(hits: Scored, threshold: float | None) -> list[Document]:
    """The documents scoring at least `threshold`, each with its score in `metadata["score"]` (a copy:
    stored documents never change)."""
    return [doc if score is None else Document(page_content=doc.page_content, id=doc.id,
                                               metadata={**doc.metadata, "score": float(score)})
            for doc, score in hits if threshold is None or score is None or score >= threshold]
