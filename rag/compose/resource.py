"""`Resource`: a named retriever with default search settings and portable filters.

A resource is what a `RAG` retrieves from. It wraps any LangChain `BaseRetriever` and applies
search settings (`k`, `filter` in the portable dialect, ...) the same way for every backend:
Chroma gets the filter translated to its `where`; the stores of `rag.stores.native` (pgvector,
Qdrant, FAISS, LangChain's in-memory store) get it translated to their own filter; any other
retriever is paged (asked for more until `k` chunks match, `rag.retrieval.paging`) and filtered in
Python, so a filter is never silently ignored nor returns fewer than `k` chunks when `k` match.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> res = Resource.from_texts("notes", ["Paris is in France.", "Rome is in Italy."],
    ...                           metadatas=[{"country": "fr"}, {"country": "it"}],
    ...                           embedding=DeterministicFakeEmbedding(size=16))
    >>> [d.page_content for d in res.retrieve("city", search_kwargs={"filter": {"country": "it"}})]
    ['Rome is in Italy.']
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from pydantic import BaseModel, ConfigDict, Field, SkipValidation, ValidationError, field_validator

from rag.base.errors import ConfigError, from_validation
from rag.base.text import terminal_safe
from rag.base.tracing import set_run_attributes
from rag.compose.request import request_of
from rag.compose.retrieval_settings import Routing, SectionPromotion
from rag.compose.search_kwargs import DEFAULT_K, SEARCH_KWARGS, configured_search_kwargs, validate_search_kwargs
from rag.models.embeddings import default_embeddings
from rag.retrieval.paging import apage_filtered, page_filtered
from rag.stores.chunk_store import content_id
from rag.stores.native import NativeFilterRetriever
from rag.stores.registry import new_vectorstore

__all__ = ["DEFAULT_K", "SEARCH_KWARGS", "Resource", "configured_search_kwargs", "validate_search_kwargs"]

logger = logging.getLogger(__name__)

class Resource(BaseModel):
    """A named retriever the `RAG` can search, with default search settings.

    Attributes:
        name: unique, non-empty; the key of this resource's branch and of `metadata["resource"]`.
        retriever: any LangChain retriever.
        description: what the resource holds (shown by the server and used for routing).
        search_kwargs: defaults such as `{"max_chunks": 4, "filter": {...}}`; per-call settings win.
            `max_chunks` (the seed's spelling: `k`) caps this resource's chunks in the context.
        router: a `DocumentRouter` over this resource's documents, or None; the pipeline's routing
            stage uses it (`KnowledgeBase.as_resource` sets one, see its `routing`).
        sections: a `SectionRouter` over this resource's chunks, or None; the pipeline's named-section
            stage uses it (`KnowledgeBase.as_resource(sections=...)`).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    #: Retrievers that set this class attribute to True take `k` and a portable `filter`
    #: themselves (the hybrid and knowledge-base retrievers do); others are filtered here.
    native_filter_attr: ClassVar[str] = "accepts_portable_filter"

    name: str
    retriever: BaseRetriever
    description: str = ""
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    # the stages' protocols (checked by `_check_stage`, which names the method that is missing)
    router: Annotated[Routing | None, SkipValidation] = None
    sections: Annotated[SectionPromotion | None, SkipValidation] = None

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise from_validation(exc, "Resource") from None

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        if not name or not name.strip():
            raise ValueError("a resource name must be a non-empty string")
        return name

    @field_validator("search_kwargs")
    @classmethod
    def _check_search_kwargs(cls, value: dict[str, Any]) -> dict[str, Any]:
        return validate_search_kwargs(value)

    @field_validator("router", "sections")
    @classmethod
    def _check_stage(cls, value: Any, info: Any) -> Any:
        method = {"router": "route", "sections": "promote"}[info.field_name]
        if value is not None and not callable(getattr(value, method, None)):
            raise ValueError(f"{info.field_name} must have a {method}() method (a "
                             f"{'DocumentRouter' if method == 'route' else 'SectionRouter'}) or be None, "
                             f"got {type(value).__name__}")
        return value

    # ----------------------------------------------------------------- constructors
    @classmethod
    def from_vectorstore(cls, name: str, vectorstore: VectorStore, search_kwargs: dict[str, Any] | None = None,
                         *, description: str = "") -> Resource:
        """Wrap a vector store; `search_kwargs` become the resource's defaults.

        A store of the registry (`rag.stores.registry.chunks_of`) is searched through its chunk store,
        the filter translated natively; any other store through its own retriever, filtered in Python
        page by page.
        """
        retriever = NativeFilterRetriever.over(vectorstore) or vectorstore.as_retriever()
        return cls(name=name, retriever=retriever, description=description, search_kwargs=search_kwargs or {})

    @classmethod
    def from_retriever(cls, name: str, retriever: BaseRetriever, *, description: str = "",
                       search_kwargs: dict[str, Any] | None = None, router: Routing | None = None,
                       sections: SectionPromotion | None = None) -> Resource:
        """Wrap any retriever; filters it cannot apply are applied in Python.

        `router` (a `DocumentRouter`) and `sections` (a `SectionRouter`) give the pipeline's routing
        and named-section stages what they need for this resource.
        """
        return cls(name=name, retriever=retriever, description=description, search_kwargs=search_kwargs or {},
                   router=router, sections=sections)

    @classmethod
    def from_documents(
        cls,
        name: str,
        documents: Sequence[Document],
        *,
        embedding: Embeddings | None = None,
        persist_directory: str | Path | None = None,
        search_kwargs: dict[str, Any] | None = None,
        description: str = "",
    ) -> Resource:
        """Embed documents (each one chunk, as given) and search them densely.

        With `persist_directory` they go through the library's one write path: a knowledge base
        named after the resource in that directory (no chunking, no AutoContext; documents sharing a
        `source` are one document, and giving that source again replaces its chunks; adding the same
        documents twice embeds and writes nothing). Without it they are kept in an in-memory Chroma
        collection, ids being content hashes.
        """
        unique: dict[str, Document] = {}
        for doc in documents:
            unique.setdefault(content_id(doc), doc)
        if persist_directory is not None:
            # the write path is imported when used: `from rag import RAG` does not load the indexing floor
            from rag.indexing.autocontext import AutoContext
            from rag.indexing.chunking import PassthroughChunker
            from rag.indexing.kb_parts import IndexTarget
            from rag.indexing.kb_retriever import KnowledgeBaseRetriever
            from rag.indexing.kb_settings import knowledge_base_name
            from rag.indexing.write_path import index_sources

            cls._check_name(name)   # (before anything is written)
            kb = IndexTarget(knowledge_base_name(name), persist_directory, embedding=embedding,
                             chunker=PassthroughChunker(), autocontext=AutoContext(enabled=False))
            index_sources(kb, list(unique.values()))
            return cls(name=name, retriever=KnowledgeBaseRetriever(chunks=kb.chunks, embedding=kb.embedding),
                       description=description, search_kwargs=search_kwargs or {})
        store = new_vectorstore(name, embedding or default_embeddings())
        if unique:
            store.add_documents(list(unique.values()), ids=list(unique))
        return cls.from_vectorstore(name, store, search_kwargs, description=description)

    @classmethod
    def from_texts(
        cls,
        name: str,
        texts: Sequence[str],
        *,
        metadatas: Sequence[dict[str, Any]] | None = None,
        embedding: Embeddings | None = None,
        persist_directory: str | Path | None = None,
        search_kwargs: dict[str, Any] | None = None,
        description: str = "",
    ) -> Resource:
        """Embed texts (with optional metadata) as `from_documents` does."""
        if isinstance(texts, str):
            raise ConfigError("texts must be a list of strings, got a single string")
        if metadatas is not None and len(metadatas) != len(texts):
            raise ConfigError(f"got {len(texts)} texts but {len(metadatas)} metadatas; they must match")
        docs = [Document(page_content=t, metadata=dict(metadatas[i]) if metadatas else {})
                for i, t in enumerate(texts)]
        return cls.from_documents(name, docs, embedding=embedding, persist_directory=persist_directory,
                                  search_kwargs=search_kwargs, description=description)

    @classmethod
    def from_directory(
        cls,
        name: str,
        path: str | Path,
        *,
        glob: str = "**/*",
        exclude: Sequence[str] = (),
        embedding: Embeddings | None = None,
        persist_directory: str | Path | None = None,
        search_kwargs: dict[str, Any] | None = None,
        description: str = "",
        chunk_size: int | None = None,
        search: str = "hybrid",
        limits: Any = None,
    ) -> Resource:
        """Index the txt, md, html and pdf files under `path` into a knowledge base and search it.

        The files go through the one write path (`rag.indexing.write_path`: load, chunk, AutoContext,
        embed, write); with `persist_directory` the knowledge base is kept there and a second
        call only indexes what changed, otherwise it lives in memory. `search`: ``"hybrid"``
        (default), ``"dense"`` or ``"bm25"`` (`rag.retrieval.kb_search`). `limits`: the cost limits per
        file (`rag.indexing.limits.LoadLimits` or a mapping). Unreadable files are skipped with a warning
        naming the file and the reason, and what hit a limit is logged per file.

        Raises:
            ConfigError: nothing readable under `path`.
        """
        from rag.indexing.chunking import TokenChunker
        from rag.indexing.kb_parts import IndexTarget
        from rag.indexing.kb_settings import knowledge_base_name
        from rag.indexing.write_path import index_sources
        from rag.retrieval.kb_search import knowledge_base_retriever, knowledge_base_router

        kb = IndexTarget(knowledge_base_name(name), persist_directory, embedding=embedding,
                         chunker=TokenChunker.sized(chunk_size), description=description)
        report = index_sources(kb, [path], include=glob, exclude=exclude, limits=limits)
        for skipped in report.skipped:
            logger.warning("skipped %s", terminal_safe(skipped.reason))  # the reason names the file
        for note in report.notes:
            logger.warning("note %s: %s", terminal_safe(note.path), terminal_safe(note.note))
        if kb.chunks.count() == 0:
            raise ConfigError(f"no readable documents under {path} matching {glob!r}")
        return cls(name=name, retriever=knowledge_base_retriever(kb, search=search), description=description,
                   search_kwargs=search_kwargs or {}, router=knowledge_base_router(kb))

    # ----------------------------------------------------------------- retrieval
    def effective_search_kwargs(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The resource defaults with `overrides` on top (validated)."""
        merged = {**self.search_kwargs, **validate_search_kwargs(overrides, where=f"{self.name}.search_kwargs")}
        merged.setdefault("k", DEFAULT_K)
        return merged

    def retrieve(self, query: str, *, search_kwargs: Mapping[str, Any] | None = None,
                 config: RunnableConfig | None = None) -> list[Document]:
        """Search this resource with the defaults plus `search_kwargs` (validated here).

        Plain similarity search on a store of the registry goes straight to its chunk store (no
        retriever run) and records the relevance score (cosine similarity) in `metadata["score"]`.
        """
        return self.search(query, self.effective_search_kwargs(search_kwargs), config=config)

    def search(self, query: str, settings: Mapping[str, Any], *, config: RunnableConfig | None = None) -> list[Document]:
        """Search with settings already validated (`effective_search_kwargs`, or a `RagRequest`'s on top of
        this resource's defaults): what the pipeline's stages call, trusting the request."""
        settings = {"k": DEFAULT_K, **settings}
        retriever, kwargs, flt = self._plan(settings)
        if isinstance(retriever, NativeFilterRetriever):   # straight to the store (no retriever run)
            return retriever.search(query, **kwargs)
        if flt is None:
            return retriever.invoke(query, config=config, **kwargs)[:settings["k"]]
        return page_filtered(lambda n: _sized(retriever, n).invoke(query, config=config, **_paged(kwargs, n)),
                             flt, settings["k"])

    async def aretrieve(self, query: str, *, search_kwargs: Mapping[str, Any] | None = None,
                        config: RunnableConfig | None = None) -> list[Document]:
        """Async `retrieve`."""
        return await self.asearch(query, self.effective_search_kwargs(search_kwargs), config=config)

    async def asearch(self, query: str, settings: Mapping[str, Any], *,
                      config: RunnableConfig | None = None) -> list[Document]:
        """Async `search`."""
        settings = {"k": DEFAULT_K, **settings}
        retriever, kwargs, flt = self._plan(settings)
        if isinstance(retriever, NativeFilterRetriever):   # straight to the store (no retriever run)
            return await retriever.asearch(query, **kwargs)
        if flt is None:
            return (await retriever.ainvoke(query, config=config, **kwargs))[:settings["k"]]

        async def fetch(n: int) -> list[Document]:
            return await _sized(retriever, n).ainvoke(query, config=config, **_paged(kwargs, n))

        return await apage_filtered(fetch, flt, settings["k"])

    def as_runnable(self) -> Runnable[str, list[Document]]:
        """A runnable that searches with the settings found in its config.

        In a chain, the request the chain's input step resolved (`rag.compose.request.RagRequest`)
        gives this resource's settings, trusted as they are. Called on its own,
        `RAG.chain(retrieval_chain=...)`'s build-time settings (`configurable["rag_retrieval_defaults"]`),
        a request's `configurable["retrieval_chain"]` over them key by key, and a request's `k` and
        `filter` apply (`configured_search_kwargs(..., request=True)`), validated here.
        """

        def _traced(config: RunnableConfig) -> dict[str, Any]:
            request = request_of(config)
            if request is not None:
                settings = {**self.search_kwargs, **request.for_resource(self.name)}
            else:
                settings = self.effective_search_kwargs(configured_search_kwargs(config, self.name, request=True))
            set_run_attributes(config, resource=self.name, k=settings.get("k", DEFAULT_K),
                               filter=bool(settings.get("filter")))
            return settings

        def _run(query: str, config: RunnableConfig) -> list[Document]:
            return self.search(query, _traced(config), config=config)

        async def _arun(query: str, config: RunnableConfig) -> list[Document]:
            return await self.asearch(query, _traced(config), config=config)

        return RunnableLambda(_run, afunc=_arun, name=self.name)

    def _plan(self, settings: dict[str, Any]) -> tuple[BaseRetriever, dict[str, Any], dict[str, Any] | None]:
        """How to apply settings: (retriever, its call kwargs, the filter left to apply in Python or None)."""
        k = settings["k"]
        flt = settings.get("filter")
        retriever = self.retriever
        if getattr(retriever, self.native_filter_attr, False):
            return retriever, dict(settings), None
        if isinstance(retriever, VectorStoreRetriever):
            native = _native(retriever)
            if native is not None:   # plain similarity on a store of the registry: its own filtered search
                return native, dict(settings), None
            return retriever, {key: v for key, v in settings.items() if key != "filter"}, flt
        if "k" in type(retriever).model_fields:
            retriever = retriever.model_copy(update={"k": k})
        return retriever, {}, flt


def _sized(retriever: BaseRetriever, n: int) -> BaseRetriever:
    """`retriever` asked for `n` results: its `k` field set when it has one (a vector store's is a call kwarg)."""
    if not isinstance(retriever, VectorStoreRetriever) and "k" in type(retriever).model_fields:
        return retriever.model_copy(update={"k": n})
    return retriever


def _paged(kwargs: dict[str, Any], n: int) -> dict[str, Any]:
    """A vector store retriever's call kwargs for a page of `n` (MMR draws from at least `n` candidates)."""
    if not kwargs:
        return {}
    return {**kwargs, "k": n, "fetch_k": max(kwargs.get("fetch_k", 20), n)}


def _native(retriever: VectorStoreRetriever) -> BaseRetriever | None:
    """The store's native retriever for plain similarity search (None: another search type, or no backend)."""
    if type(retriever) is not VectorStoreRetriever or retriever.search_type != "similarity" or retriever.search_kwargs:
        return None
    return NativeFilterRetriever.over(retriever.vectorstore)
