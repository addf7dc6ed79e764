"""`RetrievalSettings`: the options of the retrieval pipeline (`rag.retrieve`, a `RAG`'s `retrieval`).

`RetrievalSettings()` is the recommended pipeline: what `RAG(resources=...).chain()`, `rag.retrieve`,
`airag`, chat, `rag ask`, configs and `rag serve` run unless told otherwise (see `rag.compose.defaults`
for why each default was chosen).

Vocabulary: `k` is the number of chunks in the context (with a budget: at most that many);
`fetch_k` the candidates searched per resource and query; a resource's own cap on its chunks in
the context is its `search_kwargs["max_chunks"]` (the seed's spelling `search_kwargs["k"]` means
the same).

Example:
    >>> s = RetrievalSettings()
    >>> s.k, s.fetch_k, s.page_diversity, s.max_tokens
    (64, 100, 0.3, 4000)
    >>> RetrievalSettings(k=4, page_diversity=0.0).max_tokens
    4000
    >>> try:
    ...     RetrievalSettings(kk=4)
    ... except Exception as err:
    ...     print(type(err).__name__)
    ValidationError
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rag.base.errors import ConfigError
from rag.retrieval.budget import TOKEN_COUNTERS, TokenCount
from rag.retrieval.rse import RSEConfig

__all__ = ["RetrievalSettings", "retrieval_settings"]


class RetrievalSettings(BaseModel):
    """Options of `retrieve` (all keyword arguments).

    Attributes:
        k: chunks in the context (at most, with a budget) when neither RSE nor expansion is used.
        fetch_k: candidates per (resource, query) and kept after fusion.
        filter: a portable metadata filter for every resource.
        rephrase: a `Rephraser`, or modes for one ("keywords", "feedback", "hyde", "multi_query").
        llm: the chat model for the LLM rephrase modes.
        router: a `DocumentRouter` for every resource; None (the default): each resource's own router
            (a knowledge base's resource has one, see `KnowledgeBase.as_resource(routing=...)`).
            routing "off" routes nothing; "filter" restricts search to the routed documents,
            "boost" adds ``route_weight * document score`` (min-max normalised over the documents)
            to the fused scores (min-max normalised over the candidates, so the weight means the
            same for RRF and convex fusion), "both" does the two.
        reranker: a `Reranker`, "embedding" (the offline `EmbeddingReranker`) or None.
        rerank_weight: 1 orders by the reranker's score alone; below 1 the normalised reranker and
            first-stage scores are blended (`rag.retrieval.rerank.blend_rerank`).
        rerank_depth: rerank only the best `rerank_depth` fused candidates (None = all); the rest
            follow them in their fused order.
        expand: neighbour expansion window (0 = none); ignored when `rse` is set.
        rse: an RSE preset name or `RSEConfig` (None = none); `rse_overrides` replace preset fields.
        max_tokens: the context budget (None = unlimited).
        token_counter: "auto", "minilm", "approx", "chars" (one token per 4 characters) or a
            counter object (`rag.retrieval.budget.TokenCount`: name, count, truncate).
        fusion: how lists of several resources / queries are fused ("rrf" or "convex").
        question_weight: with rephrasings, the share of the fusion weight given to the lists of
            the question itself; the rephrasings share the rest equally (None = every list the same).
        page_diversity: `rag.retrieval.packing.diversify` discount (0 = off): a chunk loses this
            much of its normalised score per better chunk already taken from its page.
        sections: a `rag.retrieval.sections.SectionRouter` for every resource (None: each resource's
            own, see `KnowledgeBase.as_resource(sections=...)`, if any): the opening chunk of each
            section whose heading the question names goes in after the first `section_at` results
            (with a top-k context, earlier when needed so that every promoted chunk is within `k`).
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    k: int = Field(default=64, ge=1)          # an upper bound only: the token budget decides how many fit
    fetch_k: int = Field(default=100, ge=1)
    filter: dict[str, Any] | None = None
    rephrase: Any = None
    llm: Any = None
    router: Any = None
    routing: Literal["filter", "boost", "both", "off"] = "filter"
    route_weight: float = 0.5
    reranker: Any = None
    expand: int = Field(default=0, ge=0)
    rse: str | RSEConfig | None = None
    rse_overrides: dict[str, Any] = Field(default_factory=dict)
    max_tokens: int | None = Field(default=4000, ge=1)
    token_counter: Any = "auto"
    fusion: Literal["rrf", "convex"] = "rrf"
    page_diversity: float = Field(default=0.3, ge=0.0)
    rerank_weight: float = Field(default=1.0, ge=0.0, le=1.0)
    rerank_depth: int | None = Field(default=None, ge=1)
    question_weight: float | None = Field(default=None, ge=0.0, le=1.0)
    sections: Any = None
    section_at: int | None = Field(default=None, ge=0)   # None: each SectionRouter's own `at` (3)

    @field_validator("k", "fetch_k", "expand", "max_tokens", "section_at", mode="before")
    @classmethod
    def _no_bools(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"must be an integer, not {value!r}")
        return value

    @field_validator("token_counter")
    @classmethod
    def _check_counter(cls, value: Any) -> Any:
        if value in TOKEN_COUNTERS if isinstance(value, str) else isinstance(value, TokenCount):
            return value
        raise ValueError(f"must be one of {', '.join(TOKEN_COUNTERS)} or an object with name, count(text) and "
                         "truncate(text, max_tokens)")


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
