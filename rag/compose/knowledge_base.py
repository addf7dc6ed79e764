"""`KnowledgeBase`: a persistent, incrementally updated knowledge base you can search.

The library's one knowledge base class. It owns two collaborators on the indexing floor: its storage
(`rag.indexing.kb_parts.IndexTarget`: manifest, writer lock, document records, chunk store, embedding
model, chunker / tagger / AutoContext) and a `Syncer` (`rag.indexing.sync`) over it; every write goes
through the library's one write path, `rag.indexing.write_path`, which the front doors below this
floor (`HybridRetriever.from_documents`, `Resource`'s persisting constructors, `rag index`) call too.
This class adds what needs the floors above: hybrid search (`as_hybrid_retriever`) and a `Resource`
for `RAG` (`as_resource`). See docs/development.md, "The knowledge base".

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.documents import Document
    >>> import tempfile
    >>> kb = KnowledgeBase("notes", tempfile.mkdtemp(), embedding=DeterministicFakeEmbedding(size=16))
    >>> kb.add_documents([Document(page_content="Paris is in France.", metadata={"source": "geo"})]).added
    ['geo']
    >>> kb.add_documents([Document(page_content="Paris is in France.", metadata={"source": "geo"})]).unchanged
    ['geo']
    >>> res = kb.as_resource()
    >>> [d.page_content for d in res.retrieve("Paris")]
    ['Paris is in France.']
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore

from rag.base.acl import PermissionsLike
from rag.base.errors import ConfigError, StoreError, short_repr
from rag.compose.resource import Resource
from rag.indexing.access import AccessRules
from rag.indexing.autocontext import AutoContext
from rag.indexing.executors import ExecutorLike
from rag.indexing.formats import Chunker
from rag.indexing.kb_parts import IndexTarget
from rag.indexing.kb_retriever import KnowledgeBaseRetriever
from rag.indexing.kb_settings import is_name
from rag.indexing.limits import LimitsLike
from rag.indexing.manifest import DEFAULT_DIRECTORY, missing_knowledge_base
from rag.indexing.neighbours import neighbours
from rag.indexing.records import DocumentRecord, RecordStore
from rag.indexing.tags import KeywordTagger
from rag.indexing.sync import IndexReport, Source, Syncer
from rag.indexing.write_path import change_permissions, delete_source, index_sources, reindex_source, sync_source
from rag.retrieval.kb_search import (
    knowledge_base_retriever,
    knowledge_base_router,
    knowledge_base_sections,
)
from rag.stores.chunk_store import ChunkStore

__all__ = ["KnowledgeBase"]

logger = logging.getLogger(__name__)


def _access_kwargs(permissions: Mapping[str, Any] | None) -> dict[str, Any]:
    """`AccessRules.of` arguments from `permissions={"rules": [...], "public_by_default": bool}`."""
    if permissions is None:
        return {}
    if not isinstance(permissions, Mapping) or set(permissions) - {"rules", "public_by_default"}:
        raise ConfigError(f"permissions= takes {{'rules': [{{'match': GLOB, 'groups': [...]}}], "
                          f"'public_by_default': bool}}; got {short_repr(permissions)}")
    return {"rules": permissions.get("rules"), "public_by_default": permissions.get("public_by_default") is True}


def _deprecated(attribute: str) -> None:
    warnings.warn(f"KnowledgeBase.{attribute} is deprecated: use kb.chunks (the store of the chunks, the same on "
                  f"every backend; the default backend's own {attribute} is kb.chunks.{attribute})",
                  DeprecationWarning, stacklevel=3)


def _part(attribute: str, doc: str) -> Any:
    """A read-only view of one of the storage's parts."""
    return property(lambda self: getattr(self.storage, attribute), doc=doc)


