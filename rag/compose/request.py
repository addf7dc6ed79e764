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

The chain's input step (`RAG.retrieval_step`, the first step of `RAG.chain()`) resolves all of this
once per request into one frozen `RagRequest` (the question, the pipeline settings with `k`,
`fetch_k`, the filter and the budget, each resource's search settings, the principal) and puts it
under `RAG_REQUEST_KEY`; the stages read it (`request_of`) and trust it: nothing is validated again.

Example:
    >>> from rag.compose.retrieval_settings import RetrievalSettings, retrieval_settings
    >>> request_settings(RetrievalSettings(), {"configurable": {"k": 5, "filter": {"year": 2024}}}).k
    5
    >>> sorted(spec.id for spec in CONFIG_SPECS)
    ['fetch_k', 'filter', 'k', 'max_tokens', 'principal', 'public_by_default', 'retrieval_chain']
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.utils import ConfigurableFieldSpec

from rag.base.acl import PRINCIPAL_KEY, PUBLIC_BY_DEFAULT_KEY, Principal, principal_of
from rag.base.errors import ConfigError
from rag.base.filters import and_filters, validate_filter
from rag.base.portable import check_k
from rag.compose.retrieval_settings import RetrievalSettings, retrieval_settings

__all__ = ["BUILD_KEY", "CONFIG_SPECS", "OVERRIDES_KEY", "RAG_REQUEST_KEY", "REQUEST_FIELDS", "REQUEST_KEY",
           "SINK_KEY", "RagRequest", "access_filter", "configurable", "open_request", "plain_search_kwargs",
           "request_of", "request_settings"]

REQUEST_KEY = "retrieval_chain"           # per-resource search settings (the seed's, public)
BUILD_KEY = "rag_retrieval_defaults"      # per-resource settings given to chain() (internal)
OVERRIDES_KEY = "rag_retrieval_overrides"  # RetrievalSettings fields from retrieve() / airag() (internal)
SINK_KEY = "rag_retrieval_result"         # a list the aggregate appends the run's RAGResult to (internal)
RAG_REQUEST_KEY = "rag_request"           # the run's RagRequest, resolved by the chain's input step (internal)
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
    return _settings(base, _request_values(config))


def plain_search_kwargs(config: RunnableConfig | None) -> dict[str, Any]:
    """A request's `k` and `filter` for every resource of a plain RAG (validated; the filter canonical)."""
    return _plain(_request_values(config))


def _request_values(config: RunnableConfig | None) -> dict[str, Any]:
    """The request's pipeline values (`OVERRIDES_KEY`, then `REQUEST_FIELDS`), the filter validated once and
    ANDed with the principal's permission filter."""
    values = configurable(config)
    overrides = dict(values.get(OVERRIDES_KEY) or {})
    overrides.update({key: values[key] for key in REQUEST_FIELDS if values.get(key) is not None})
    if "filter" in overrides:
        overrides["filter"] = validate_filter(overrides["filter"])
    access = access_filter(config)
    if access is not None:
        overrides["filter"] = and_filters(overrides.get("filter"), access)
    if overrides.get("filter") is None:
        overrides.pop("filter", None)
    return overrides


def _settings(base: RetrievalSettings | None, overrides: dict[str, Any]) -> RetrievalSettings | None:
    if base is None:
        unknown = sorted(set(overrides) - set(RetrievalSettings.model_fields))
        if unknown:
            raise ConfigError(f"unknown retrieve option(s) {unknown}; valid: {', '.join(RetrievalSettings.model_fields)}")
        extra = sorted(set(overrides) - {"k", "filter"})
        if extra:
            raise ConfigError(f"{extra} need the retrieval pipeline, but this RAG was built with retrieval='plain' "
                              "(each resource's top k, nothing else); build it without retrieval= to use them")
        return None
    if not overrides:
        return base
    if "filter" in overrides:
        overrides = {**overrides, "filter": and_filters(base.filter, overrides["filter"])}
    return retrieval_settings(**{**dict(base), **overrides})


def _plain(overrides: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if overrides.get("k") is not None:
        out["k"] = check_k(overrides["k"])
    if overrides.get("filter") is not None:
        out["filter"] = overrides["filter"]
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


@dataclass(frozen=True, slots=True)
class RagRequest:
    """One request, resolved and validated once at its door (the chain's input step); the stages trust it.

    Attributes:
        question: the question searched (a non-empty string).
        settings: the pipeline's settings for this request (the RAG's, with the request's `k`, `fetch_k`,
            `max_tokens` and retrieval options on top, the filter ANDed with the RAG's and the principal's);
            None for a plain RAG (`retrieval="plain"`).
        search_kwargs: each resource's search settings, validated: build-time ones (`chain(retrieval_chain=...)`)
            with the request's `retrieval_chain` on top; for a plain RAG also the request's `k` and filter.
        principal: who is asking, or None; its permission filter is already in `filter`.
        public_by_default: with a principal, chunks without permissions are visible too.
        plain: for a plain RAG, the request's `k` and filter given to every resource.

    `k` is the number of chunks the pipeline returns (at most, with a budget); a resource's own cap is its
    `max_chunks` (the seed's spelling, `k` in its `search_kwargs`, means the same).
    """

    question: str
    settings: RetrievalSettings | None
    search_kwargs: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))
    principal: Principal | None = None
    public_by_default: bool = False
    plain: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def k(self) -> int | None:
        """Chunks the pipeline returns (None: a plain RAG with each resource's own)."""
        return self.settings.k if self.settings is not None else self.plain.get("k")

    @property
    def fetch_k(self) -> int | None:
        """Candidates searched per resource and query (None for a plain RAG)."""
        return self.settings.fetch_k if self.settings is not None else None

    @property
    def filter(self) -> Mapping[str, Any] | None:
        """The filter every resource's search applies (the request's, the RAG's and the principal's, ANDed)."""
        return self.settings.filter if self.settings is not None else self.plain.get("filter")

    @property
    def max_tokens(self) -> int | None:
        """The context budget in tokens (None: unlimited, or a plain RAG)."""
        return self.settings.max_tokens if self.settings is not None else None

    def for_resource(self, name: str) -> dict[str, Any]:
        """Resource `name`'s search settings for this request (a copy; validated)."""
        return dict(self.search_kwargs.get(name) or {})


