"""Request bodies of the HTTP API and how they become per-request retrieval settings.

A request may set `k` (chunks in the context: the chain's own `k`, as `rag ask --k` and
`config={"configurable": {"k": ...}}` set it) and `filter` for every resource, and `k` (that
resource's cap) and `filter` per resource under `retrieval_chain` (the same shape
`RAG.chain(retrieval_chain=...)` takes). The server's tenant
filter is then ANDed onto the effective filter of every resource, so a request can narrow the
results but never see outside its tenant.

Example:
    >>> from rag.config.models import ServerConfig
    >>> req = QueryRequest(question="Where?", k=2, filter={"year": 2024})
    >>> limits = ServerConfig(tenant_filter={"tenant": "acme"})
    >>> retrieval_settings(req, {"docs": {}}, limits)["docs"]["search_kwargs"]["filter"]
    {'$and': [{'tenant': {'$eq': 'acme'}}, {'year': {'$eq': 2024}}]}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from rag.base.errors import ConfigError, InputError
from rag.base.filters import and_filters
from rag.compose.resource import DEFAULT_K, validate_search_kwargs
from rag.config.models import ServerConfig

__all__ = ["REQUEST_SEARCH_KEYS", "BatchRequest", "QueryRequest", "ResourceSettings", "request_configurable",
           "retrieval_settings"]

#: The only search settings a request may change; the rest stay as the server configured them (`k` in a
#: resource's `search_kwargs` is the seed's spelling of its cap, `max_chunks`).
REQUEST_SEARCH_KEYS = ("k", "filter", "max_chunks")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ResourceSettings(_Body):
    """Per-resource settings: `{"search_kwargs": {"max_chunks": 4, "filter": {...}}}` (`k`: the seed's `max_chunks`)."""

    search_kwargs: dict[str, Any] = Field(default_factory=dict)


class QueryRequest(_Body):
    """One question with optional retrieval settings.

    Attributes:
        question: the question to answer.
        k: how many chunks go into the context (at most, within the budget; capped by the server's `max_k`).
        filter: a metadata filter in the portable dialect, for every resource.
        retrieval_chain: per-resource settings; they win over `k` / `filter`.
        checks: `/invoke` only: add citation and support checks to the response.
    """

    question: str = Field(min_length=1, examples=["How do I filter by year?"])
    k: int | None = Field(default=None, ge=1, examples=[4])
    filter: dict[str, Any] | None = Field(default=None, examples=[{"year": {"$gte": 2024}}])
    retrieval_chain: dict[str, ResourceSettings] | None = None
    checks: bool = False


#: A `/batch` item: documented as a `QueryRequest` but validated one by one by the endpoint, so a
#: bad item gets its error in its place instead of failing the whole batch.
BatchItem = Annotated[Any, WithJsonSchema({"$ref": "#/components/schemas/QueryRequest"})]


class BatchRequest(_Body):
    """Several questions answered concurrently; each item is a `QueryRequest`."""

    requests: list[BatchItem] = Field(min_length=1)


def retrieval_settings(request: QueryRequest, defaults: Mapping[str, Mapping[str, Any]],
                       limits: ServerConfig) -> dict[str, dict[str, Any]]:
    """The `retrieval_chain` config for one request, with limits and the tenant filter applied.

    Args:
        request: the validated request body.
        defaults: `{resource name: its default search_kwargs}`.
        limits: the server settings (`max_k`, `max_question_chars`, `tenant_filter`).

    Raises:
        InputError: the question is too long or blank.
        ConfigError: an unknown resource or key, or `k` over the limit.
        FilterError: a filter outside the portable dialect.
    """
    if not request.question.strip():
        raise InputError("the question must not be blank")
    if len(request.question) > limits.max_question_chars:
        raise InputError(f"the question has {len(request.question)} characters; "
                         f"the limit is {limits.max_question_chars}")
    per_resource = request.retrieval_chain or {}
    unknown = sorted(set(per_resource) - set(defaults))
    if unknown:
        raise ConfigError(f"unknown resource(s) {unknown} in retrieval_chain; valid: {', '.join(defaults)}")
    if request.k is not None and request.k > limits.max_k:
        raise ConfigError(f"k={request.k} is over this server's limit; valid: 1..{limits.max_k}")
    shared: dict[str, Any] = {}
    if request.filter is not None:
        shared["filter"] = request.filter
    out: dict[str, dict[str, Any]] = {}
    for name, resource_defaults in defaults.items():
        own = per_resource[name].search_kwargs if name in per_resource else {}
        bad = sorted(set(own) - set(REQUEST_SEARCH_KEYS))
        if bad:
            raise ConfigError(f"retrieval_chain[{name!r}].search_kwargs: key(s) {bad} cannot be set per request; "
                              f"valid: {', '.join(REQUEST_SEARCH_KEYS)}")
        search = validate_search_kwargs({**shared, **own}, where=f"retrieval_chain[{name!r}].search_kwargs")
        k = search.get("k", resource_defaults.get("k", DEFAULT_K))
        if k > limits.max_k:
            raise ConfigError(f"k={k} for resource {name!r} is over this server's limit; valid: 1..{limits.max_k}")
        # The request's filter replaces the resource default (as in the library); the tenant filter is
        # ANDed on top of whichever applies, so it can be narrowed but never removed or widened.
        effective = search.get("filter", resource_defaults.get("filter"))
        combined = and_filters(limits.tenant_filter, effective)
        if combined is not None:
            search["filter"] = combined
        out[name] = {"search_kwargs": search}
    return out


def request_configurable(request: QueryRequest, defaults: Mapping[str, Mapping[str, Any]],
                         limits: ServerConfig) -> dict[str, Any]:
    """The chain's `configurable` for one request: `retrieval_settings` and the request's `k`.

    Example:
        >>> request_configurable(QueryRequest(question="Where?", k=3), {"docs": {}}, ServerConfig())["k"]
        3
    """
    values: dict[str, Any] = {"retrieval_chain": retrieval_settings(request, defaults, limits)}
    if request.k is not None:
        values["k"] = request.k
    return values
