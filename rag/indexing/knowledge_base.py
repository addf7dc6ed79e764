"""`KnowledgeStore`: the storage side of a knowledge base (spRAG): a named, persistent,
incrementally updated index of documents.

This is the one ingest path of the library (load -> chunk -> AutoContext -> embed -> write, in
`rag.indexing.sync`); `Resource.from_directory`, `build_index` and the config kinds call it;
`rag.KnowledgeBase` (`rag.compose.knowledge_base`) adds its retrievers and resource.

A knowledge base lives in a directory (default `.rag/`, shared by several knowledge bases):

    .rag/chroma.sqlite3 ...            the Chroma store (one cosine collection per knowledge base)
    .rag/embeddings.sqlite             the embedding cache (`CachedEmbeddings`), shared
    .rag/write.lock                    one writer at a time (`WriterLock`)
    .rag/kb/<name>/manifest.json       components and settings (`Manifest`)
    .rag/kb/<name>/records.sqlite      per-document content hashes and chunk ids (`RecordStore`)

Adding the same corpus again embeds and writes nothing; a changed file replaces exactly its
chunks; `cleanup="incremental"` removes files that disappeared under the given folders and
`cleanup="full"` everything not in this run (as LangChain's indexing API). A writer killed at
any point leaves a store that the next run repairs (see docs/indexing.md). Opening is not creating
(see `KnowledgeStore`); symlinked store files, a manifest naming another knowledge base's collection
and failed writes are `StoreError`s. `executor="ray"` runs the same sync on a Ray cluster (docs/scale.md).

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> import tempfile
    >>> kb = KnowledgeStore("notes", tempfile.mkdtemp(), embedding=DeterministicFakeEmbedding(size=16))
    >>> from langchain_core.documents import Document
    >>> kb.add_documents([Document(page_content="Paris is in France.", metadata={"source": "geo"})]).added
    ['geo']
    >>> kb.add_documents([Document(page_content="Paris is in France.", metadata={"source": "geo"})]).unchanged
    ['geo']
"""

from __future__ import annotations

import atexit
import logging
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from rag.base.errors import ConfigError, RagError, StoreError
from rag.base.tracing import index_span
from rag.indexing.autocontext import AutoContext
from rag.indexing.chunking import PassthroughChunker, TokenChunker
from rag.indexing.embedding_cache import CachedEmbeddings
from rag.indexing.executors import executor_from
from rag.indexing.kb_retriever import KnowledgeBaseRetriever
from rag.indexing.loaders import path_text
from rag.indexing.locking import WriterLock
from rag.indexing.manifest import (
    DEFAULT_DIRECTORY,
    EmbeddingInfo,
    Manifest,
    StoreInfo,
    autocontext_kwargs,
    chunker_from,
    embedding_from_id,
    list_knowledge_bases,
    missing_knowledge_base,
)
from rag.indexing.neighbours import in_document_order, neighbours
from rag.indexing.records import DocumentRecord, RecordStore
from rag.indexing.store_files import refuse_symlinks, store_write_error
from rag.indexing.sync import CLEANUP_MODES, IndexReport, Source, sync
from rag.indexing.tags import KeywordTagger
from rag.models.embeddings import default_embeddings, embedding_id
from rag.stores.chunk_store import DAMAGED_MARKER, ChunkStore
from rag.stores.registry import DEFAULT, is_engine_error, open_local, require_chunks, store_name

__all__ = ["DEFAULT_DIRECTORY", "KnowledgeStore", "list_knowledge_bases"]

logger = logging.getLogger(__name__)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


