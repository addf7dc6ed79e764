"""Per-request retrieval settings: what a `RAG` chain reads from `config["configurable"]`.

A request sets the pipeline's `k`, `fetch_k`, `filter` and `max_tokens` with LangChain's own
channel, `config={"configurable": {"k": 8}}` or `chain.with_config(configurable={...})`, and
each resource's search settings with the seed's `{"retrieval_chain": {name: {"search_kwargs":
{...}}}}`. `CONFIG_SPECS` declares them, so `rag.chain().config_specs` lists them for LangChain
tooling (playgrounds, `config_schema()`, tracing UIs).

A request's `filter` is ANDed with the RAG's own (a request narrows, never widens); `k`,
`fetch_k` and `max_tokens` replace the RAG's. `rag.retrieve` and `airag` pass any other
`RetrievalSettings` field under `OVERRIDES_KEY` and receive the run's `RAGResult` through
`SINK_KEY` (a list the aggregate step appends to).

A request's `principal` (`rag.base.acl.Principal`) ANDs its permission filter onto the filter,
exactly where a request's filter goes, so every stage that reads chunks applies it; with
`public_by_default: true` chunks without permissions are visible too (see docs/security.md).

Example:
    >>> from rag.compose.retrieval_settings import RetrievalSettings, retrieval_settings
    >>> request_settings(RetrievalSettings(), {"configurable": {"k": 5, "filter": {"year": 2024}}}).k
    5
    >>> sorted(spec.id for spec in CONFIG_SPECS)
    ['fetch_k', 'filter', 'k', 'max_tokens', 'principal', 'public_by_default', 'retrieval_chain']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.utils import ConfigurableFieldSpec

from rag.base.acl import PRINCIPAL_KEY, PUBLIC_BY_DEFAULT_KEY, principal_of
from rag.base.errors import ConfigError
from rag.base.filters import and_filters, validate_filter
from rag.base.portable import check_k
from rag.compose.retrieval_settings import RetrievalSettings, retrieval_settings

__all__ = ["BUILD_KEY", "CONFIG_SPECS", "OVERRIDES_KEY", "REQUEST_FIELDS", "REQUEST_KEY", "SINK_KEY",
           "access_filter", "configurable", "plain_search_kwargs", "request_settings"]

REQUEST_KEY = "retrieval_chain"           # per-resource search settings (the seed's, public)
BUILD_KEY = "rag_retrieval_defaults"      # per-resource settings given to chain() (internal)
OVERRIDES_KEY = "rag_retrieval_overrides"  # RetrievalSettings fields from retrieve() / airag() (internal)
SINK_KEY = "rag_retrieval_result"         # a list the aggregate appends the run's RAGResult to (internal)
#: The pipeline settings a request may set directly in `configurable`.
REQUEST_FIELDS = ("k", "fetch_k", "filter", "max_tokens")

CONFIG_SPECS = [
    ConfigurableFieldSpec(id="k", annotation=int | None, name="k", default=None,
                          description="chunks in the context (with a budget: at most this many)"),
    ConfigurableFieldSpec(id="fetch_k", annotation=int | None, name="fetch_k", default=None,
                          description="candidates searched per resource and query"),
    ConfigurableFieldSpec(id="filter", annotation=dict | None, name="filter", default=None,
                          description="a portable metadata filter ($eq $ne $gt $gte $lt $lte $in $nin $and $or "
                                      "$not), ANDed with the RAG's own"),
    ConfigurableFieldSpec(id="max_tokens", annotation=int | None, name="max_tokens", default=None,
                          description="the context budget in tokens (characters are bounded too)"),
    ConfigurableFieldSpec(id=REQUEST_KEY, annotation=dict | None, name=REQUEST_KEY, default=None,
                          description="per-resource search settings: {name: {'search_kwargs': {'max_chunks': 4, "
                                      "'filter': {...}}}}"),
    ConfigurableFieldSpec(id=PRINCIPAL_KEY, annotation=Any, name=PRINCIPAL_KEY, default=None,
                          description="who is asking (rag.base.acl.Principal): only chunks it may read are searched"),
    ConfigurableFieldSpec(id=PUBLIC_BY_DEFAULT_KEY, annotation=bool, name=PUBLIC_BY_DEFAULT_KEY, default=False,
                          description="with a principal: chunks without permissions are visible too"),
]


def configurable(config: RunnableConfig | None) -> Mapping[str, Any]:
    """The `configurable` dict of a run's config (empty when there is none)."""
    return (config or {}).get("configurable") or {}


def request_settings(base: RetrievalSettings | None, config: RunnableConfig | None) -> RetrievalSettings | None:
    """The pipeline settings of one run: `base` with the request's `configurable` values on top.

    Returns None for a plain RAG (`base` None); a plain RAG takes only `k` and `filter` per request
    (as every resource's `search_kwargs`, see `plain_search_kwargs`).

    Raises:
        ConfigError: a bad value, or a pipeline setting asked of a plain RAG.
    """
    values = configurable(config)
    overrides = dict(values.get(OVERRIDES_KEY) or {})
    overrides.update({key: values[key] for key in REQUEST_FIELDS if values.get(key) is not None})
    access = access_filter(config)
    if access is not None:
        overrides["filter"] = and_filters(validate_filter(overrides.get("filter")), access)
    if base is None:
        extra = sorted(set(overrides) - {"k", "filter"})
        if extra:
            raise ConfigError(f"{extra} need the retrieval pipeline, but this RAG was built with retrieval='plain' "
                              "(each resource's top k, nothing else); build it without retrieval= to use them")
        return None
    if not overrides:
        return base
    if "filter" in overrides:
        overrides["filter"] = and_filters(base.filter, validate_filter(overrides["filter"]))
    return retrieval_settings(**{**dict(base), **overrides})


def plain_search_kwargs(config: RunnableConfig | None) -> dict[str, Any]:
    """A request's `k` and `filter` for every resource of a plain RAG (validated; the filter canonical)."""
    values = configurable(config)
    overrides = {**(values.get(OVERRIDES_KEY) or {}),
                 **{key: values[key] for key in ("k", "filter") if values.get(key) is not None}}
    out: dict[str, Any] = {}
    if overrides.get("k") is not None:
        out["k"] = check_k(overrides["k"])
    flt = and_filters(validate_filter(overrides.get("filter")), access_filter(config))
    if flt is not None:
        out["filter"] = flt
    return out


def access_filter(config: RunnableConfig | None) -> dict[str, Any] | None:
    """The permission filter of a run's principal (`configurable["principal"]`), or None without one.

    Raises:
        ConfigError: the principal is not a `Principal` (or a mapping of one): never run unfiltered.
    """
    values = configurable(config)
    principal = principal_of(values.get(PRINCIPAL_KEY))
    if principal is None:
        return None
    return principal.filter(public_by_default=values.get(PUBLIC_BY_DEFAULT_KEY) is True)
