"""`KnowledgeStore`: the storage and ingest side of a knowledge base (spRAG), the one write path.

A named, persistent, incrementally updated index of documents: load -> chunk -> AutoContext ->
embed -> write. Every front door that writes calls it: `rag.KnowledgeBase`
(`rag.compose.knowledge_base`: this class plus the retrievers and `Resource` of the floors above),
`Resource.from_directory` / `from_texts` / `from_documents`, `HybridRetriever.from_documents`,
`build_index`, the config kinds, `rag index` and the FinanceBench `default` row. It lives on the indexing floor because some of those doors cannot import
`rag.KnowledgeBase` without a circle: `HybridRetriever` is on the retrieval floor, and `Resource`'s
constructors are what `KnowledgeBase.as_resource` itself builds on.

It owns its parts: the manifest, the writer lock, the document records, the chunk store and the
components (`rag.indexing.kb_parts`). A write takes the lock and hands those parts (an
`IndexTarget`) to a `Syncer` (`rag.indexing.sync`), which decides what changed and runs an executor
(this process, or a Ray cluster: docs/scale.md). Nothing is written outside the writer lock:
constructing or reading a knowledge base writes no file. Layout, recovery and cleanup modes:
docs/indexing.md.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.documents import Document
    >>> import tempfile
    >>> kb = KnowledgeStore("notes", tempfile.mkdtemp(), embedding=DeterministicFakeEmbedding(size=16))
    >>> kb.add_documents([Document(page_content="Paris is in France.", metadata={"source": "geo"})]).added
    ['geo']
    >>> kb.add_documents([Document(page_content="Paris is in France.", metadata={"source": "geo"})]).unchanged
    ['geo']
"""

from __future__ import annotations

import atexit
import logging
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
from rag.indexing.ingest import Components
from rag.indexing.kb_parts import IndexTarget, check_name, is_name, resolve_parts
from rag.indexing.kb_retriever import KnowledgeBaseRetriever
from rag.indexing.limits import LoadLimits
from rag.indexing.loaders import path_text
from rag.indexing.locking import WriterLock
from rag.indexing.manifest import DEFAULT_DIRECTORY, Manifest, list_knowledge_bases, missing_knowledge_base
from rag.indexing.neighbours import in_document_order, neighbours
from rag.indexing.records import DocumentRecord, RecordStore
from rag.indexing.store_files import refuse_symlinks, store_write_error
from rag.indexing.sync import CLEANUP_MODES, IndexReport, Source, Syncer
from rag.stores.chunk_store import DAMAGED_MARKER, ChunkStore
from rag.stores.registry import DEFAULT, is_engine_error, open_local, require_chunks, store_name

__all__ = ["DEFAULT_DIRECTORY", "KnowledgeStore", "list_knowledge_bases"]

logger = logging.getLogger(__name__)


