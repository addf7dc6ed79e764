"""`Resource`: a named retriever with default search settings and portable filters.

A resource is what a `RAG` retrieves from. It wraps any LangChain `BaseRetriever` and applies
search settings (`k`, `filter` in the portable dialect, ...) the same way for every backend:
Chroma gets the filter translated to its `where`; any other retriever is over-fetched and
filtered in Python, so a filter is never silently ignored.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> res = Resource.from_texts("notes", ["Paris is in France.", "Rome is in Italy."],
    ...                           metadatas=[{"country": "fr"}, {"country": "it"}],
    ...                           embedding=DeterministicFakeEmbedding(size=16))
    >>> [d.page_content for d in res.retrieve("city", search_kwargs={"filter": {"country": "it"}})]
    ['Rome is in Italy.']
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from pydantic import BaseModel, ConfigDict, Field, field_validator

from rag.core.errors import ConfigError
from rag.core.filters import chroma_where_from_canonical, matches_canonical, validate_filter

__all__ = ["SEARCH_KWARGS", "Resource", "new_chroma", "validate_search_kwargs"]

logger = logging.getLogger(__name__)

#: The search settings every resource understands, whatever its backend.
SEARCH_KWARGS = ("k", "filter", "fetch_k", "lambda_mult", "score_threshold")
DEFAULT_K = 4
_OVERFETCH = 4  # how many more candidates to fetch when a filter is applied in Python
_REQUEST_KEY = "retrieval_chain"
_BUILD_KEY = "rag_retrieval_defaults"


def validate_search_kwargs(search_kwargs: Mapping[str, Any] | None, *, where: str = "search_kwargs") -> dict[str, Any]:
    """Check search settings and return a copy with the filter in canonical form.

    Example:
        >>> validate_search_kwargs({"k": 2, "filter": {"year": 2024}})
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
    for key in ("k", "fetch_k"):
        if key in out and (isinstance(out[key], bool) or not isinstance(out[key], int) or out[key] < 1):
            raise ConfigError(f"{where}.{key} must be a positive integer, got {out[key]!r}")
    if "filter" in out:
        out["filter"] = validate_filter(out["filter"])
        if out["filter"] is None:
            del out["filter"]
    return out


def new_chroma(
    collection_name: str,
    embedding: Embeddings,
    *,
    persist_directory: str | Path | None = None,
    client: Any = None,
) -> VectorStore:
    """Open (or create) a Chroma collection in cosine space.

    In-memory collections get a unique suffix: Chroma's in-process clients share one system,
    so two resources with the same name must not see each other's documents.
    """
    from langchain_chroma import Chroma

    if persist_directory is None and client is None:
        collection_name = f"{collection_name}-{uuid.uuid4().hex[:8]}"
    kwargs: dict[str, Any] = {
        "collection_name": _chroma_collection_name(collection_name),
        "embedding_function": embedding,
        "collection_metadata": {"hnsw:space": "cosine"},
    }
    if client is not None:
        kwargs["client"] = client
    elif persist_directory is not None:
        kwargs["persist_directory"] = str(Path(persist_directory).resolve())   # Chroma caches clients by this string
    return Chroma(**kwargs)


def _chroma_collection_name(name: str) -> str:
    # Chroma accepts 3-512 chars of [a-zA-Z0-9._-], starting and ending alphanumeric.
    cleaned = "".join(c if c.isalnum() or c in "._-" else "-" for c in name).strip("._-")
    return (cleaned or "rag") if len(cleaned) >= 3 else f"rag-{cleaned}".strip("-")


