"""A resource's search settings (`search_kwargs`): the keys every resource understands, checked once.

`max_chunks` is a resource's cap: at most that many of its chunks in the context (in a plain RAG,
its top `max_chunks`). `k` in a resource's `search_kwargs` is the seed's spelling of the same, kept
as a deprecated alias: it still works and is stored as given by the seed (`{"k": 4}`), but new code
and configs say `max_chunks`, so that `k` means one thing everywhere else: the number of chunks the
pipeline returns (`RetrievalSettings.k`, `configurable["k"]`, `rag ask --k`, `rag eval qa --k`).

Example:
    >>> validate_search_kwargs({"max_chunks": 2, "filter": {"year": 2024}})
    {'k': 2, 'filter': {'year': {'$eq': 2024}}}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig

from rag.base.errors import ConfigError
from rag.base.filters import and_filters, validate_filter
from rag.base.portable import check_k
from rag.compose.request import BUILD_KEY, REQUEST_KEY, plain_search_kwargs

__all__ = ["DEFAULT_K", "SEARCH_KWARGS", "configured_search_kwargs", "max_chunks", "validate_search_kwargs"]

#: The search settings every resource understands, whatever its backend. `max_chunks` caps the
#: resource's chunks in the context; `k` is the seed's spelling of the same (stored as `k`).
SEARCH_KWARGS = ("max_chunks", "k", "filter", "fetch_k", "lambda_mult", "score_threshold")
DEFAULT_K = 4


def validate_search_kwargs(search_kwargs: Mapping[str, Any] | None, *, where: str = "search_kwargs") -> dict[str, Any]:
    """Check search settings and return a copy with the filter in canonical form.

    `max_chunks` is stored as `k` (the seed's spelling; both mean "at most this many of the
    resource's chunks in the context").

    Example:
        >>> validate_search_kwargs({"max_chunks": 2, "filter": {"year": 2024}})
        {'k': 2, 'filter': {'year': {'$eq': 2024}}}
    """
    if search_kwargs is None:
        return {}
    if not isinstance(search_kwargs, Mapping):
        raise ConfigError(f"{where} must be a dict, got {type(search_kwargs).__name__}")
    out = dict(search_kwargs)
    unknown = sorted(set(out) - set(SEARCH_KWARGS))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; valid: {', '.join(SEARCH_KWARGS)}")
    for key in ("max_chunks", "k", "fetch_k"):
        if key in out:
            out[key] = check_k(out[key], name=f"{where}.{key}")
    if "max_chunks" in out:
        cap = out.pop("max_chunks")
        if out.get("k", cap) != cap:
            raise ConfigError(f"{where}: max_chunks={cap} and k={out['k']} disagree; k is the seed's spelling of "
                              "max_chunks: give one")
        out = {"k": cap, **out}
    if "filter" in out:
        out["filter"] = validate_filter(out["filter"])
        if out["filter"] is None:
            del out["filter"]
    return out


def configured_search_kwargs(config: RunnableConfig | None, name: str, *, request: bool = False) -> dict[str, Any]:
    """Resource `name`'s search settings in a run's config: build-time ones, then the request's on top.

    `RAG.chain(retrieval_chain=...)` puts build-time settings under
    `configurable["rag_retrieval_defaults"]`; a request's `configurable["retrieval_chain"]` wins
    over them key by key. With `request`, the request's `k` and `filter` for every resource
    (`configurable["k"]`, `configurable["filter"]`) come first (the filter is ANDed): what a
    resource searched on its own (`as_runnable`) takes from a request.
    """
    configurable = (config or {}).get("configurable") or {}
    build, given = (((configurable.get(key) or {}).get(name) or {}).get("search_kwargs") or {}
                    for key in (BUILD_KEY, REQUEST_KEY))
    merged = {**build, **given}
    if not request:
        return merged
    shared = plain_search_kwargs(config)
    if shared.get("filter") and merged.get("filter"):
        merged["filter"] = and_filters(shared["filter"], merged["filter"])
    return {**shared, **merged}


def max_chunks(search_kwargs: Mapping[str, Any]) -> int | None:
    """A resource's cap in validated `search_kwargs` (`max_chunks`, stored under the seed's key `k`), or None."""
    return search_kwargs.get("k")
