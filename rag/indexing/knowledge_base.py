"""`KnowledgeBase` (spRAG): a named, persistent, incrementally updated index of documents.

A knowledge base lives in a directory (default `.rag/`, shared by several knowledge bases):

    .rag/chroma.sqlite3 ...            the Chroma store (one cosine collection per knowledge base)
    .rag/embeddings.sqlite             the embedding cache (`CachedEmbeddings`), shared
    .rag/write.lock                    one writer at a time (`WriterLock`)
    .rag/kb/<name>/manifest.json       components and settings (`Manifest`)
    .rag/kb/<name>/records.sqlite      per-document content hashes and chunk ids (`RecordStore`)

Adding the same corpus again embeds and writes nothing; a changed file replaces exactly its
chunks; `cleanup="incremental"` removes files that disappeared under the given folders and
`cleanup="full"` everything not in this run (as LangChain's indexing API). A writer killed at
any point leaves a store that the next run repairs (see docs/indexing.md). The indexing
itself is in `rag.indexing.sync`.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> import tempfile
    >>> kb = KnowledgeBase("notes", tempfile.mkdtemp(), embedding=DeterministicFakeEmbedding(size=16))
    >>> from langchain_core.documents import Document
    >>> kb.add_documents([Document(page_content="Paris is in France.", metadata={"source": "geo"})]).added
    ['geo']
    >>> kb.add_documents([Document(page_content="Paris is in France.", metadata={"source": "geo"})]).unchanged
    ['geo']
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from rag.core.errors import ConfigError
from rag.indexing.autocontext import AutoContext
from rag.indexing.chunking import PassthroughChunker, TokenChunker
from rag.indexing.embedding_cache import CachedEmbeddings
from rag.indexing.locking import WriterLock
from rag.indexing.manifest import EmbeddingInfo, Manifest, StoreInfo, embedding_from_id
from rag.indexing.records import DocumentRecord, RecordStore
from rag.indexing.sync import CLEANUP_MODES, IndexReport, Source, sync

__all__ = ["DEFAULT_DIRECTORY", "KnowledgeBase", "list_knowledge_bases"]

logger = logging.getLogger(__name__)

DEFAULT_DIRECTORY = ".rag"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_COMPARED = {"chunking": ("chunk_size", "chunk_overlap", "headers"), "autocontext": ("enabled", "max_header_tokens")}


def list_knowledge_bases(directory: str | Path = DEFAULT_DIRECTORY) -> list[str]:
    """Names of the knowledge bases in `directory`.

    Example:
        >>> list_knowledge_bases("/nonexistent")
        []
    """
    root = Path(directory) / "kb"
    return sorted(p.parent.name for p in root.glob("*/manifest.json")) if root.is_dir() else []


class KnowledgeBase:
    """A persistent knowledge base: add, update, delete and search documents.

    Args:
        name: 1-63 characters of letters, digits, `.`, `_`, `-` (also the Chroma collection).
        directory: where it is stored (created if missing).
        embedding: the embedding model; defaults to the one recorded in the manifest, or to
            `rag.models.embeddings.default_embeddings()` for a new knowledge base.
        chunker: defaults to `TokenChunker()` (200 MiniLM word pieces, 30 overlap);
            `PassthroughChunker()` stores already-chunked documents as they are.
        autocontext: defaults to `AutoContext()` (title / section + extractive summary);
            `AutoContext(enabled=False)` embeds chunks alone.
        tagger: optional, e.g. `KeywordTagger()` (tags in metadata, selectable by filters).
        description: what it holds (shown by resources and the server).
        cache: keep an on-disk embedding cache in the directory.
        lock_timeout: seconds a writer waits for another writer before `StoreError`.

    Raises:
        ConfigError: bad name, or settings that differ from the manifest (another embedding
            model, chunk size or AutoContext setting).
    """

    def __init__(self, name: str, directory: str | Path = DEFAULT_DIRECTORY, *, embedding: Embeddings | None = None,
                 chunker: TokenChunker | PassthroughChunker | None = None, autocontext: AutoContext | None = None,
                 tagger: Any = None, description: str = "", cache: bool = True, lock_timeout: float = 0.0) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigError(f"knowledge base name {name!r} is not valid: use 1-63 letters, digits, '.', '_' "
                              "or '-', starting with a letter or digit")
        self.name = name
        self.directory = Path(directory)
        self.home = self.directory / "kb" / name
        self.manifest_path = self.home / "manifest.json"
        existing = Manifest.load(self.manifest_path) if self.manifest_path.exists() else None
        if embedding is None:
            from rag.models.embeddings import default_embeddings

            embedding = embedding_from_id(existing.embedding.id) if existing else default_embeddings()
        from rag.models.embeddings import embedding_id

        model_id = embedding_id(embedding)
        if existing and existing.embedding.id != model_id:
            dim = f", {existing.embedding.dimension}-d" if existing.embedding.dimension else ""
            raise ConfigError(f"knowledge base {name!r} in {self.directory} was built with the embedding model "
                              f"{existing.embedding.id!r}{dim}; got {model_id!r}. Open it with the same model, "
                              "or index into a new knowledge base name")
        self.chunker = chunker or (_chunker_from(existing.chunking) if existing else TokenChunker())
        self.autocontext = autocontext or (AutoContext(**_autocontext_kwargs(existing.autocontext)) if existing
                                           else AutoContext())
        self.tagger = tagger
        if existing:
            self._check_same(existing, "chunking", self.chunker.settings())
            self._check_same(existing, "autocontext", self.autocontext.settings())
            if tagger is None and existing.tagger:
                from rag.indexing.tags import KeywordTagger

                self.tagger = KeywordTagger(**{k: v for k, v in existing.tagger.items() if k != "type"})
        self.embedding_model = embedding
        self.embedding = CachedEmbeddings(embedding, path=self.directory / "embeddings.sqlite",
                                          model_id=model_id) if cache else embedding
        self.lock = WriterLock(self.directory, timeout=lock_timeout)
        self.manifest = existing or Manifest(
            name=name, description=description, embedding=EmbeddingInfo(id=model_id),
            chunking=self.chunker.settings(), autocontext=self.autocontext.settings(),
            tagger=tagger.settings() if tagger is not None else None, store=StoreInfo(collection=_collection(name)))
        if existing is None or (description and description != existing.description):
            self.manifest.description = description or self.manifest.description
            self.manifest.save(self.manifest_path)
        self.records = RecordStore(self.home / "records.sqlite")
        self._collection: Any = None

    @classmethod
    def open(cls, name: str, directory: str | Path = DEFAULT_DIRECTORY, **kwargs: Any) -> KnowledgeBase:
        """Open an existing knowledge base; `ConfigError` listing the available ones if missing."""
        if not (Path(directory) / "kb" / name / "manifest.json").exists():
            names = list_knowledge_bases(directory)
            raise ConfigError(f"no knowledge base {name!r} in {directory}; available: {', '.join(names) or '(none)'}")
        return cls(name, directory, **kwargs)

    def _check_same(self, existing: Manifest, part: str, settings: dict[str, Any]) -> None:
        recorded = getattr(existing, part)
        for key in ("type", *_COMPARED[part]):
            if key in recorded and recorded[key] != settings.get(key):
                raise ConfigError(f"knowledge base {self.name!r} was built with {part} {key}={recorded[key]!r}, "
                                  f"got {settings.get(key)!r}; use the recorded settings or a new knowledge base")

    def __repr__(self) -> str:
        return f"KnowledgeBase({self.name!r}, {str(self.directory)!r})"

    # ------------------------------------------------------------------ store
    @property
    def collection(self) -> Any:
        """The Chroma collection (cosine space), opened on first use."""
        if self._collection is None:
            import chromadb

            client = chromadb.PersistentClient(path=str(self.directory.resolve()))
            self._collection = client.get_or_create_collection(
                self.manifest.store.collection, metadata={"hnsw:space": "cosine"}, embedding_function=None)
        return self._collection

    def count(self) -> int:
        """Number of chunks in the store."""
        return int(self.collection.count())

    def record_dimension(self, dimension: int) -> None:
        """Record the embedding dimension on first write; a mismatch is a `ConfigError`."""
        known = self.manifest.embedding.dimension
        if known is None:
            self.manifest.embedding.dimension = dimension
            self.manifest.save(self.manifest_path)
        elif known != dimension:
            raise ConfigError(f"knowledge base {self.name!r} holds {known}-d vectors; the embedding model gave "
                              f"{dimension}-d ones")

    # ------------------------------------------------------------------ writing
    def add_documents(self, sources: Source | Sequence[Source], *, include: str | Sequence[str] = "**/*",
                      exclude: str | Sequence[str] = (), cleanup: str | None = None,
                      progress: Callable[[str, int], None] | None = None) -> IndexReport:
        """Index files, folders or Documents; unchanged ones are skipped without embedding.

        Args:
            sources: paths (files or folders) and/or Documents (grouped by `metadata["source"]`).
            include, exclude: globs for files under folders (see `load_directory`).
            cleanup: None keeps everything else; "incremental" deletes documents that were
                indexed from the given folders but are no longer there; "full" deletes every
                document not in `sources`.
            progress: called with (event, amount) for "files_total", "file", "pages", "chunks",
                "embeddings".

        Returns:
            What was added, updated, unchanged, deleted and skipped (with reasons).

        Raises:
            StoreError: another process is writing (after `lock_timeout`).
        """
        if cleanup not in CLEANUP_MODES:
            raise ConfigError(f"cleanup must be one of {', '.join(map(repr, CLEANUP_MODES))}; got {cleanup!r}")
        with self.lock:
            return sync(self, sources, include=include, exclude=exclude, cleanup=cleanup, progress=progress)

    def update_document(self, source: str | Path, documents: Sequence[Document] | None = None) -> IndexReport:
        """Re-index one file now (or replace a source's content with `documents`)."""
        if documents is not None:
            docs = [Document(page_content=d.page_content, metadata={**d.metadata, "source": str(source)})
                    for d in documents]
            return self.add_documents(docs)
        with self.lock:
            return sync(self, [source], force=True)

    def delete_document(self, source: str | Path) -> int:
        """Delete a document (by path, source or doc_id) and its chunks; returns chunks deleted."""
        key = str(source)
        record = self.records.find(key) or self.records.find(str(Path(key).resolve()))
        if record is None:
            raise ConfigError(f"no document {key!r} in knowledge base {self.name!r}; "
                              "see list_documents() for what it holds")
        with self.lock:
            return self.delete_records([record])

    def delete_records(self, records: Sequence[DocumentRecord]) -> int:
        """Delete documents' chunks and records (crash-safe: marked `deleting` first). Hold the lock."""
        if not records:
            return 0
        for rec in records:
            rec.state = "deleting"
        self.records.put_many(records)
        doc_ids = [r.doc_id for r in records]
        ids = self.collection.get(where={"doc_id": {"$in": doc_ids}}, include=[])["ids"]
        if ids:
            self.collection.delete(ids=ids)
        self.records.delete(*(r.source for r in records))
        return len(ids)

    # ------------------------------------------------------------------ reading
    def list_documents(self) -> list[DocumentRecord]:
        """Records of the documents it holds (source, doc_id, hash, chunk ids, title, summary)."""
        return [r for r in self.records.all().values() if r.state == "ok"]

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        """Chunks matching a portable filter (all when None), in no particular order.

        This makes a knowledge base a chunk source for `rag.indexing.neighbours`
        (`neighbours(kb, doc_id, chunk_index, window=2)`).

        Example:
            >>> kb.get_documents({"doc_id": "ab12", "chunk_index": {"$gte": 3, "$lt": 6}})   # doctest: +SKIP
        """
        from rag.core.filters import to_chroma_where, validate_filter
        from rag.retrieval.chroma_direct import documents_from_get

        flt = validate_filter(filter)
        return documents_from_get(self.collection.get(where=to_chroma_where(flt) if flt else None,
                                                      include=["documents", "metadatas"]))

    def neighbours(self, doc_id: str, chunk_index: int, *, window: int = 2) -> list[Document]:
        """Chunks `chunk_index - window .. chunk_index + window` of `doc_id`, in order (those that exist)."""
        from rag.indexing.neighbours import neighbours

        return neighbours(self, doc_id, chunk_index, window=window)

    def get_chunks(self, doc_id: str) -> list[Document]:
        """All chunks of a document, in `chunk_index` order."""
        return sorted(self.get_documents({"doc_id": doc_id}), key=lambda d: d.metadata.get("chunk_index", 0))

    def as_retriever(self, *, k: int = 4, filter: dict[str, Any] | None = None,
                     score_threshold: float | None = None) -> Any:
        """A `KnowledgeBaseRetriever` (takes `k` and portable `filter` per call)."""
        from rag.indexing.kb_retriever import KnowledgeBaseRetriever

        return KnowledgeBaseRetriever(collection=self.collection, embedding=self.embedding, k=k, filter=filter,
                                      score_threshold=score_threshold)

    def as_hybrid_retriever(self, *, k: int = 4, fusion: str = "rrf", weights: dict[str, float] | None = None,
                            fetch_k: int = 20, rrf_k: int = 60, bm25_settings: dict[str, Any] | None = None,
                            chunks: Sequence[Document] | None = None) -> Any:
        """A `HybridRetriever`: dense search over this knowledge base's collection and BM25 over its chunks, fused.

        The BM25 index is built now, in memory, from the chunks stored at this moment (title and
        section indexed with the text by default); build the retriever again after the knowledge
        base changes. `chunks`: the stored chunks, when the caller has read them already.

        Raises:
            ConfigError: the knowledge base is empty, or a fusion setting is invalid.
        """
        import chromadb
        from pydantic import ValidationError

        from rag.core.resource import new_chroma
        from rag.retrieval.hybrid import HybridRetriever
        from rag.retrieval.lexical import BM25Index

        chunks = self.get_documents() if chunks is None else chunks
        if not chunks:
            raise ConfigError(f"knowledge base {self.name!r} is empty: index documents before searching it")
        bm25 = BM25Index.from_documents(chunks, **{"metadata_fields": ["title", "section"], **(bm25_settings or {})})
        store = new_chroma(self.manifest.store.collection, self.embedding,
                           client=chromadb.PersistentClient(path=str(self.directory.resolve())))
        try:
            return HybridRetriever(vectorstore=store, bm25=bm25, k=k, fusion=fusion, weights=weights,
                                   fetch_k=max(fetch_k, k), rrf_k=rrf_k)
        except ValidationError as exc:
            raise ConfigError(f"hybrid search over {self.name!r}: {exc.errors()[0]['msg']}") from exc

    def as_resource(self, *, name: str | None = None, search_kwargs: dict[str, Any] | None = None,
                    description: str | None = None, hybrid: dict[str, Any] | None = None,
                    sections: dict[str, Any] | None = None) -> Any:
        """A `Resource` searching this knowledge base (for `RAG(resources=[...])`).

        `hybrid`: settings for `as_hybrid_retriever` (``{}`` for its defaults) to search with dense +
        BM25 fused; None searches the dense vectors only. `sections`: promote the sections a
        question names (`rag.retrieval.sections.SectionRetriever`): ``at`` and the `SectionRouter`
        settings (``min_score``, ``top_n``, ``prefix``, ``detect``); ``{}`` for the defaults. Both
        read the stored chunks now: build the resource again after the knowledge base changes.
        """
        from rag.core.resource import Resource

        chunks = self.get_documents() if hybrid is not None or sections is not None else None
        retriever = self.as_retriever() if hybrid is None else self.as_hybrid_retriever(**hybrid, chunks=chunks)
        if sections is not None:
            from rag.retrieval.sections import SectionRetriever, SectionRouter

            settings = dict(sections)
            placement = {"at": settings.pop("at")} if "at" in settings else {}   # else SectionRetriever's default
            retriever = SectionRetriever(retriever=retriever, router=SectionRouter(chunks or [], **settings),
                                         **placement)
        return Resource(name=name or self.name, retriever=retriever,
                        description=self.manifest.description if description is None else description,
                        search_kwargs=search_kwargs or {})

    def close(self) -> None:
        """Release file handles (the store stays on disk)."""
        self.records.close()
        if isinstance(self.embedding, CachedEmbeddings):
            self.embedding.close()


def _collection(name: str) -> str:
    from rag.core.resource import _chroma_collection_name

    return _chroma_collection_name(name)


def _chunker_from(settings: dict[str, Any]) -> Any:
    if settings.get("type") == "passthrough":
        return PassthroughChunker()
    return TokenChunker(**{k: settings[k] for k in ("chunk_size", "chunk_overlap", "headers") if k in settings})


def _autocontext_kwargs(settings: dict[str, Any]) -> dict[str, Any]:
    if str(settings.get("summary", "extractive")).startswith("llm:"):
        logger.info("this knowledge base summarises with %s; new documents get extractive summaries unless "
                    "autocontext=AutoContext(llm=...) is passed", settings["summary"])
    return {k: settings[k] for k in ("enabled", "max_header_tokens") if k in settings}