class KnowledgeStore:
    """A persistent knowledge base's documents: add, update, delete, read and dense search.

    Args:
        name: 1-63 characters of letters, digits, `.`, `_`, `-` (also the Chroma collection).
        directory: where it is stored (created if missing); None keeps it in a private temporary
            directory removed with the object (`Resource.from_directory`, `build_index`).
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
        client: the chromadb client holding the collection (default: a persistent client on
            `directory`; `rag.stores.chroma.http_client(...)` for a Chroma server). The manifest,
            records and lock always live in `directory`.
        store: keep the chunks in another vector store instead of Chroma: a store of a backend of
            `rag.stores.registry` (`rag.stores.pgvector.open_store(...)`, a
            `QdrantVectorStore`, `Milvus`, `LanceStore`, `FaissStore.open(...)`,
            `InMemoryVectorStore`); the manifest records its backend, and the knowledge base must be
            opened with a store of that backend again (docs/stores.md, support matrix).

    Construction writes nothing: the first write creates the knowledge base; reading one never written
    raises `StoreError` listing the existing ones.

    Raises:
        ConfigError: bad name, or settings that differ from the manifest (another embedding
            model, chunk size or AutoContext setting).
        StoreError: the manifest is damaged, names another knowledge base, or store files are
            symlinks.
    """

    def __init__(self, name: str, directory: str | Path | None = DEFAULT_DIRECTORY, *, embedding: Embeddings | None = None,
                 chunker: TokenChunker | PassthroughChunker | None = None, autocontext: AutoContext | None = None,
                 tagger: Any = None, description: str = "", cache: bool = True, lock_timeout: float = 0.0,
                 client: Any = None, store: Any = None) -> None:
        if client is not None and store is not None:
            raise ConfigError("give a Chroma client or another vector store (store=...), not both")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigError(f"knowledge base name {name!r} is not valid: use 1-63 letters, digits, '.', '_' "
                              "or '-', starting with a letter or digit")
        self.name = name
        self._chunks: ChunkStore | None = None
        if store is not None:
            self._chunks = require_chunks(store, all_ids=self._stored_ids,
                                          dimension=lambda: self.manifest.embedding.dimension)
        if directory is None:  # in memory: a private temporary directory, removed when the process exits
            directory = tempfile.mkdtemp(prefix=f"rag-kb-{name}-")  # (retrievers over it outlive this object)
            atexit.register(shutil.rmtree, directory, True)
            cache = False
        self.directory = Path(directory)
        self.home = self.directory / "kb" / name
        self.manifest_path = self.home / "manifest.json"
        refuse_symlinks([self.directory / "kb", self.home, self.manifest_path])
        existing = Manifest.load(self.manifest_path) if self.manifest_path.exists() else None
        if existing is not None:
            existing.check_owner(self.name, self.backend, self._store_name, self.manifest_path, self.home)
        if embedding is None:
            embedding = embedding_from_id(existing.embedding.id) if existing else default_embeddings()
        model_id = embedding_id(embedding)
        if existing:
            existing.check_embedding(name, self.directory, model_id)
        self.chunker = chunker or (chunker_from(existing.chunking) if existing else TokenChunker())
        self.autocontext = autocontext or (AutoContext(**autocontext_kwargs(existing.autocontext)) if existing
                                           else AutoContext())
        self.tagger = tagger
        if existing:
            existing.check_same(name, "chunking", self.chunker.settings())
            existing.check_same(name, "autocontext", self.autocontext.settings())
            if tagger is None and existing.tagger:
                self.tagger = KeywordTagger(**{k: v for k, v in existing.tagger.items() if k != "type"})
        self.embedding_model = embedding
        self.embedding = CachedEmbeddings(embedding, path=self.directory / "embeddings.sqlite",
                                          model_id=model_id) if cache else embedding
        self.lock = WriterLock(self.directory, timeout=lock_timeout)
        self.manifest = existing or Manifest(
            name=name, description=description, embedding=EmbeddingInfo(id=model_id),
            chunking=self.chunker.settings(), autocontext=self.autocontext.settings(),
            tagger=tagger.settings() if tagger is not None else None,
            store=StoreInfo(type=self.backend, collection=self._store_name))
        if existing is not None and description and description != existing.description:
            self.manifest.description = description
            self.manifest.save(self.manifest_path)
        self._records: RecordStore | None = None
        self._client = client
        #: the chunks live apart from the records (a Chroma server, another store): `sync` checks them
        self.remote_store = client is not None or store is not None

    @property
    def exists(self) -> bool:
        """Whether the knowledge base has been created (its manifest is on disk)."""
        return self.manifest_path.exists()

    def create(self) -> KnowledgeStore:
        """Create the knowledge base (empty) if it does not exist; returns itself. Writes do this on their own."""
        if not self.exists:
            with self.lock:
                if not self.exists:
                    self._check_store_is_new()
                    self.manifest.save(self.manifest_path)
        return self

    @property
    def _store_name(self) -> str:
        """The store the manifest records: the Chroma collection, or the backend's table or collection."""
        return getattr(self._chunks, "name", None) or store_name(self.name)

    def _check_store_is_new(self) -> None:
        """A new knowledge base must not search chunks it did not write (another one's, or lost records')."""
        if self._chunks is not None and (held := self._chunks.count()):
            raise StoreError(f"knowledge base {self.name!r} is new, but its {self.backend} store {self._store_name!r} "
                             f"already holds {held:,} chunk(s) it did not write: give it an empty one of its own")

    @property
    def records(self) -> RecordStore:
        """The document records (`RecordStore`), opened on first use; `StoreError` if never created."""
        if self._records is None:
            if not self.exists:
                raise missing_knowledge_base(self.name, self.directory)
            self._records = RecordStore(self.home / "records.sqlite")
        return self._records

    @property
    def backend(self) -> str:
        """Where the chunks are kept: "chroma", or the backend of the `store` given (e.g. "pgvector")."""
        return DEFAULT if self._chunks is None else self._chunks.backend

    @classmethod
    def open(cls, name: str, directory: str | Path = DEFAULT_DIRECTORY, **kwargs: Any) -> KnowledgeStore:
        """Open an existing knowledge base; `StoreError` listing the existing ones if it does not exist."""
        if not isinstance(name, str) or not _NAME.match(name) or \
                not (Path(directory) / "kb" / name / "manifest.json").exists():
            raise missing_knowledge_base(str(name), Path(directory))
        return cls(name, directory, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {str(self.directory)!r})"

    # ------------------------------------------------------------------ store
    @property
    def client(self) -> Any:
        """The client of the default store (a persistent Chroma client on `directory` unless one was given)."""
        return getattr(self.chunks, "client", None)

    @property
    def collection(self) -> Any:
        """The default store's collection (Chroma, cosine space), opened on first use (`StoreError` on another backend)."""
        found = getattr(self.chunks, "collection", None)
        if found is None:
            raise StoreError(f"knowledge base {self.name!r} keeps its chunks in {self.backend}, not in a Chroma "
                             "collection; use kb.chunks")
        return found

    @property
    def chunks(self) -> ChunkStore:
        """The store of the chunks (`rag.stores.chunk_store`): the default store in `directory`, or the `store` given."""
        if not self.exists:
            raise missing_knowledge_base(self.name, self.directory)
        if self._chunks is None:
            self._chunks = open_local(self.directory, self.manifest.store.collection, client=self._client,
                                      where=f"knowledge base {self.name!r}",
                                      marker=self.home / DAMAGED_MARKER)   # rag index repairs it
        return self._chunks

    def _stored_ids(self) -> list[str]:
        """The chunk ids the records list (every chunk a finished write stored)."""
        return [cid for rec in self.records.all().values() for cid in rec.chunk_ids]

    def count(self) -> int:
        """Number of chunks in the store."""
        return self.chunks.count()

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
                      progress: Callable[[str, int], None] | None = None,
                      follow_symlinks: bool = False, executor: Any = None) -> IndexReport:
        """Index files, folders or Documents; unchanged ones are skipped without embedding.

        Creates the knowledge base on first use.

        Args:
            sources: paths (files or folders) and/or Documents (grouped by `metadata["source"]`).
            include, exclude: globs for files under folders (see `load_directory`).
            cleanup: None keeps everything else; "incremental" deletes documents that were
                indexed from the given folders but are no longer there; "full" deletes every
                document not in `sources`.
            progress: called with (event, amount): "files_total", "file", "pages", "chunks", "embeddings".
            follow_symlinks: also index what symlinks under the folders lead to when that is
                outside them (by default such links are skipped and listed in `skipped`).
            executor: None / "local" (this process), "ray" or a `RayExecutor(...)` (docs/scale.md).

        Returns:
            What was added, updated, unchanged, deleted and skipped (with reasons).

        Raises:
            StoreError: another process is writing (after `lock_timeout`), or the store cannot
                be written (full disk, damaged files): the message names the cause and the fix.
        """
        if cleanup not in CLEANUP_MODES:
            raise ConfigError(f"cleanup must be one of {', '.join(map(repr, CLEANUP_MODES))}; got {cleanup!r}")
        runner = executor_from(executor)   # (a bad executor fails before the lock is taken)
        def run() -> IndexReport:
            with index_span("rag.index", knowledge_base=self.name, cleanup=cleanup or "none",
                            executor=runner.name) as span:
                report = sync(self, sources, include=include, exclude=exclude, cleanup=cleanup, progress=progress,
                              follow_symlinks=follow_symlinks, executor=runner)
                span.set_attributes({"rag.added": len(report.added), "rag.updated": len(report.updated),
                                     "rag.unchanged": len(report.unchanged), "rag.skipped": len(report.skipped),
                                     "rag.chunks_added": report.chunks_added, "rag.embedded": report.embedded})
                return report

        return self._write(run)

    def _write(self, run: Callable[[], Any]) -> Any:
        """Run a write under the lock, creating the knowledge base first; store failures become `StoreError`."""
        with self.lock:
            try:
                self.create()
                return run()
            except RagError:
                raise
            except (OSError, sqlite3.Error) as exc:
                raise store_write_error(exc, self.directory, f"cannot write knowledge base {self.name!r}") from exc
            except Exception as exc:
                if is_engine_error(exc):  # the store engine's errors on a full disk or damaged files
                    raise store_write_error(exc, self.directory,
                                            f"cannot write knowledge base {self.name!r}") from exc
                raise

    def update_document(self, source: str | Path, documents: Sequence[Document] | None = None) -> IndexReport:
        """Re-index one file now (or replace a source's content with `documents`)."""
        if documents is not None:
            docs = [Document(page_content=d.page_content, metadata={**d.metadata, "source": str(source)})
                    for d in documents]
            return self.add_documents(docs)
        return self._write(lambda: sync(self, [source], force=True))

    def delete_document(self, source: str | Path) -> int:
        """Delete a document (by path, source or doc_id) and its chunks; returns chunks deleted."""
        key = path_text(source)
        record = self.records.find(key) or self.records.find(path_text(Path(source).resolve()))
        if record is None:
            raise ConfigError(f"no document {key!r} in knowledge base {self.name!r}; "
                              "see list_documents() for what it holds")
        return self._write(lambda: self.delete_records([record]))

    def delete_records(self, records: Sequence[DocumentRecord]) -> int:
        """Delete documents' chunks and records (crash-safe: marked `deleting` first). Hold the lock."""
        if not records:
            return 0
        for rec in records:
            rec.state = "deleting"
        self.records.put_many(records)
        doc_ids = [r.doc_id for r in records]
        ids = self.chunks.get_ids({"doc_id": {"$in": doc_ids}})
        self.chunks.delete(ids)
        self.records.delete(*(r.source for r in records))
        return len(ids)

    # ------------------------------------------------------------------ reading
    def list_documents(self) -> list[DocumentRecord]:
        """Records of the documents it holds (source, doc_id, hash, chunk ids, title, summary)."""
        return [r for r in self.records.all().values() if r.state == "ok"]

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        """Chunks matching a portable filter (all when None), by document and position.

        The order depends on neither the store nor the write order (BM25 breaks ties by position);
        a knowledge base is a chunk source for `rag.indexing.neighbours`.

        Example:
            >>> kb.get_documents({"doc_id": "ab12", "chunk_index": {"$gte": 3, "$lt": 6}})   # doctest: +SKIP
        """
        return in_document_order(self.chunks.get_documents(filter))

    def neighbours(self, doc_id: str, chunk_index: int, *, window: int = 2) -> list[Document]:
        """Chunks `chunk_index - window .. chunk_index + window` of `doc_id`, in order (those that exist)."""
        return neighbours(self, doc_id, chunk_index, window=window)

    def get_chunks(self, doc_id: str) -> list[Document]:
        """All chunks of a document, in `chunk_index` order."""
        return self.get_documents({"doc_id": doc_id})   # (read in document order)

    def as_retriever(self, *, k: int = 4, filter: dict[str, Any] | None = None,
                     score_threshold: float | None = None) -> Any:
        """A `KnowledgeBaseRetriever` (takes `k` and portable `filter` per call)."""
        return KnowledgeBaseRetriever(chunks=self.chunks, embedding=self.embedding, k=k, filter=filter,
                                      score_threshold=score_threshold)

    def close(self) -> None:
        """Release file handles (the store stays on disk)."""
        if self._records is not None:
            self._records.close()
        if isinstance(self.embedding, CachedEmbeddings):
            self.embedding.close()
