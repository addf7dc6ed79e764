"""`build_index` (RAGTools): sources -> get_chunks -> get_embeddings -> get_tags -> store -> Resource.

Each step is a small component with one call method and a default; keyword arguments for a
step are passed per step (`chunker_kwargs=...`, `embedder_kwargs=...`), as RAGTools does:

| step       | default                         | called as                                     |
|------------|---------------------------------|-----------------------------------------------|
| chunker    | `FileChunker()`                 | `chunker(sources, **chunker_kwargs) -> chunks` |
| tagger     | None (or `KeywordTagger()`)     | `tagger(chunks, **tagger_kwargs) -> chunks`    |
| embedder   | `Embedder()` (MiniLM + AutoContext) | `embedder(chunks, **embedder_kwargs) -> vectors` |
| store      | `ChromaStore()` (in memory)     | `store(name, chunks, vectors, embedding, **store_kwargs) -> Resource` |

Any callable with the same signature can replace a step. For a persistent, incrementally
updated index use `KnowledgeBase` instead.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.documents import Document
    >>> res = build_index([Document(page_content="Paris is in France.", metadata={"source": "geo"})],
    ...                   embedder=Embedder(DeterministicFakeEmbedding(size=16)), chunker_kwargs={"chunk_size": 64})
    >>> [d.page_content for d in res.retrieve("Paris")]
    ['Paris is in France.']
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from rag.core.errors import ConfigError
from rag.indexing.autocontext import AutoContext
from rag.indexing.chunking import TokenChunker
from rag.indexing.sync import chunk_id, scalar_metadata

__all__ = ["ChromaStore", "Embedder", "FileChunker", "build_index"]

_UPSERT_BATCH = 2048


class FileChunker:
    """Step 1: load files, folders and Documents, then split them into token-sized chunks.

    Args:
        include, exclude: globs for files under folders.
        skipped: where unreadable files are reported (`Skipped` entries); a list you pass in.
    """

    def __init__(self, *, include: str | Sequence[str] = "**/*", exclude: str | Sequence[str] = (),
                 skipped: list[Any] | None = None) -> None:
        self.include = include
        self.exclude = exclude
        self.skipped = skipped if skipped is not None else []

    def __call__(self, sources: Sequence[str | Path | Document], **chunker_kwargs: Any) -> list[Document]:
        """Chunks of every source; `chunker_kwargs` go to `TokenChunker` (chunk_size, chunk_overlap, ...)."""
        from rag.indexing.loaders import load_directory

        docs: list[Document] = []
        for source in sources:
            if isinstance(source, Document):
                docs.append(source)
                continue
            report = load_directory(source, include=self.include, exclude=self.exclude)
            docs += report.documents
            self.skipped += report.skipped
        return TokenChunker(**chunker_kwargs).split_documents(docs)


class Embedder:
    """Step 3: embed chunks (with AutoContext headers by default), in batches.

    Args:
        embedding: the model; None uses `rag.models.embeddings.default_embeddings()` on first use.
        autocontext: an `AutoContext`, or False to embed chunk text alone.
    """

    def __init__(self, embedding: Embeddings | None = None, *, autocontext: AutoContext | bool = True) -> None:
        if autocontext is True:
            autocontext = AutoContext()
        elif autocontext is False:
            autocontext = AutoContext(enabled=False)
        if not isinstance(autocontext, AutoContext):
            raise ConfigError(f"autocontext must be True, False or an AutoContext, got {type(autocontext).__name__}")
        self._embedding = embedding
        self.autocontext = autocontext

    @property
    def embedding(self) -> Embeddings:
        """The embedding model (loaded on first use)."""
        if self._embedding is None:
            from rag.models.embeddings import default_embeddings

            self._embedding = default_embeddings()
        return self._embedding

    def texts(self, chunks: Sequence[Document]) -> list[str]:
        """What is embedded for each chunk."""
        return self.autocontext.embedding_texts(chunks)

    def __call__(self, chunks: Sequence[Document], *, batch_size: int = 512) -> list[list[float]]:
        """One vector per chunk."""
        texts = self.texts(chunks)
        vectors: list[list[float]] = []
        for start in range(0, len(texts), batch_size):
            vectors += self.embedding.embed_documents(texts[start:start + batch_size])
        return vectors


class ChromaStore:
    """Step 4: write chunks and their vectors to a Chroma collection; return a `Resource`.

    Args:
        persist_directory: a folder for a persistent store; None keeps it in memory.
    """

    def __init__(self, persist_directory: str | Path | None = None) -> None:
        self.persist_directory = persist_directory

    def __call__(self, name: str, chunks: Sequence[Document], vectors: Sequence[Sequence[float]],
                 embedding: Embeddings, *, description: str = "", search_kwargs: dict[str, Any] | None = None) -> Any:
        """Upsert (ids are content hashes, so rebuilding does not duplicate) and wrap as a resource."""
        import chromadb

        from rag.core.resource import Resource, _chroma_collection_name
        from rag.indexing.kb_retriever import KnowledgeBaseRetriever

        if self.persist_directory is None:
            client = chromadb.EphemeralClient()
            collection_name = _chroma_collection_name(f"{name}-{uuid.uuid4().hex[:8]}")
        else:
            client = chromadb.PersistentClient(path=str(Path(self.persist_directory).resolve()))
            collection_name = _chroma_collection_name(name)
        collection = client.get_or_create_collection(collection_name, metadata={"hnsw:space": "cosine"},
                                                     embedding_function=None)
        metas = [scalar_metadata(c.metadata) for c in chunks]
        ids = [chunk_id(str(m.get("doc_id", "")), int(m.get("chunk_index", n)), c.page_content, m)
               for n, (c, m) in enumerate(zip(chunks, metas, strict=True))]
        for start in range(0, len(ids), _UPSERT_BATCH):
            end = start + _UPSERT_BATCH
            collection.upsert(ids=ids[start:end], embeddings=[list(v) for v in vectors[start:end]],
                              documents=[c.page_content for c in chunks[start:end]], metadatas=metas[start:end])
        retriever = KnowledgeBaseRetriever(collection=collection, embedding=embedding)
        return Resource(name=name, retriever=retriever, description=description, search_kwargs=search_kwargs or {})


def build_index(
    sources: str | Path | Document | Sequence[str | Path | Document],
    *,
    name: str = "index",
    chunker: Callable[..., list[Document]] | None = None,
    embedder: Callable[..., list[list[float]]] | Embeddings | None = None,
    tagger: Callable[..., list[Document]] | bool | None = None,
    store: Callable[..., Any] | str | Path | None = None,
    chunker_kwargs: dict[str, Any] | None = None,
    embedder_kwargs: dict[str, Any] | None = None,
    tagger_kwargs: dict[str, Any] | None = None,
    store_kwargs: dict[str, Any] | None = None,
) -> Any:
    """Build a searchable `Resource` from files, folders or Documents in four pluggable steps.

    Args:
        sources: paths (files or folders) and/or Documents.
        name: the resource name (and Chroma collection name).
        chunker: step 1 (default `FileChunker()`).
        embedder: step 3: an `Embedder`, any `Embeddings` (wrapped in an `Embedder` with
            AutoContext), or any callable `chunks -> vectors` with an `embedding` attribute.
        tagger: step 2: None (no tags), True (`KeywordTagger()`), or a callable `chunks -> chunks`.
        store: step 4: a `ChromaStore`, a folder (persistent Chroma there), or None (in memory).
        chunker_kwargs, embedder_kwargs, tagger_kwargs, store_kwargs: per-step keyword arguments.

    Returns:
        A `Resource` whose retriever takes `k` and portable filters.

    Raises:
        ConfigError: no chunks (nothing readable), or a step of the wrong kind.

    Example:
        >>> res = build_index("docs/", chunker_kwargs={"chunk_size": 128}, tagger=True)   # doctest: +SKIP
        >>> res.retrieve("install", search_kwargs={"filter": {"tag_linux": True}})       # doctest: +SKIP
    """
    items = [sources] if isinstance(sources, str | Path | Document) else list(sources)
    chunker = chunker or FileChunker()
    if isinstance(embedder, Embeddings) or embedder is None:
        embedder = Embedder(embedder)
    if tagger is True:
        from rag.indexing.tags import KeywordTagger

        tagger = KeywordTagger()
    if store is None or isinstance(store, str | Path):
        store = ChromaStore(store)
    for label, step in (("chunker", chunker), ("embedder", embedder), ("store", store)):
        if not callable(step):
            raise ConfigError(f"{label} must be callable, got {type(step).__name__}")
    if tagger is not None and tagger is not False and not callable(tagger):
        raise ConfigError(f"tagger must be None, True or callable, got {type(tagger).__name__}")

    chunks = chunker(items, **(chunker_kwargs or {}))
    if not chunks:
        raise ConfigError(f"no chunks to index from {len(items)} source(s): nothing readable was found")
    if tagger:
        chunks = tagger(chunks, **(tagger_kwargs or {}))
    vectors = embedder(chunks, **(embedder_kwargs or {}))
    if len(vectors) != len(chunks):
        raise ConfigError(f"the embedder returned {len(vectors)} vectors for {len(chunks)} chunks")
    embedding = getattr(embedder, "embedding", None)
    if not isinstance(embedding, Embeddings):
        raise ConfigError("the embedder needs an `embedding` attribute (the model that embeds queries)")
    return store(name, chunks, vectors, embedding, **(store_kwargs or {}))
