"""The parts of a knowledge base (`rag.indexing.knowledge_base`) and how they are opened.

- `check_name` and `resolve_parts`: the settings a knowledge base is opened with, reconciled with
  its manifest (the embedding model, chunker, AutoContext, tagger); reading the manifest writes nothing;
- `IndexTarget`: what a sync writes to, handed over explicitly by the knowledge base that owns it.

A `rag.KnowledgeBase` owns its parts (the manifest, the writer lock, the document records, the chunk
store, the embedding model and the components that turn pages into chunks); for a write it opens them
and hands them to a `rag.indexing.sync.Syncer` as one `IndexTarget`. The syncer, the plan, the
executors and the moves see only these parts, never the knowledge base object, so the indexing modules
import nothing above them and nothing of each other in a circle.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from rag.indexing.autocontext import AutoContext
    >>> from rag.indexing.chunking import PassthroughChunker
    >>> from rag.indexing.manifest import EmbeddingInfo, Manifest, StoreInfo
    >>> from rag.indexing.records import RecordStore
    >>> home = Path(tempfile.mkdtemp())
    >>> target = IndexTarget(name="notes", home=home, records=RecordStore(":memory:"), open_chunks=lambda: None,
    ...                      embedding=DeterministicFakeEmbedding(size=8),
    ...                      embedding_model=DeterministicFakeEmbedding(size=8),
    ...                      components=Components(PassthroughChunker(), None, AutoContext(enabled=False)),
    ...                      manifest=Manifest(name="notes", embedding=EmbeddingInfo(id="fake"),
    ...                                        store=StoreInfo(collection="notes")),
    ...                      manifest_path=home / "manifest.json")
    >>> target.record_dimension(8)
    >>> target.manifest.embedding.dimension
    8
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from rag.base.errors import ConfigError
from rag.indexing.autocontext import AutoContext
from rag.indexing.chunking import TokenChunker
from rag.indexing.ingest import Components
from rag.indexing.manifest import (
    EmbeddingInfo,
    Manifest,
    StoreInfo,
    autocontext_kwargs,
    chunker_from,
    embedding_from_id,
)
from rag.indexing.records import DocumentRecord, RecordStore
from rag.indexing.tags import KeywordTagger
from rag.models.embeddings import default_embeddings, embedding_id
from rag.stores.registry import DEFAULT, store_name

__all__ = ["IndexTarget", "Parts", "check_name", "is_name", "knowledge_base_name", "resolve_parts"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def is_name(name: object) -> bool:
    """Whether `name` is a valid knowledge base name (1-63 letters, digits, `.`, `_`, `-`)."""
    return isinstance(name, str) and bool(_NAME.match(name))


def knowledge_base_name(text: str) -> str:
    """A valid knowledge base name for a collection or resource name (as `Resource.from_directory` names them).

    Example:
        >>> knowledge_base_name("my docs"), knowledge_base_name("x")
        ('my-docs', 'rag-x')
    """
    return store_name(text)[:63]


def check_name(name: object) -> str:
    """`name` when it is a valid knowledge base name, else `ConfigError` saying what is valid."""
    if not is_name(name):
        raise ConfigError(f"knowledge base name {name!r} is not valid: use 1-63 letters, digits, '.', '_' "
                          "or '-', starting with a letter or digit")
    return str(name)


@dataclass
class Parts:
    """What a knowledge base is opened with, reconciled with its manifest (nothing written).

    Attributes:
        manifest: the one on disk, or the one the first write will save.
        existing: whether the manifest was read from disk.
        embedding_model: the model given, or the one the manifest records, or the default.
        model_id: its id (`rag.models.embeddings.embedding_id`).
        components: the chunker, tagger and AutoContext given, or those the manifest records.
        description_changed: a description was given that differs from the manifest's: the next
            write saves it (under the writer lock).
    """

    manifest: Manifest
    existing: bool
    embedding_model: Embeddings
    model_id: str
    components: Components
    description_changed: bool = False


def resolve_parts(name: str, directory: Path, existing: Manifest | None, *, embedding: Embeddings | None,
                  chunker: Any, autocontext: AutoContext | None, tagger: Any, description: str, backend: str,
                  store_name: str) -> Parts:
    """The parts of knowledge base `name` from the arguments given and its manifest (`existing`, if any).

    Raises:
        ConfigError: settings that differ from the manifest (another embedding model, chunk size or
            AutoContext setting).
    """
    if embedding is None:
        embedding = embedding_from_id(existing.embedding.id) if existing else default_embeddings()
    model_id = embedding_id(embedding)
    if existing:
        existing.check_embedding(name, directory, model_id)
    chunker = chunker or (chunker_from(existing.chunking) if existing else TokenChunker())
    autocontext = autocontext or (AutoContext(**autocontext_kwargs(existing.autocontext)) if existing
                                  else AutoContext())
    if existing:
        existing.check_same(name, "chunking", chunker.settings())
        existing.check_same(name, "autocontext", autocontext.settings())
        if tagger is None and existing.tagger:
            tagger = KeywordTagger(**{k: v for k, v in existing.tagger.items() if k != "type"})
    manifest = existing or Manifest(
        name=name, description=description, embedding=EmbeddingInfo(id=model_id),
        chunking=chunker.settings(), autocontext=autocontext.settings(),
        tagger=tagger.settings() if tagger is not None else None,
        store=StoreInfo(type=backend, collection=store_name))
    changed = existing is not None and bool(description) and description != existing.description
    if changed:
        manifest.description = description
    return Parts(manifest, existing is not None, embedding, model_id, Components(chunker, tagger, autocontext),
                 description_changed=changed)


@dataclass
class IndexTarget:
    """The parts of a knowledge base a write uses (the caller holds the knowledge base's writer lock).

    Attributes:
        name: the knowledge base's name (for messages).
        home: its folder (`<directory>/kb/<name>`), where the damaged-store marker lives.
        records: its document records.
        open_chunks: returns its chunk store (`rag.stores.chunk_store.ChunkStore`), opened on first use: a
            write that changes nothing never opens Chroma (it would double the time of a no-op).
        embedding: the embedding used for writes (the cached one when the knowledge base caches).
        embedding_model: the model itself (Ray workers load their own copy of it).
        components: the chunker, tagger and AutoContext.
        manifest, manifest_path: the manifest, saved when the first write learns the dimension.
        backend: where the chunks are kept (the default backend, or the `store=` given's).
        remote: the chunks live apart from the records (a Chroma server, another store).
    """

    name: str
    home: Path
    records: RecordStore
    open_chunks: Callable[[], Any]
    embedding: Any
    embedding_model: Any
    components: Components
    manifest: Manifest
    manifest_path: Path
    backend: str = DEFAULT
    remote: bool = False

    @property
    def chunks(self) -> Any:
        """The chunk store (the knowledge base opens it once and keeps it)."""
        return self.open_chunks()

    def record_dimension(self, dimension: int) -> None:
        """Record the embedding dimension on first write; a mismatch is a `ConfigError`."""
        known = self.manifest.embedding.dimension
        if known is None:
            self.manifest.embedding.dimension = dimension
            self.manifest.save(self.manifest_path)
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

