"""`RAGRetriever`: a RAG's aggregated retrieval as a plain LangChain `BaseRetriever`.

Useful wherever LangChain expects a retriever (a `ContextualCompressionRetriever`, an agent
tool, `langchain_tests`). `k` and `filter` are the chain's per-request settings (the context
holds at most `k` documents; the filter applies to every resource).

Who is asking reaches the retrieval as it reaches the chain: a `principal` given to the retriever
(`rag.as_retriever(principal=...)`), or the `principal` key of a call's config
(`retriever.invoke(q, config={"configurable": {"principal": ...}})`, which a chain the retriever
runs in passes on), with `public_by_default` beside it. Only chunks the principal may read are
searched; with both, only chunks both may read. Anything in `principal` that is not a principal
raises `ConfigError`: the retriever never runs unfiltered in its place (see docs/security.md).

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from rag import RAG, Resource
    >>> from rag.base.acl import Permissions, Principal
    >>> emb = DeterministicFakeEmbedding(size=8)
    >>> rag = RAG(resources=[Resource.from_texts("a", ["x", "y"], embedding=emb),
    ...                      Resource.from_texts("b", ["z"], embedding=emb)])
    >>> len(RAGRetriever(rag=rag, k=2).invoke("q"))
    2
    >>> team = Resource.from_texts("t", ["plan", "memo"], embedding=emb,
    ...                            metadatas=[Permissions(groups=["team-a"]).stamp({}), {}])
    >>> retriever = RAG(resources=[team]).as_retriever(principal=Principal("ann", groups=["team-a"]))
    >>> [d.page_content for d in retriever.invoke("q")]
    ['plan']
    >>> [d.page_content for d in RAG(resources=[team]).as_retriever().invoke(
    ...     "q", config={"configurable": {"principal": {"id": "bob"}}})]
    []
"""

from __future__ import annotations

from numbers import Real
from typing import Annotated, Any, Protocol, runtime_checkable

from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig, ensure_config
from pydantic import SkipValidation, field_validator

from rag.base.acl import PRINCIPAL_KEY, PUBLIC_BY_DEFAULT_KEY, Principal, principal_of
from rag.base.filters import and_filters
from rag.base.portable import PortableRetriever, Scored
from rag.compose.input_step import OpensRequests, enter

__all__ = ["RAGRetriever", "SearchesResources"]


@runtime_checkable
class SearchesResources(OpensRequests, Protocol):
    """What `RAGRetriever` needs of a `RAG`: its aggregated retrieval over every resource, and the chain's
    input step (`open_request`), which resolves each call's request once."""


class RAGRetriever(PortableRetriever):
    """Search all resources of a `RAG` and return the aggregated documents.

    Attributes:
        rag: the RAG whose `resources_retrieval_chain` is used (subclass overrides included).
        k: documents in the context; None keeps the RAG's (a call's `k=` wins, checked by `PortableRetriever`).
        filter: a portable filter applied to every resource (ANDed with a call's and the RAG's own).
        principal: who is asking (a `rag.base.acl.Principal` or `{id, groups, roles}`): every call searches
            only chunks it may read, ANDed with a call's own principal if it gives one.
        public_by_default: with a principal, chunks without permissions are visible too (a call's config
            value, when it gives one, wins).
    """

    rag: Annotated[SearchesResources, SkipValidation]  # a RAG (which builds this retriever: `RAG.as_retriever`)
    k: int | None = None
    principal: Principal | None = None
    public_by_default: bool = False
    search_options = (PRINCIPAL_KEY, PUBLIC_BY_DEFAULT_KEY)   # a call's, read from its config by `invoke`

    @field_validator("principal", mode="before")
    @classmethod
    def _check_principal(cls, value: Any) -> Principal | None:
        return principal_of(value)

    @field_validator("public_by_default", mode="before")
    @classmethod
    def _check_public(cls, value: Any) -> bool:
        if not isinstance(value, bool):
            raise ValueError(f"public_by_default must be true or false, got {type(value).__name__}")
        return value

    def invoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[Document]:
        config = ensure_config(config)
        return super().invoke(input, config, **_identity(config, kwargs))

    async def ainvoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[Document]:
        config = ensure_config(config)
        return await super().ainvoke(input, config, **_identity(config, kwargs))

    def _config(self, k: int | None, flt: dict[str, Any] | None, callbacks: Any, principal: Any,
                public_by_default: Any) -> dict[str, Any]:
        settings: dict[str, Any] = {key: value for key, value in (("k", k), ("filter", flt)) if value}
        public = self.public_by_default if public_by_default is None else public_by_default is True
        asked = principal_of(principal)   # (a call's: anything else is a ConfigError, never unfiltered)
        if asked is None:
            asked = self.principal
        elif self.principal is not None and self.principal != asked:   # both: only what both may read
            settings["filter"] = and_filters(flt, self.principal.filter(public_by_default=public))
        if asked is not None:
            settings[PRINCIPAL_KEY], settings[PUBLIC_BY_DEFAULT_KEY] = asked, public
        return {"configurable": settings, "callbacks": callbacks}

    def _search(self, query: str, *, k: int | None, filter: dict[str, Any] | None, run_manager: Any,
                principal: Any = None, public_by_default: Any = None) -> Scored:
        config = self._config(k, filter, run_manager.get_child(), principal, public_by_default)
        query, config = _entered(self.rag, query, config)
        docs = self.rag.resources_retrieval_chain.invoke(query, config)
        return _with_scores(docs[:k] if k else docs)

    async def _asearch(self, query: str, *, k: int | None, filter: dict[str, Any] | None, run_manager: Any,
                       principal: Any = None, public_by_default: Any = None) -> Scored:
        config = self._config(k, filter, run_manager.get_child(), principal, public_by_default)
        query, config = _entered(self.rag, query, config)
        docs = await self.rag.resources_retrieval_chain.ainvoke(query, config)
        return _with_scores(docs[:k] if k else docs)


def _entered(rag: SearchesResources, query: str, config: Any) -> tuple[str, Any]:
    """The call through the chain's input step (`enter`): its request resolved once for every stage."""
    inputs, config = enter(rag, query, config)
    return inputs["question"], config


def _identity(config: RunnableConfig, kwargs: dict[str, Any]) -> dict[str, Any]:
    """A call's keyword arguments with its config's principal and `public_by_default` (a keyword given wins)."""
    values = config.get("configurable") or {}
    found = {key: values[key] for key in (PRINCIPAL_KEY, PUBLIC_BY_DEFAULT_KEY) if values.get(key) is not None}
    return {**found, **kwargs}


def _with_scores(docs: list[Document]) -> Scored:
    # the chain's documents carry their fused score already (None: an RSE segment's own, kept as is)
    scores = [doc.metadata.get("score") for doc in docs]
    return [(doc, score if isinstance(score, Real) and not isinstance(score, bool) else None)
            for doc, score in zip(docs, scores, strict=True)]
