"""A knowledge base's name and settings: checked, and reconciled with its manifest (nothing written).

- `check_name` / `is_name` / `knowledge_base_name`: what a knowledge base may be called;
- `resolve_parts`: the embedding model, chunker, AutoContext and tagger a knowledge base is opened
  with, from the arguments given and the manifest on disk (settings that differ from it are a
  `ConfigError`). `rag.indexing.kb_parts.IndexTarget` opens its parts with it.

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
from rag.indexing.manifest import (
    EmbeddingInfo,
    Manifest,
    StoreInfo,
    autocontext_kwargs,
    chunker_from,
    embedding_from_id,
    recorded_precision,
)
from rag.indexing.tags import KeywordTagger
from rag.models.embeddings import default_embeddings, embedding_id
from rag.stores.registry import store_name

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
                  store_name: str) -> Parts:
    """The parts of knowledge base `name` from the arguments given and its manifest (`existing`, if any).

    Raises:
        ConfigError: settings that differ from the manifest (another embedding model, chunk size or
            AutoContext setting), or no `chunker` for one built with a chunker rag cannot make by itself.
    """
    if embedding is None:
        embedding = embedding_from_id(existing.embedding.id) if existing else default_embeddings()
    elif existing:
        embedding = recorded_precision(embedding, existing.embedding.id)
    model_id = embedding_id(embedding)
    if existing:
        existing.check_embedding(name, directory, model_id)
    if chunker is None and existing and existing.chunking.get("type", "token") not in ("token", "passthrough"):
        raise ConfigError(f"knowledge base {name!r} was built with the chunker {existing.chunking['type']!r} "
                          f"(settings {existing.chunking}), which rag cannot create by itself; pass "
                          "chunker=<that chunker> when opening it")
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
