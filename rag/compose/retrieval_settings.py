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

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from rag.base.errors import ConfigError, short_repr
from rag.base.portable import MAX_K, check_k
from rag.retrieval.budget import TOKEN_COUNTERS, TokenCount
from rag.retrieval.rephrase import LLM_MODES, REPHRASE_MODES
from rag.retrieval.rse import RSEConfig

__all__ = ["ChatModel", "QueryRephraser", "RetrievalSettings", "Reranking", "Routing", "SectionPromotion",
           "retrieval_settings"]


@runtime_checkable
class QueryRephraser(Protocol):
    """Turns a question into the queries to search (`rag.retrieval.rephrase.Rephraser`)."""

    def rephrase(self, question: str) -> list[str]: ...


@runtime_checkable
class ChatModel(Protocol):
    """A LangChain chat or text model (anything with `invoke`), for the LLM rephrase modes."""

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any: ...


@runtime_checkable
class Routing(Protocol):
    """Picks the documents a question names (`rag.retrieval.routing.DocumentRouter`)."""

    key: str

    def route(self, question: str) -> Any: ...

    def boost(self, question: str, scored: Any, weight: float) -> Any: ...


@runtime_checkable
class Reranking(Protocol):
    """Scores candidates against the question again (`rag.retrieval.rerank.Reranker`)."""

    def rerank(self, query: str, docs: Any) -> Any: ...


@runtime_checkable
class SectionPromotion(Protocol):
    """Promotes the sections a question names (`rag.retrieval.sections.SectionRouter`)."""

    at: int

    def promote(self, question: str, scored: Any, **settings: Any) -> Any: ...


