"""`IndexTarget`: a knowledge base's storage, the parts every write goes to.

A `rag.KnowledgeBase` owns two collaborators on this floor: its `IndexTarget` (this module: the
manifest, the writer lock, the document records, the chunk store, the embedding model and the
components that turn pages into chunks) and a `rag.indexing.sync.Syncer` over it. A write goes
through the library's one write path, `rag.indexing.write_path` (take the lock, create the
knowledge base if needed, run the syncer). The syncer, the plan, the executors and the moves see
only these parts, never the knowledge base object, so the indexing modules import nothing above
them and nothing of each other in a circle; and the front doors below the composition floor
(`HybridRetriever.from_documents`, `Resource`'s persisting constructors, `rag index`) open an
`IndexTarget` and write through the same path.

Opening one writes nothing: the records and the chunk store are opened on first use, and a new
knowledge base is created (its manifest saved) by the first write, under the writer lock.

Example:
    >>> import tempfile
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> target = IndexTarget("notes", tempfile.mkdtemp(), embedding=DeterministicFakeEmbedding(size=8))
    >>> target.exists, target.home.exists()
    (False, False)
    >>> target.create().exists
    True
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from rag.base.errors import ConfigError, StoreError
from rag.indexing.autocontext import AutoContext
from rag.indexing.embedding_cache import CachedEmbeddings
from rag.indexing.formats import Chunker
from rag.indexing.kb_collections import recorded_collection, separate, shared_error, sharers
from rag.indexing.kb_server import ServerWriterLock, migrate_to_server, server_manifest, server_records
from rag.indexing.kb_settings import check_name, resolve_parts
from rag.indexing.locking import WriterLock
from rag.indexing.manifest import DEFAULT_DIRECTORY, Manifest, missing_knowledge_base
from rag.indexing.neighbours import in_document_order
from rag.indexing.records import DocumentRecord, RecordStore
from rag.indexing.store_files import refuse_symlinks
from rag.stores.chunk_store import DAMAGED_MARKER, ChunkStore
from rag.stores.fts_index import FTSIndex
from rag.stores.lexical_chunks import LexicalChunks, lexical_beside, with_engine_lexical
from rag.stores.kb_side import kb_tables
from rag.stores.registry import DEFAULT, knowledge_base_store, open_local, reaches_server, require_chunks

__all__ = ["LEXICAL_FILE", "IndexTarget", "KnowledgeBaseView"]

#: the embedded default's lexical index (SQLite FTS5), in the knowledge base's folder
LEXICAL_FILE = "lexical.sqlite"


class KnowledgeBaseView(Protocol):
    """What the search side reads of a knowledge base (`rag.retrieval.kb_search`, the BM25 cache).

    An `IndexTarget` is one, and so is the `rag.KnowledgeBase` owning it.
    """

    name: str
    home: Path

    @property
    def exists(self) -> bool: ...

    @property
    def chunks(self) -> ChunkStore: ...

    @property
    def embedding(self) -> Embeddings: ...

    def list_documents(self) -> list[DocumentRecord]: ...

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]: ...

    @property
    def lock(self) -> WriterLock: ...

    @property
    def tables(self) -> Any: ...


class IndexTarget:
    """A knowledge base's storage: manifest, writer lock, records, chunk store, embedding and components.

    Args:
        name: 1-63 characters of letters, digits, `.`, `_`, `-` (its Chroma collection: the name, or a name
            derived from it when Chroma would change it: `rag.stores.chroma.knowledge_base_collection`).
        directory: where it is stored (created by the first write); None keeps it in a private temporary
            directory removed when the process exits.
        embedding: the embedding model; defaults to the one recorded in the manifest, or to
            `rag.models.embeddings.default_embeddings()` for a new knowledge base.
        chunker: defaults to `TokenChunker()`; `PassthroughChunker()` stores documents as given; any
            `rag.indexing.formats.Chunker`.
        autocontext: defaults to `AutoContext()`; `AutoContext(enabled=False)` embeds chunks alone.
        tagger: optional, e.g. `KeywordTagger()`.
        description: what it holds; a new one for an existing knowledge base is saved by the next write.
        cache: keep an on-disk embedding cache in the directory.
        lock_timeout: seconds a writer waits for another writer before `StoreError`.
        client: the chromadb client holding the collection (default: a persistent client on `directory`).
        store: keep the chunks in another vector store, of a backend of `rag.stores.registry`.

    Raises:
        ConfigError: bad name, or settings that differ from the manifest.
        StoreError: the manifest is damaged, names another knowledge base, or store files are symlinks.
    """

    def __init__(self, name: str, directory: str | Path | None = DEFAULT_DIRECTORY, *,
                 embedding: Embeddings | None = None,
                 chunker: Chunker | None = None, autocontext: AutoContext | None = None,
                 tagger: Any = None, description: str = "", cache: bool = True, lock_timeout: float = 0.0,
                 client: Any = None, store: Any = None) -> None:
        if client is not None and store is not None:
            raise ConfigError("give a Chroma client or another vector store (store=...), not both")
        self.name = check_name(name)
        self._chunks: ChunkStore | None = None
        self._given_store = store is not None   # (else its chunks are in the default backend's collection)
        #: where its manifest, records and writer lock live beside its chunks (`rag.stores.kb_side.kb_tables`:
        #: pgvector's tables, a Qdrant or Milvus side collection), or None (in its folder)
        self.tables = None
        if store is not None:
            self._chunks = with_engine_lexical(require_chunks(store, all_ids=self._stored_ids,
                                                              dimension=lambda: self.manifest.embedding.dimension))
            self.tables = kb_tables(self._chunks)
        if directory is None:  # in memory: a private temporary directory, removed when the process exits
            directory = tempfile.mkdtemp(prefix=f"rag-kb-{name}-")  # (retrievers over it outlive this object)
            atexit.register(shutil.rmtree, directory, True)
            cache = False
        self.directory = Path(directory)
        self.home = self.directory / "kb" / name
        self.manifest_path = self.home / "manifest.json"
        refuse_symlinks([self.directory / "kb", self.home, self.manifest_path])
        if self._chunks is not None:   # (Qdrant, Milvus, LanceDB made elsewhere: FTS5 beside the records)
            self._chunks = lexical_beside(self._chunks, self.home / LEXICAL_FILE)
        existing = server_manifest(self.tables) if self.tables is not None else None
        if existing is not None and existing.name != self.name:
            raise StoreError(f"{self.tables.where} holds the knowledge base {existing.name!r}, not {self.name!r}: "
                             f"open it by that name, or give {self.name!r} an empty table of its own")
        self._in_server = existing is not None   # (the server's manifest wins over the folder's copy)
        if existing is None and self.manifest_path.exists():
            existing = Manifest.load(self.manifest_path)
        own = self._store_name if existing is None or self._chunks is not None else \
            recorded_collection(self.name, existing.store.collection)   # (an older rag's name is kept)
        # one pass through the manifest: its owner, embedding model and components checked (Manifest.reopen)
        parts = resolve_parts(name, self.directory, existing, embedding=embedding, chunker=chunker,
                              autocontext=autocontext, tagger=tagger, description=description,
                              backend=self.backend, store_name=own,
                              given=self._given_store or _server_given(client, existing))
        self.manifest = parts.manifest
        #: the chunker, tagger and AutoContext (`rag.indexing.ingest.Components`)
        self.components = parts.components
        self._save_manifest = parts.description_changed   # by the next write, under the lock
        #: the model itself (Ray workers load their own copy of it)
        self.embedding_model = parts.embedding_model
        #: the embedding used for writes and dense search (the cached one when the knowledge base caches)
        self.embedding = CachedEmbeddings(parts.embedding_model, path=self.directory / "embeddings.sqlite",
                                          model_id=parts.model_id) if cache else parts.embedding_model
        self.lock = (WriterLock(self.directory, timeout=lock_timeout) if self.tables is None else
                     ServerWriterLock(self.directory, self.tables, timeout=lock_timeout))
        self._records: RecordStore | None = None
        self._client = client
        #: the chunks live apart from the records (a Chroma server, another store): a sync checks them
        self.remote = client is not None or store is not None

    @property
    def exists(self) -> bool:
        """Whether the knowledge base has been created (its manifest is in the server, or on disk)."""
        return self._in_server or self.manifest_path.exists()

    def _save(self) -> None:
        """Save the manifest: in the folder, and in the server when it has one (`rag.indexing.kb_server`)."""
        self.manifest.save(self.manifest_path)
        if self.tables is not None:
            self.tables.save_manifest(self.manifest.model_dump_json())
            self._in_server = True

    def create(self) -> IndexTarget:
        """Create the knowledge base (empty) if it does not exist, under the writer lock; returns itself.

        A changed description given to an existing one is saved here.
        """
        if self.exists and not self._save_manifest:
            return self
        with self.lock:
            if not self.exists and self.tables is not None and (found := server_manifest(self.tables)) is not None:
                self._adopt(found)   # created by another process since this one opened it
            if not self.exists:
                self._check_store_is_new()
                self._save()
            elif self._save_manifest:
                self._save()
            self._save_manifest = False
        return self

    def _adopt(self, found: Manifest) -> None:
        """Take the manifest another process saved in the server, checked against this one's settings
        (`ConfigError` if they differ: another embedding model, chunker or AutoContext)."""
        parts = resolve_parts(self.name, self.directory, found, embedding=self.embedding_model,
                              chunker=self.components.chunker, autocontext=self.components.autocontext,
                              tagger=self.components.tagger, description="", backend=self.backend,
                              store_name=self._store_name)
        self.manifest, self.components, self._in_server = parts.manifest, parts.components, True

    @property
    def _store_name(self) -> str:
        """The store the manifest records: the Chroma collection, or the backend's table or collection."""
        return getattr(self._chunks, "name", None) or knowledge_base_store(self.name)

    def _check_store_is_new(self) -> None:
        """A new knowledge base must not search chunks it did not write (another one's, or lost records')."""
        if self._chunks is not None and (held := self._chunks.count()):
            earlier = "" if self.tables is None else (
                f"; if an earlier version of rag indexed it, open it once from the folder it was indexed from (its "
                f"manifest and records then move into {self.tables.where}, and any folder opens it)")
            raise StoreError(f"knowledge base {self.name!r} is new, but its {self.backend} store {self._store_name!r} "
                             f"already holds {held:,} chunk(s) it did not write: give it an empty one of its own"
                             f"{earlier}")

    @property
    def records(self) -> RecordStore:
        """The document records (`RecordStore`), opened on first use; `StoreError` if never created."""
        if self._records is None:
            if not self.exists:
                raise missing_knowledge_base(self.name, self.directory)
            if self.tables is None:
                self._records = RecordStore(self.home / "records.sqlite")
                return self._records
            if not self._in_server:   # indexed into its engine by an earlier version: copied into it once
                with self.lock:
                    migrate_to_server(self.name, self.tables, self.manifest, self.home / "records.sqlite")
                self._in_server = True
            self._records = server_records(self.tables)
        return self._records

    @property
    def backend(self) -> str:
        """Where the chunks are kept: the default backend, or the backend of the `store` given (e.g. "pgvector")."""
        return DEFAULT if self._chunks is None else self._chunks.backend

    @property
    def chunks(self) -> ChunkStore:
        """The store of the chunks (`rag.stores.chunk_store`), opened on first use: a write that changes
        nothing never opens Chroma (it would double the time of a no-op).

        The default store writes its lexical index (SQLite FTS5, `LEXICAL_FILE`) with the chunks
        (`rag.stores.lexical_chunks`); `rag.indexing.lexical_sync` opens it for search."""
        if not self.exists:
            raise missing_knowledge_base(self.name, self.directory)
        if self._chunks is None:
            collection = self.manifest.store.collection
            if others := sharers(self.directory, self.name, collection):
                raise shared_error(self.name, self.directory, collection, others)
            store = open_local(self.directory, self.manifest.store.collection, client=self._client,
                               where=f"knowledge base {self.name!r}",
                               marker=self.home / DAMAGED_MARKER)   # rag index repairs it
            self._chunks = LexicalChunks(store, FTSIndex(self.home / LEXICAL_FILE))
        return self._chunks

    def separate(self) -> None:
        """Move it, and every knowledge base sharing its Chroma collection, into collections of their own
        (`rag.indexing.kb_collections`; a write runs this first, under the writer lock)."""
        if not self._given_store and separate(
                self.directory, self.name, self.manifest, lambda _: self._save(), client=self._client):
            if isinstance(self._chunks, LexicalChunks):
                self._chunks.inner.close()
            self._chunks = None   # (reopened on its own collection)

    def _stored_ids(self) -> list[str]:
        """The chunk ids the records list (every chunk a finished write stored)."""
        return [cid for rec in self.records.all().values() for cid in rec.chunk_ids]

    def list_documents(self) -> list[DocumentRecord]:
        """Records of the documents it holds (source, doc_id, hash, chunk ids, title, summary)."""
        return [r for r in self.records.all().values() if r.state == "ok"]

    def get_documents(self, filter: dict[str, Any] | None = None) -> list[Document]:
        """Chunks matching a portable filter (all when None), by source, document and position."""
        return in_document_order(self.chunks.get_documents(filter))

    # ------------------------------------------------------------------ used by a write (lock held)
    def record_dimension(self, dimension: int) -> None:
        """Record the embedding dimension on first write; a mismatch is a `ConfigError`."""
        known = self.manifest.embedding.dimension
        if known is None:
            self.manifest.embedding.dimension = dimension
            self._save()
        elif known != dimension:
            raise ConfigError(f"knowledge base {self.name!r} holds {known}-d vectors; the embedding model gave "
                              f"{dimension}-d ones")

    def delete_records(self, records: Sequence[DocumentRecord]) -> int:
        """Delete documents' chunks and records (crash-safe: marked `deleting` first); returns chunks deleted."""
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

    def close(self) -> None:
        """Release file handles (the store stays on disk)."""
        if self._records is not None:
            self._records.close()
            self._records = None   # (reopened on next use)
        if isinstance(self._chunks, LexicalChunks):
            self._chunks.lexical.close()
            if not self._given_store:   # the Chroma client it opened (reopened on next use)
                self._chunks.inner.close()
                self._chunks = None
        if isinstance(self.embedding, CachedEmbeddings):
            self.embedding.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {str(self.directory)!r})"


def _server_given(client: Any, existing: Manifest | None) -> bool:
    """Whether a knowledge base opened on `client` is in a store given to it: a server's client (`kind:
    chroma_server`) is, and is recorded so, since opened without it the knowledge base would read its directory's
    own collection of the same name (none, or another). One built on a server before rag recorded this opens with
    its server as it did (its manifest is not upgraded: it could have been built in its directory)."""
    return client is not None and reaches_server(client) and (existing is None or existing.store.given)