class KnowledgeBase:
    """A persistent knowledge base: add, update, delete, search documents, and use it as a `Resource`.

    Args:
        name: 1-63 characters of letters, digits, `.`, `_`, `-` (its collection in the default store: the
            name, or a name derived from it when the store would change it:
            `rag.stores.registry.knowledge_base_store`).
        directory: where it is stored (created by the first write); None keeps it in a private temporary
            directory removed when the process exits (`Resource.from_directory`, `build_index`).
        embedding: the embedding model; defaults to the one recorded in the manifest, or to
            `rag.models.embeddings.default_embeddings()` for a new knowledge base.
        chunker: defaults to `TokenChunker()` (200 MiniLM word pieces, 30 overlap);
            `PassthroughChunker()` stores already-chunked documents as they are; any
            `rag.indexing.formats.Chunker` will do (its `settings()` are recorded in the manifest, and the
            knowledge base is reopened with the same chunker).
        autocontext: defaults to `AutoContext()` (title / section + extractive summary);
            `AutoContext(enabled=False)` embeds chunks alone.
        tagger: optional, e.g. `KeywordTagger()` (tags in metadata, selectable by filters).
        description: what it holds (shown by resources); a new one for an existing one is saved by a write.
        cache: keep an on-disk embedding cache in the directory.
        lock_timeout: seconds a writer waits for another writer before `StoreError`.
        client: the default store's client holding the collection (default: a persistent client on
            `directory`; `rag.stores.registry.server_client(host, port)` for a server). Manifest, records and
            lock stay in `directory`.
        store: keep the chunks in another vector store, of a backend of `rag.stores.registry`
            (`rag.stores.pgvector.open_store(...)`, a `QdrantVectorStore`, ...); the manifest records its
            backend, and the knowledge base must be opened with a store of that backend again (docs/stores.md).
        permissions: who may read what it indexes: `{"rules": [{"match": "*/team-a/*", "groups": ["team-a"]}],
            "public_by_default": bool}` (first matching rule; see `add_documents(permissions=...)` and
            docs/security.md).

    Construction and reads write nothing: the first write creates the knowledge base, under the writer
    lock; reading one never written raises `StoreError` listing the existing ones.

    Raises:
        ConfigError: bad name, or settings that differ from the manifest (another embedding
            model, chunk size or AutoContext setting).
        StoreError: the manifest is damaged, names another knowledge base, or store files are
            symlinks.
    """

    def __init__(self, name: str, directory: str | Path | None = DEFAULT_DIRECTORY, *,
                 embedding: Embeddings | None = None,
                 chunker: Chunker | None = None, autocontext: AutoContext | None = None,
                 tagger: KeywordTagger | None = None, description: str = "", cache: bool = True,
                 lock_timeout: float = 0.0, client: Any = None, store: VectorStore | ChunkStore | None = None,
                 permissions: Mapping[str, Any] | None = None) -> None:
        #: its storage: manifest, lock, records, chunk store, embedding, components (`IndexTarget`)
        self.storage = IndexTarget(name, directory, embedding=embedding, chunker=chunker, autocontext=autocontext,
                                   tagger=tagger, description=description, cache=cache,
                                   lock_timeout=lock_timeout, client=client, store=store)
        #: who may read the documents it indexes (`rag.indexing.access.AccessRules`): rules, default
        self.storage.access = AccessRules.of(**_access_kwargs(permissions))
        #: what brings the store in line with the sources of a write (`rag.indexing.sync.Syncer`)
        self.syncer = Syncer(self.storage)

    @classmethod
    def open(cls, name: str, directory: str | Path = DEFAULT_DIRECTORY, **kwargs: Any) -> KnowledgeBase:
        """Open an existing knowledge base; `StoreError` listing the existing ones if it does not exist.

        One whose chunks are in a pgvector table (`store=`) is found in that database, whatever `directory`
        holds (docs/stores.md, "A knowledge base named by its connection")."""
        if not is_name(name) or (kwargs.get("store") is None and
                                 not (Path(directory) / "kb" / name / "manifest.json").exists()):
            raise missing_knowledge_base(str(name), Path(directory))
        kb = cls(name, directory, **kwargs)
        if not kb.exists:
            raise missing_knowledge_base(str(name), Path(directory))
        return kb

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {str(self.directory)!r})"

    name = _part("name", "Its name (also the default store's collection).")
    directory = _part("directory", "The directory it is stored in.")
    home = _part("home", "Its folder, `<directory>/kb/<name>` (manifest, records, BM25 cache).")
    manifest = _part("manifest", "Its manifest (`rag.indexing.manifest.Manifest`): what it was built with.")
    manifest_path = _part("manifest_path", "Where the manifest is saved.")
    lock = _part("lock", "Its writer lock (`rag.indexing.locking.WriterLock`).")
    embedding = _part("embedding", "The embedding used for writes and dense search (cached when `cache`).")
    embedding_model = _part("embedding_model", "The embedding model itself.")
    backend = _part("backend", "Where the chunks are kept: the default backend, or the `store` given's.")
    remote_store = _part("remote", "Whether the chunks live apart from the records (a Chroma server, a store).")
    exists = _part("exists", "Whether it has been created (its manifest is on disk).")
    tables = _part("tables", "Where its manifest, records and writer lock live beside its chunks (pgvector's tables, "
                             "an engine's side collection: `rag.stores.kb_side.kb_tables`), or None (in its folder).")

    @property
    def chunker(self) -> Chunker:
        """Its chunker (`TokenChunker` by default)."""
        return self.storage.components.chunker

    @property
    def tagger(self) -> KeywordTagger | None:
        """Its tagger, or None."""
        return self.storage.components.tagger

    @property
    def autocontext(self) -> AutoContext:
        """Its AutoContext settings."""
        return self.storage.components.autocontext

    @property
    def records(self) -> RecordStore:
        """The document records (`RecordStore`), opened on first use; `StoreError` if never created."""
        return self.storage.records

    @property
    def chunks(self) -> ChunkStore:
        """The store of the chunks (`rag.stores.chunk_store`): the default store in `directory`, or the `store` given."""
        return self.storage.chunks

    @property
    def client(self) -> Any:
        """Deprecated: `kb.chunks`, the store, is the way to the chunks on every backend.

        The client of a knowledge base's own store in `directory` or on a server (the default backend's),
        read from the store (`kb.chunks.client`); None on another backend."""
        _deprecated("client")
        return getattr(self.chunks, "client", None)

    @property
    def collection(self) -> Any:
        """Deprecated: `kb.chunks`, the store, is the way to the chunks on every backend.

        The default backend's own collection, read from the store (`kb.chunks.collection`); `StoreError` on
        another backend."""
        _deprecated("collection")
        found = getattr(self.chunks, "collection", None)
        if found is None:
            raise StoreError(f"knowledge base {self.name!r} keeps its chunks in {self.backend}, not in a Chroma "
                             "collection; use kb.chunks")
        return found

    def create(self) -> KnowledgeBase:
        """Create the knowledge base (empty) if it does not exist; returns itself. Writes do this on their own.

        Under the writer lock, as every write (a changed description given to an existing one is saved here).
        """
        self.storage.create()
        return self

    def count(self) -> int:
        """Number of chunks in the store."""
        return self.chunks.count()

    def close(self) -> None:
        """Release file handles (the store stays on disk)."""
        self.storage.close()

    # ------------------------------------------------------------------ writing
    def add_documents(self, sources: Source | Sequence[Source], *, include: str | Sequence[str] = "**/*",
                      exclude: str | Sequence[str] = (), cleanup: str | None = None,
                      progress: Callable[[str, int], None] | None = None,
                      follow_symlinks: bool = False, executor: ExecutorLike = None,
                      limits: LimitsLike = None, permissions: PermissionsLike | None = None) -> IndexReport:
        """Index files, folders or Documents; unchanged ones are skipped without embedding.

        Creates the knowledge base on first use (under the writer lock, as every write).

        Args:
            sources: paths (files or folders) and/or Documents (grouped by `metadata["source"]`).
            include, exclude: globs for files under folders (see `load_directory`).
            cleanup: None keeps everything else; "incremental" deletes documents indexed from the given
                folders that are no longer there; "full" deletes every document not in `sources`.
            progress: called with (event, amount): "files_total", "file", "pages", "chunks", "embeddings".
            follow_symlinks: also index what symlinks under the folders lead to outside them (by default
                such links are skipped and listed in `skipped`).
            executor: None / "local" (this process), "ray" or a `RayExecutor(...)` (docs/scale.md).
            limits: what reading one file may cost (`rag.indexing.limits.LoadLimits`, or a mapping of its
                fields: tables, OCR, seconds and sizes; None: the defaults). What hits one is in the report's
                `notes`; files whose reading other settings change (PDFs, images) are read again
                (docs/indexing.md).
            permissions: who may read every document of this call: `"public"` or `{"users": [...],
                "groups": [...], "public": bool}`; None: each document's source metadata (`acl_users`,
                `acl_groups`, `acl_public`), then the knowledge base's rules (docs/security.md). A document
                already indexed gets them in place, without embedding again.

        Returns:
            What was added, updated, unchanged, deleted and skipped (with reasons).

        Raises:
            StoreError: another process is writing (after `lock_timeout`), or the store cannot be written
                (full disk, damaged files): the message names the cause and the fix.
        """
        return index_sources(self.storage, sources, include=include, exclude=exclude, cleanup=cleanup,
                             progress=progress, follow_symlinks=follow_symlinks, executor=executor,
                             syncer=self.syncer, limits=limits, permissions=permissions)

    def sync(self, source: Any, *, progress: Callable[[str, int], None] | None = None, executor: ExecutorLike = None,
             limits: LimitsLike = None, force: bool = False) -> IndexReport:
        """Bring the knowledge base in line with a source (`rag.sources`: object stores, web sites, git, any
        LangChain loader, `FolderSource`): new items added, changed ones replaced, vanished ones deleted,
        unchanged ones not even fetched (docs/sources.md).

        Example:
            >>> from rag.sources import GitSource
            >>> kb.sync(GitSource("path/to/repo", revision="main")).summary()   # doctest: +SKIP
            'added 12, updated 0, unchanged 0, moved 0, deleted 0, skipped 0 document(s); ...'
        """
        return sync_source(self.storage, source, progress=progress, executor=executor, syncer=self.syncer,
                           limits=limits, force=force)

    def update_document(self, source: str | Path, documents: Sequence[Document] | None = None, *,
                        limits: LimitsLike = None) -> IndexReport:
        """Re-index one file now within `limits` (see `add_documents`), or replace a source's content with
        `documents`."""
        return reindex_source(self.storage, source, documents, syncer=self.syncer, limits=limits)

    def set_permissions(self, source: str | Path, permissions: PermissionsLike) -> int:
        """Change who may read one document (by path, source or doc_id): its chunks' metadata is updated in
        place, nothing is embedded again; returns the chunks changed.

        Example:
            >>> kb.set_permissions("plans/q3.md", {"groups": ["team-a", "leads"]})   # doctest: +SKIP
        """
        return change_permissions(self.storage, source, permissions)

    def delete_document(self, source: str | Path) -> int:
        """Delete a document (by path, source or doc_id) and its chunks; returns chunks deleted."""
        return delete_source(self.storage, source)

    # ------------------------------------------------------------------ reading
    def list_documents(self) -> list[DocumentRecord]:
        """Records of the documents it holds (source, doc_id, hash, chunk ids, title, summary)."""
        return self.storage.list_documents()

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        """Chunks matching a portable filter (all when None), by document and position.

        The order depends on neither the store nor the write order (BM25 breaks ties by position).

        Example:
            >>> kb.get_documents({"doc_id": "ab12", "chunk_index": {"$gte": 3, "$lt": 6}})   # doctest: +SKIP
        """
        return self.storage.get_documents(filter)

    def neighbours(self, doc_id: str, chunk_index: int, *, window: int = 2) -> list[Document]:
        """Chunks `chunk_index - window .. chunk_index + window` of `doc_id`, in order (those that exist)."""
        return neighbours(self, doc_id, chunk_index, window=window)

    def get_chunks(self, doc_id: str) -> list[Document]:
        """All chunks of a document, in `chunk_index` order."""
        return self.get_documents({"doc_id": doc_id})   # (read in document order)

    def as_retriever(self, *, k: int = 4, filter: dict[str, Any] | None = None,
                     score_threshold: float | None = None) -> KnowledgeBaseRetriever:
        """A `KnowledgeBaseRetriever`: dense search (takes `k` and portable `filter` per call)."""
        return KnowledgeBaseRetriever(chunks=self.chunks, embedding=self.embedding, k=k, filter=filter,
                                      score_threshold=score_threshold)

    def as_hybrid_retriever(self, *, k: int = 4, fusion: str = "rrf", weights: dict[str, float] | None = None,
                            fetch_k: int = 20, rrf_k: int = 60, bm25_settings: dict[str, Any] | None = None,
                            chunks: Sequence[Document] | None = None) -> BaseRetriever:
        """A `HybridRetriever`: dense search over this knowledge base's collection and BM25 over its chunks, fused.

        The BM25 index is built now, in memory, from the chunks stored at this moment (title and
        section indexed with the text by default); build the retriever again after the knowledge
        base changes. `chunks`: the stored chunks, when the caller has read them already.

        Raises:
            ConfigError: the knowledge base is empty, or a fusion setting is invalid.
        """
        return knowledge_base_retriever(self.storage, search="hybrid", k=k, fusion=fusion, weights=weights, fetch_k=fetch_k,
                                        rrf_k=rrf_k, bm25_settings=bm25_settings, chunks=chunks)

    def as_resource(self, *, name: str | None = None, search: str = "hybrid", routing: str | bool = "auto",
                    search_kwargs: dict[str, Any] | None = None, description: str | None = None,
                    hybrid: dict[str, Any] | None = None, sections: dict[str, Any] | None = None) -> Resource:
        """A `Resource` searching this knowledge base (for `RAG(resources=[...])`).

        Args:
            name: the resource name (default: the knowledge base's name).
            search: ``"hybrid"`` (default: dense + BM25 fused), ``"dense"`` or ``"bm25"``
                (`rag.retrieval.kb_search`).
            routing: ``"auto"`` (default: once the knowledge base holds at least 8 documents, a
                question that names documents, by a capitalised word, an acronym or letters with
                digits matching their title or file name, searches only them), ``"on"`` or ``"off"``.
                The resource carries the `DocumentRouter`; the pipeline's routing stage applies it.
            search_kwargs: default search settings (`k`, `filter`, ...).
            description: what it holds (default: the manifest's description).
            hybrid: fusion settings for hybrid search (``fusion``, ``weights``, ``fetch_k``,
                ``rrf_k``, ``bm25_settings``).
            sections: promote the sections a question names (the pipeline's named-section stage):
                ``at`` and the `SectionRouter` settings; ``{}`` for the defaults; None (default): off.

        BM25 and sections read the stored chunks now: build the resource again after the
        knowledge base changes.
        """
        if search != "dense" and hybrid is None and sections is None and self.count() == 0:
            # nothing to build BM25 from yet: dense until the resource is built again after indexing
            logger.info("knowledge base %r is empty: searching it dense until it is rebuilt", self.name)
            search = "dense"
        chunks = self.get_documents() if sections is not None and search != "dense" else None
        retriever = knowledge_base_retriever(self.storage, search=search, chunks=chunks, **(hybrid or {}))
        return Resource(name=name or self.name, retriever=retriever,
                        description=self.manifest.description if description is None else description,
                        search_kwargs=search_kwargs or {}, router=knowledge_base_router(self.storage, routing),
                        sections=knowledge_base_sections(self.storage, sections, chunks))
