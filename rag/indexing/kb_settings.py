"""A knowledge base's name and settings: checked, and reconciled with its manifest (nothing written).

- `check_name` / `is_name` / `knowledge_base_name`: what a knowledge base may be called;
- `resolve_parts`: the embedding model, chunker, AutoContext and tagger a knowledge base is opened
  with, from the arguments given and the manifest on disk (`Manifest.reopen` checks them against it:
  settings that differ from it are a `ConfigError`), or the defaults and a new manifest.
  `rag.indexing.kb_parts.IndexTarget` opens its parts with it.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from pathlib import Path
    >>> parts = resolve_parts("notes", Path("."), None, embedding=DeterministicFakeEmbedding(size=8), chunker=None,
    ...                       autocontext=None, tagger=None, description="", backend="chroma", store_name="notes")
    >>> parts.existing, parts.manifest.chunking["type"]
    (False, 'token')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from rag.base.errors import ConfigError
from rag.indexing.autocontext import AutoContext
from rag.indexing.chunking import TokenChunker
from rag.indexing.ingest import Components
from rag.indexing.manifest import EmbeddingInfo, Manifest, StoreInfo
from rag.models.embeddings import default_embeddings, embedding_id
from rag.stores.registry import DEFAULT, store_name

__all__ = ["Parts", "check_name", "is_name", "knowledge_base_name", "resolve_parts"]

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
                  store_name: str, given: bool = False) -> Parts:
    """The parts of knowledge base `name` from the arguments given and its manifest (`existing`, if any).

    `backend` and `store_name`: the store it is opened with, and `given`: whether that store was given to it
    (else its directory's own Chroma store); an existing manifest must name them, a new one records them.

    Raises:
        StoreError: the manifest names another knowledge base or store.
        ConfigError: settings that differ from the manifest (another backend, embedding model, chunk size or
            AutoContext setting), or no `chunker` for one built with a chunker rag cannot make by itself.
    """
    if existing is not None:
        parts = existing.reopen(name, directory, backend=backend, collection=store_name, embedding=embedding,
                                chunker=chunker, autocontext=autocontext, tagger=tagger, given=given)
        changed = bool(description) and description != existing.description
        if changed:
            existing.description = description
        return Parts(existing, True, parts.embedding, parts.model_id,
                     Components(parts.chunker, parts.tagger, parts.autocontext), description_changed=changed)
    embedding = default_embeddings() if embedding is None else embedding
    model_id = embedding_id(embedding)
    chunker = chunker or TokenChunker()
    autocontext = autocontext or AutoContext()
    manifest = Manifest(
        name=name, description=description, embedding=EmbeddingInfo(id=model_id),
        chunking=chunker.settings(), autocontext=autocontext.settings(),
        tagger=tagger.settings() if tagger is not None else None,
        store=StoreInfo(type=backend, collection=store_name, given=given and backend == DEFAULT))
    return Parts(manifest, False, embedding, model_id, Components(chunker, tagger, autocontext))