def request_of(config: RunnableConfig | None) -> RagRequest | None:
    """The `RagRequest` the chain's input step put in a run's config, or None (a stage called directly)."""
    found = configurable(config).get(RAG_REQUEST_KEY)
    return found if isinstance(found, RagRequest) else None


def open_request(question: str, base: RetrievalSettings | None, config: RunnableConfig | None,
                 per_resource: Mapping[str, Mapping[str, Any]]) -> RagRequest:
    """Resolve one request: the pipeline settings (`request_settings`) and each resource's search settings.

    `per_resource` holds each resource's validated settings (build-time ones with the request's on top);
    for a plain RAG the request's `k` and filter are added to each (the filter ANDed), as a resource
    searched on its own takes them.

    Raises:
        ConfigError: a bad value, a principal that is not one, or a pipeline setting asked of a plain RAG.
    """
    values = configurable(config)
    principal = principal_of(values.get(PRINCIPAL_KEY))
    public = values.get(PUBLIC_BY_DEFAULT_KEY) is True
    overrides = _request_values(config)
    settings = _settings(base, overrides)
    plain: dict[str, Any] = {}
    resources = {name: dict(kwargs) for name, kwargs in per_resource.items()}
    if base is None:
        plain = _plain(overrides)
        for name, own in resources.items():
            if plain.get("filter") and own.get("filter"):
                own["filter"] = and_filters(plain["filter"], own["filter"])
            resources[name] = {**plain, **own}
    return RagRequest(question=question, settings=settings,
                      search_kwargs=MappingProxyType({n: MappingProxyType(v) for n, v in resources.items()}),
                      principal=principal, public_by_default=public, plain=MappingProxyType(plain))