def _doc_id(doc: Document) -> str:
    payload = json.dumps([doc.page_content, doc.metadata], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class Resource(BaseModel):
    """A named retriever the `RAG` can search, with default search settings.

    Attributes:
        name: unique, non-empty; the key of this resource's branch and of `metadata["resource"]`.
        retriever: any LangChain retriever.
        description: what the resource holds (shown by the server and used for routing).
        search_kwargs: defaults such as `{"k": 4, "filter": {...}}`; per-call settings win.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    #: Retrievers that set this class attribute to True take `k` and a portable `filter`
    #: themselves (the hybrid and knowledge-base retrievers do); others are filtered here.
    native_filter_attr: ClassVar[str] = "accepts_portable_filter"

    name: str
    retriever: BaseRetriever
    description: str = ""
    search_kwargs: dict[str, Any] = Field(default_factory=dict)

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

    # ----------------------------------------------------------------- constructors
    @classmethod
    def from_vectorstore(cls, name: str, vectorstore: VectorStore, search_kwargs: dict[str, Any] | None = None,
                         *, description: str = "") -> Resource:
        """Wrap a vector store; `search_kwargs` become the resource's defaults."""
        return cls(name=name, retriever=vectorstore.as_retriever(), description=description,
                   search_kwargs=search_kwargs or {})

    @classmethod
    def from_retriever(cls, name: str, retriever: BaseRetriever, *, description: str = "",
                       search_kwargs: dict[str, Any] | None = None) -> Resource:
        """Wrap any retriever; filters it cannot apply are applied in Python."""
        return cls(name=name, retriever=retriever, description=description, search_kwargs=search_kwargs or {})

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
        """Embed documents into a Chroma collection named after the resource.

        Ids are content hashes, so adding the same documents to a persistent store twice
        does not duplicate them.
        """
        from rag.models.embeddings import default_embeddings

        store = new_chroma(name, embedding or default_embeddings(), persist_directory=persist_directory)
        unique: dict[str, Document] = {}
        for doc in documents:
            unique.setdefault(_doc_id(doc), doc)
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
        """Embed texts (with optional metadata) into a Chroma collection."""
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
    ) -> Resource:
        """Load txt, md, html and pdf files under `path`, chunk them and embed them.

        Unreadable files are skipped with a warning naming the file and the reason.
        """
        from rag.indexing.chunking import split_documents
        from rag.indexing.loaders import load_directory

        report = load_directory(path, glob=glob, exclude=exclude)
        for skipped in report.skipped:
            logger.warning("skipped %s: %s", skipped.path, skipped.reason)
        if not report.documents:
            raise ConfigError(f"no readable documents under {path} matching {glob!r}")
        kwargs = {} if chunk_size is None else {"chunk_size": chunk_size}
        chunks = split_documents(report.documents, **kwargs)
        return cls.from_documents(name, chunks, embedding=embedding, persist_directory=persist_directory,
                                  search_kwargs=search_kwargs, description=description)

    # ----------------------------------------------------------------- retrieval
    def effective_search_kwargs(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The resource defaults with `overrides` on top (validated)."""
        merged = {**self.search_kwargs, **validate_search_kwargs(overrides, where=f"{self.name}.search_kwargs")}
        merged.setdefault("k", DEFAULT_K)
        return merged

    def retrieve(self, query: str, *, search_kwargs: Mapping[str, Any] | None = None,
                 config: RunnableConfig | None = None) -> list[Document]:
        """Search this resource with the defaults plus `search_kwargs`.

        Plain similarity search on a vector store goes straight to the store and records the
        relevance score (cosine similarity for Chroma) in `metadata["score"]`.
        """
        retriever, kwargs, post = self._plan(self.effective_search_kwargs(search_kwargs))
        if _is_plain_chroma_similarity(retriever):
            store = retriever.vectorstore
            return post(_scored(store.similarity_search_with_score(query, **kwargs), store))
        return post(retriever.invoke(query, config=config, **kwargs))

    async def aretrieve(self, query: str, *, search_kwargs: Mapping[str, Any] | None = None,
                        config: RunnableConfig | None = None) -> list[Document]:
        """Async `retrieve`."""
        retriever, kwargs, post = self._plan(self.effective_search_kwargs(search_kwargs))
        if _is_plain_chroma_similarity(retriever):
            store = retriever.vectorstore
            return post(_scored(await store.asimilarity_search_with_score(query, **kwargs), store))
        return post(await retriever.ainvoke(query, config=config, **kwargs))

    def as_runnable(self) -> Runnable[str, list[Document]]:
        """A runnable that searches with the settings found in its config.

        `RAG.chain(retrieval_chain=...)` puts build-time settings under
        `configurable["rag_retrieval_defaults"]`; a request's `configurable["retrieval_chain"]`
        wins over them key by key.
        """

        def _settings(config: RunnableConfig | None) -> dict[str, Any]:
            configurable = (config or {}).get("configurable") or {}
            build, request = (((configurable.get(key) or {}).get(self.name) or {}).get("search_kwargs") or {}
                              for key in (_BUILD_KEY, _REQUEST_KEY))
            return {**build, **request}

        def _run(query: str, config: RunnableConfig) -> list[Document]:
            return self.retrieve(query, search_kwargs=_settings(config), config=config)

        async def _arun(query: str, config: RunnableConfig) -> list[Document]:
            return await self.aretrieve(query, search_kwargs=_settings(config), config=config)

        return RunnableLambda(_run, afunc=_arun, name=self.name)

    def _plan(self, settings: dict[str, Any]) -> tuple[BaseRetriever, dict[str, Any], Any]:
        """Decide how to apply settings: natively, as Chroma `where`, or in Python after over-fetching."""
        k = settings["k"]
        flt = settings.get("filter")
        retriever = self.retriever
        if getattr(retriever, self.native_filter_attr, False):
            return retriever, dict(settings), _identity
        if isinstance(retriever, VectorStoreRetriever):
            kwargs = {key: v for key, v in settings.items() if key != "filter"}
            if flt and _is_chroma(retriever.vectorstore):
                kwargs["filter"] = chroma_where_from_canonical(flt)
                return retriever, kwargs, _identity
            if flt:
                kwargs["k"] = k * _OVERFETCH
                kwargs["fetch_k"] = max(kwargs.get("fetch_k", 20), kwargs["k"])
            return retriever, kwargs, _python_filter(flt, k)
        if "k" in type(retriever).model_fields:
            retriever = retriever.model_copy(update={"k": k * _OVERFETCH if flt else k})
        return retriever, {}, _python_filter(flt, k)


def _is_plain_chroma_similarity(retriever: BaseRetriever) -> bool:
    return (type(retriever) is VectorStoreRetriever and retriever.search_type == "similarity"
            and not retriever.search_kwargs and _is_chroma(retriever.vectorstore))


def _scored(found: list[tuple[Document, float]], store: VectorStore) -> list[Document]:
    relevance = store._select_relevance_score_fn()  # cosine space: 1 - distance
    return [Document(page_content=d.page_content, metadata={**d.metadata, "score": float(relevance(s))}, id=d.id)
            for d, s in found]


def _identity(docs: list[Document]) -> list[Document]:
    return docs


def _python_filter(flt: dict[str, Any] | None, k: int):
    def post(docs: list[Document]) -> list[Document]:
        kept = [d for d in docs if matches_canonical(d.metadata, flt)] if flt else list(docs)
        return kept[:k]

    return post


def _is_chroma(store: VectorStore) -> bool:
    return type(store).__name__ == "Chroma" and type(store).__module__.startswith("langchain_chroma")