def _must_be(value: Any, kind: type, valid: str) -> Any:
    if value is None or isinstance(value, kind):
        return value
    raise ValueError(f"must be {valid}, got {type(value).__name__} {short_repr(value)}")


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
        page_evidence, document_evidence: `rag.retrieval.aggregation.aggregate_evidence` weights
            (0 = off): a candidate's normalised score plus this much of its page's / document's
            evidence (the sum of that unit's `evidence_top` best candidates, normalised).
        sections: a `rag.retrieval.sections.SectionRouter` for every resource (None: each resource's
            own, see `KnowledgeBase.as_resource(sections=...)`, if any): the opening chunk of each
            section whose heading the question names goes in after the first `section_at` results
            (with a top-k context, earlier when needed so that every promoted chunk is within `k`).
        side_searches: a comparison question ("What is the difference between X and Y?",
            `rag.retrieval.comparisons.comparison_sides`) also searches each side on its own (off by default;
            only when no rephrasing is set).
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    k: int = Field(default=64, ge=1, le=MAX_K)    # an upper bound only: the token budget decides how many fit
    fetch_k: int = Field(default=100, ge=1, le=MAX_K)
    filter: dict[str, Any] | None = None
    rephrase: QueryRephraser | list[str] | None = None
    llm: ChatModel | None = None
    router: Routing | None = None
    routing: Literal["filter", "boost", "both", "off"] = "filter"
    route_weight: float = 0.5
    reranker: Reranking | Literal["embedding"] | None = None
    expand: int = Field(default=0, ge=0)
    rse: str | RSEConfig | None = None
    rse_overrides: dict[str, Any] = Field(default_factory=dict)
    max_tokens: int | None = Field(default=4000, ge=1)
    token_counter: str | TokenCount = "auto"
    fusion: Literal["rrf", "convex"] = "rrf"
    page_diversity: float = Field(default=0.3, ge=0.0)
    page_evidence: float = Field(default=0.2, ge=0.0)
    document_evidence: float = Field(default=0.1, ge=0.0)
    evidence_top: int = Field(default=3, ge=1)
    rerank_weight: float = Field(default=1.0, ge=0.0, le=1.0)
    rerank_depth: int | None = Field(default=None, ge=1)
    question_weight: float | None = Field(default=None, ge=0.0, le=1.0)
    sections: SectionPromotion | None = None
    section_at: int | None = Field(default=None, ge=0)   # None: each SectionRouter's own `at` (3)
    side_searches: bool = False

    @field_validator("k", "fetch_k", mode="before")
    @classmethod
    def _check_k(cls, value: Any, info: ValidationInfo) -> int:
        return check_k(value, name=info.field_name, default=cls.model_fields[info.field_name].default)

    @field_validator("filter", mode="plain")
    @classmethod
    def _keep_filter(cls, value: Any) -> Any:
        """Keep the filter object given: a request's validated `rag.base.filters.Filter` stays trusted (a copy
        would be validated again by every stage after the door)."""
        if value is None or isinstance(value, dict):
            return value
        if isinstance(value, Mapping):
            return dict(value)
        raise ValueError(f"must be a dict (a portable filter) or None, got {type(value).__name__}")

    @field_validator("expand", "max_tokens", "section_at", mode="before")
    @classmethod
    def _no_bools(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"must be an integer, not {value!r}")
        return value

    @field_validator("token_counter", mode="before")
    @classmethod
    def _check_counter(cls, value: Any) -> Any:
        if value in TOKEN_COUNTERS if isinstance(value, str) else isinstance(value, TokenCount):
            return value
        raise ValueError(f"must be one of {', '.join(TOKEN_COUNTERS)} or an object with name, count(text) and "
                         f"truncate(text, max_tokens), got {type(value).__name__} {short_repr(value)}")

    @field_validator("rephrase", mode="before")
    @classmethod
    def _check_rephrase(cls, value: Any) -> Any:
        if value is None or isinstance(value, QueryRephraser):
            return value
        modes = [value] if isinstance(value, str) else value
        if not isinstance(modes, Sequence) or not all(isinstance(m, str) for m in modes):
            raise ValueError(f"must be a Rephraser, a mode or a list of modes ({', '.join(REPHRASE_MODES)}), got "
                             f"{type(value).__name__} {short_repr(value)}")
        unknown = [m for m in modes if m not in REPHRASE_MODES]
        if unknown:
            raise ValueError(f"unknown mode(s) {short_repr(unknown)}; valid: {', '.join(REPHRASE_MODES)}")
        return list(modes) or None

    @field_validator("llm", mode="before")
    @classmethod
    def _check_llm(cls, value: Any) -> Any:
        return _must_be(value, ChatModel, "a LangChain chat or text model (an object with invoke) or None")

    @field_validator("router", mode="before")
    @classmethod
    def _check_router(cls, value: Any) -> Any:
        return _must_be(value, Routing, "a DocumentRouter (key, route(question), boost(...)) or None")

    @field_validator("reranker", mode="before")
    @classmethod
    def _check_reranker(cls, value: Any) -> Any:
        return value if value == "embedding" else _must_be(value, Reranking,
                                                           "a Reranker (rerank(query, docs)), 'embedding' or None")

    @field_validator("sections", mode="before")
    @classmethod
    def _check_sections(cls, value: Any) -> Any:
        return _must_be(value, SectionPromotion, "a SectionRouter (at, promote(question, scored, ...)) or None")

    @model_validator(mode="after")
    def _llm_for_llm_modes(self) -> RetrievalSettings:
        modes = self.rephrase if isinstance(self.rephrase, list) else []
        needs = [m for m in modes if m in LLM_MODES]
        if needs and self.llm is None:
            raise ValueError(f"rephrase mode(s) {needs} need llm=<a chat model>; pass llm=... or use the offline "
                             "modes keywords, feedback")
        return self


def retrieval_settings(**kwargs: Any) -> RetrievalSettings:
    """Validated `RetrievalSettings`; a `ConfigError` names the bad or unknown option and lists the valid ones.

    Example:
        >>> try:
        ...     retrieval_settings(k=0)
        ... except ConfigError as err:
        ...     print(err)
        invalid retrieval setting k=0: k must be a positive integer, got 0 (leave k out for the default, 64)
    """
    unknown = sorted(set(kwargs) - set(RetrievalSettings.model_fields))
    if unknown:
        raise ConfigError(f"unknown retrieve option(s) {unknown}; valid: {', '.join(RetrievalSettings.model_fields)}")
    try:
        return RetrievalSettings(**kwargs)
    except ValidationError as exc:
        error = exc.errors()[0]
        message = error["msg"].removeprefix("Value error, ")
        if not error["loc"]:   # a check across settings (an LLM rephrase mode without llm=)
            raise ConfigError(f"invalid retrieval settings: {message}") from None
        key = ".".join(str(part) for part in error["loc"][:1])
        raise ConfigError(f"invalid retrieval setting {key}={short_repr(kwargs.get(key, error.get('input')))}: "
                          f"{message}") from None