class KnowledgeStore:
    """A persistent knowledge base's documents: add, update, delete, read and dense search.

    User code uses `rag.KnowledgeBase` (this class plus its hybrid retriever and `Resource`); the front
    doors that cannot import it (see the module docstring) write through this class.

    Args:
        name: 1-63 characters of letters, digits, `.`, `_`, `-` (also the Chroma collection).
        directory: where it is stored (created by the first write); None keeps it in a private temporary
            directory removed when the process exits (`Resource.from_directory`, `build_index`).
        embedding: the embedding model; defaults to the one recorded in the manifest, or to
            `rag.models.embeddings.default_embeddings()` for a new knowledge base.
        chunker: defaults to `TokenChunker()` (200 MiniLM word pieces, 30 overlap);
            `PassthroughChunker()` stores already-chunked documents as they are.
        autocontext: defaults to `AutoContext()` (title / section + extractive summary);
            `AutoContext(enabled=False)` embeds chunks alone.
        tagger: optional, e.g. `KeywordTagger()` (tags in metadata, selectable by filters).
        description: what it holds (shown by resources); a new one for an existing one is saved by a write.
        cache: keep an on-disk embedding cache in the directory.
        lock_timeout: seconds a writer waits for another writer before `StoreError`.
        client: the chromadb client holding the collection (default: a persistent client on `directory`;
            `rag.stores.chroma.http_client(...)` for a server). Manifest, records and lock stay in `directory`.
        store: keep the chunks in another vector store, of a backend of `rag.stores.registry`
            (`rag.stores.pgvector.open_store(...)`, a `QdrantVectorStore`, ...); the manifest records its backend, and the knowledge base must be
            opened with a store of that backend again (docs/stores.md).

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
                 chunker: TokenChunker | PassthroughChunker | None = None, autocontext: AutoContext | None = None,
                 tagger: Any = None, description: str = "", cache: bool = True, lock_timeout: float = 0.0,
                 client: Any = None, store: Any = None) -> None:
        if client is not None and store is not None:
            raise ConfigError("give a Chroma client or another vector store (store=...), not both")
        self.name = check_name(name)
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
        parts = resolve_parts(name, self.directory, existing, embedding=embedding, chunker=chunker,
                              autocontext=autocontext, tagger=tagger, description=description,
                              backend=self.backend, store_name=self._store_name)
        self.manifest = parts.manifest
        self.chunker, self.tagger, self.autocontext = (parts.components.chunker, parts.components.tagger,
                                                       parts.components.autocontext)
        self._save_manifest = parts.description_changed   # by the next write, under the lock
        self.embedding_model = parts.embedding_model
        self.embedding = CachedEmbeddings(parts.embedding_model, path=self.directory / "embeddings.sqlite",
                                          model_id=parts.model_id) if cache else parts.embedding_model
        self.lock = WriterLock(self.directory, timeout=lock_timeout)
        self._records: RecordStore | None = None
        self._client = client
        #: the chunks live apart from the records (a Chroma server, another store): a sync checks them
        self.remote_store = client is not None or store is not None

    @property
    def exists(self) -> bool:
        """Whether the knowledge base has been created (its manifest is on disk)."""
        return self.manifest_path.exists()

    def create(self) -> KnowledgeStore:
        """Create the knowledge base (empty) if it does not exist; returns itself. Writes do this on their own.

        Under the writer lock, as every write (a changed description given to an existing one is saved here).
        """
        if self.exists and not self._save_manifest:
            return self
        with self.lock:
            if not self.exists:
                self._check_store_is_new()
                self.manifest.save(self.manifest_path)
            elif self._save_manifest:
                self.manifest.save(self.manifest_path)
            self._save_manifest = False
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
        if not is_name(name) or not (Path(directory) / "kb" / name / "manifest.json").exists():
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

    # ------------------------------------------------------------------ writing
    def add_documents(self, sources: Source | Sequence[Source], *, include: str | Sequence[str] = "**/*",
                      exclude: str | Sequence[str] = (), cleanup: str | None = None,
                      progress: Callable[[str, int], None] | None = None,
                      follow_symlinks: bool = False, executor: Any = None,
                      limits: LoadLimits | dict[str, Any] | None = None) -> IndexReport:
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
            limits: what reading one file may cost (`LoadLimits`, or a mapping of its fields: tables, OCR,
                seconds and sizes; None: the defaults). What hits one is in the report's `notes`; files
                whose reading other settings change (PDFs, images) are read again (docs/indexing.md).

        Returns:
            What was added, updated, unchanged, deleted and skipped (with reasons).

        Raises:
            StoreError: another process is writing (after `lock_timeout`), or the store cannot be written
                (full disk, damaged files): the message names the cause and the fix.
        """
        if cleanup not in CLEANUP_MODES:
            raise ConfigError(f"cleanup must be one of {', '.join(map(repr, CLEANUP_MODES))}; got {cleanup!r}")
        runner = executor_from(executor)   # (a bad executor or limit fails before the lock is taken)
        load_limits = LoadLimits.of(limits)

        def run(syncer: Syncer) -> IndexReport:
            syncer.target.components.limits = load_limits
            with index_span("rag.index", knowledge_base=self.name, cleanup=cleanup or "none",
                            executor=runner.name) as span:
                report = syncer.sync(sources, include=include, exclude=exclude, cleanup=cleanup, progress=progress,
                                     follow_symlinks=follow_symlinks, executor=runner)
                span.set_attributes({"rag.added": len(report.added), "rag.updated": len(report.updated),
                                     "rag.unchanged": len(report.unchanged), "rag.skipped": len(report.skipped),
                                     "rag.chunks_added": report.chunks_added, "rag.embedded": report.embedded})
                return report

        return self._write(run)

    def _target(self) -> IndexTarget:
        """The parts a write uses, handed to the syncer (the records and chunk store open on first use)."""
        return IndexTarget(name=self.name, home=self.home, records=self.records, open_chunks=lambda: self.chunks,
                           embedding=self.embedding, embedding_model=self.embedding_model,
                           components=Components(self.chunker, self.tagger, self.autocontext),
                           manifest=self.manifest, manifest_path=self.manifest_path, backend=self.backend,
                           remote=self.remote_store)

    def _write(self, run: Callable[[Syncer], Any]) -> Any:
        """Run a write under the lock, creating the knowledge base first; store failures become `StoreError`."""
        with self.lock:
            try:
                self.create()
                return run(Syncer(self._target()))
            except RagError:
                raise
            except (OSError, sqlite3.Error) as exc:
                raise store_write_error(exc, self.directory, f"cannot write knowledge base {self.name!r}") from exc
            except Exception as exc:
                if is_engine_error(exc):  # the store engine's errors on a full disk or damaged files
                    raise store_write_error(exc, self.directory,
                                            f"cannot write knowledge base {self.name!r}") from exc
                raise

    def update_document(self, source: str | Path, documents: Sequence[Document] | None = None, *,
                        limits: LoadLimits | dict[str, Any] | None = None) -> IndexReport:
        """Re-index one file now, within `limits` (see `add_documents`), or replace a source's content with
        `documents`."""
        if documents is not None:
            docs = [Document(page_content=d.page_content, metadata={**d.metadata, "source": str(source)})
                    for d in documents]
            return self.add_documents(docs)
        load_limits = LoadLimits.of(limits)

        def run(syncer: Syncer) -> IndexReport:
            syncer.target.components.limits = load_limits
            return syncer.sync([source], force=True)

        return self._write(run)

    def delete_document(self, source: str | Path) -> int:
        """Delete a document (by path, source or doc_id) and its chunks; returns chunks deleted."""
        key = path_text(source)
        record = self.records.find(key) or self.records.find(path_text(Path(source).resolve()))
        if record is None:
            raise ConfigError(f"no document {key!r} in knowledge base {self.name!r}; "
                              "see list_documents() for what it holds")
        return self._write(lambda syncer: syncer.target.delete_records([record]))

    # ------------------------------------------------------------------ reading
    def list_documents(self) -> list[DocumentRecord]:
        """Records of the documents it holds (source, doc_id, hash, chunk ids, title, summary)."""
        return [r for r in self.records.all().values() if r.state == "ok"]

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        """Chunks matching a portable filter (all when None), by document and position.

        The order depends on neither the store nor the write order (BM25 breaks ties by position).

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
        """A `KnowledgeBaseRetriever`: dense search (takes `k` and portable `filter` per call)."""
        return KnowledgeBaseRetriever(chunks=self.chunks, embedding=self.embedding, k=k, filter=filter,
                                      score_threshold=score_threshold)

    def close(self) -> None:
        """Release file handles (the store stays on disk)."""
        if self._records is not None:
            self._records.close()
        if isinstance(self.embedding, CachedEmbeddings):
            self.embedding.close()
