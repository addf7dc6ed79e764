"""The manifest of a knowledge base: its components' settings as JSON data (never pickle).

`<directory>/kb/<name>/manifest.json` records the embedding model id and dimension, the
chunking, AutoContext and tagging settings and the store, so a knowledge base reopens with
the same components, and reopening it with another embedding model is an error instead of
silently mixing vector spaces.

A manifest is data from the store directory, not trusted: a damaged one, one that is a symlink,
one naming an embedding dimension past `MAX_DIMENSION` (a fake embedding of ten billion
dimensions would allocate 74.5 GiB per vector) or another knowledge base's collection is a
`StoreError` saying what is wrong and how to fix it.

Example:
    >>> m = Manifest(name="docs", embedding=EmbeddingInfo(id="DeterministicFakeEmbedding(size=8)"),
    ...              store=StoreInfo(collection="docs"))
    >>> m.model_dump()["store"]
    {'type': 'chroma', 'collection': 'docs', 'space': 'cosine'}
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any, NamedTuple

from langchain_core.embeddings import Embeddings
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_serializer, model_validator

from rag.base.errors import ConfigError, StoreError
from rag.indexing.autocontext import AutoContext
from rag.indexing.chunking import PassthroughChunker, TokenChunker
from rag.indexing.store_files import refuse_symlinks, write_atomic
from rag.indexing.tags import KeywordTagger
from rag.indexing.tokens import ApproximateTokenizer
from rag.models.embeddings import (
    DEFAULT_EMBEDDING_ID,
    PRECISION_CHOICES,
    MiniLMEmbeddings,
    _openai_embeddings,
    default_embeddings,
    embedding_choice,
    embedding_id,
    minilm_precision,
)
from rag.stores.registry import DEFAULT, knowledge_base_stores

__all__ = ["DEFAULT_DIRECTORY", "MANIFEST_VERSION", "MAX_DIMENSION", "STORE_TYPES", "list_knowledge_bases", "missing_knowledge_base", "EmbeddingInfo", "Manifest", "Reopened", "StoreInfo", "autocontext_kwargs", "chunker_from",
           "embedding_from_id", "recorded_precision"]

logger = logging.getLogger(__name__)

#: the newest manifest format this rag reads; a manifest records the oldest format that holds what it says
#: (version 2 only for `StoreInfo.given`), so every other knowledge base stays readable by a rag reading version 1
MANIFEST_VERSION = 2
MAX_DIMENSION = 65_536  # embedding models in use have at most a few thousand dimensions
_FAKE = re.compile(r"DeterministicFakeEmbedding\(size=(\d+)\)")


class EmbeddingInfo(BaseModel):
    """The embedding model: its id (see `rag.models.embeddings.embedding_id`) and dimension."""

    model_config = ConfigDict(extra="forbid")
    id: str
    dimension: int | None = Field(default=None, ge=1, le=MAX_DIMENSION)

    @field_validator("id")
    @classmethod
    def _bounded_fake(cls, value: str) -> str:
        if (match := _FAKE.fullmatch(value)) and not 1 <= int(match.group(1)) <= MAX_DIMENSION:
            raise ValueError(f"{value} has {int(match.group(1)):,} dimensions; at most {MAX_DIMENSION:,} are "
                             "accepted")
        return value


#: where knowledge bases are kept unless a directory is given
DEFAULT_DIRECTORY = ".rag"
#: where a knowledge base can keep its chunks (the backends of `rag.stores.registry`, and `PartitionedChroma`)
STORE_TYPES = knowledge_base_stores()
#: the settings of a part that must match the manifest when a knowledge base is reopened
_COMPARED = {"chunking": ("chunk_size", "chunk_overlap", "headers", "max_chars"),
             "autocontext": ("enabled", "max_header_tokens")}


def list_knowledge_bases(directory: str | Path = DEFAULT_DIRECTORY) -> list[str]:
    """Names of the knowledge bases in `directory`.

    Example:
        >>> list_knowledge_bases("/nonexistent")
        []
    """
    root = Path(directory) / "kb"
    return sorted(p.parent.name for p in root.glob("*/manifest.json")) if root.is_dir() else []


def missing_knowledge_base(name: str, directory: Path) -> StoreError:
    """The error for opening a knowledge base that `directory` does not hold (lists those it holds)."""
    names = list_knowledge_bases(directory)
    where = f"in {directory}" if directory.is_dir() else f"at {directory} (no such directory)"
    return StoreError(f"no knowledge base {name!r} {where}; existing: {', '.join(names) or '(none)'}. Check the "
                      "name and directory, or create it by indexing: rag index PATH --collection NAME --store DIR "
                      "(or kb.add_documents(...))")


class StoreInfo(BaseModel):
    """Where the chunks live: a Chroma collection in cosine space (or another backend, `type`).

    `given`: the collection of the default backend (`type` chroma) is in a store given to the knowledge base
    (`store=` in Python, a `store:` block, `--backend`), not in the Chroma store of its own directory, so it
    opens with that store only. Another backend's store is always given (its `type` says so). A manifest
    without the field (every one written before it, and every one that is not such a store: it is written
    only when true) is its directory's own store.
    """

    model_config = ConfigDict(extra="forbid")
    type: str = DEFAULT
    collection: str
    space: str = "cosine"
    given: bool = False

    @model_serializer(mode="wrap")
    def _written_when_given(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        if not self.given:
            data.pop("given", None)
        return data


class Reopened(NamedTuple):
    """The parts a knowledge base reopens with (`Manifest.reopen`): those given, else those its manifest records."""

    embedding: Embeddings
    model_id: str
    chunker: Any
    autocontext: AutoContext
    tagger: Any


class Manifest(BaseModel):
    """Everything needed to reopen a knowledge base with the same components."""

    model_config = ConfigDict(extra="forbid")
    format_version: int = 1
    name: str
    description: str = ""
    embedding: EmbeddingInfo
    chunking: dict[str, Any] = Field(default_factory=dict)
    autocontext: dict[str, Any] = Field(default_factory=dict)
    tagger: dict[str, Any] | None = None
    store: StoreInfo

    @model_validator(mode="after")
    def _format_of_what_it_says(self) -> Manifest:
        if self.store.given and self.format_version < 2:   # (a rag reading version 1 would open it wrongly)
            self.format_version = 2
        return self

    @classmethod
    def load(cls, path: Path) -> Manifest:
        """Read a manifest file.

        Raises:
            StoreError: the file is a symlink, damaged, or names values out of bounds.
            ConfigError: it is from a newer version of rag.
        """
        refuse_symlinks([path.parent, path])
        try:
            data = json.loads(path.read_bytes().decode("utf-8"))
            manifest = cls.model_validate(data)
        except (OSError, ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, ValidationError
            detail = _brief(exc)
            raise StoreError(f"the knowledge base manifest {path} is damaged ({detail}). Restore it from a backup, "
                             f"or delete the folder {path.parent} and index the documents again") from exc
        if manifest.format_version > MANIFEST_VERSION:
            raise ConfigError(f"{path} has format_version {manifest.format_version}; this rag reads up to "
                              f"{MANIFEST_VERSION}: upgrade rag")
        return manifest

    def check_owner(self, name: str, backend: str, collection: str, path: Path, home: Path, *,
                    given: bool = False) -> None:
        """This manifest must describe knowledge base `name` on `backend`: never redirect to another one's data.

        `given`: it is opened with a store given to it (else with its directory's own Chroma store).

        Raises:
            StoreError: it names another knowledge base, space, store (collection or table) or an
                unknown store type (edited or copied).
            ConfigError: it was built on another backend than the one it is opened with, or on a Chroma store
                given to it and opened without one (or the other way round).
        """
        problems = [f"{what} {got!r} (expected {want!r})" for what, got, want in (
            ("name", self.name, name), ("store.space", self.store.space, "cosine")) if got != want]
        if self.store.type not in STORE_TYPES:
            problems.append(f"store.type {self.store.type!r} (one of {', '.join(STORE_TYPES)})")
        elif self.store.type != backend:
            how = ("without store= or --backend (its chunks are in the Chroma store of its directory)"
                   if self.store.type == DEFAULT else
                   f"with its {self.store.type} store: store= in Python, --backend on the command line, a store: "
                   "block in a config (docs/stores.md)")
            raise ConfigError(f"knowledge base {name!r} keeps its chunks in {self.store.type}, not {backend}: "
                              f"open it {how}")
        elif self.store.type == DEFAULT and self.store.given != given:
            raise ConfigError(
                f"knowledge base {name!r} keeps its chunks in the Chroma collection {self.store.collection!r} of a "
                "store given to it, not in the Chroma store of its directory: open it with that store (store= or a "
                "server's client= in Python, --backend on the command line, a store: block or a chroma_server "
                "resource in a config, docs/stores.md)"
                if self.store.given else
                f"knowledge base {name!r} keeps its chunks in the Chroma store of its directory, not in a store "
                "given to it: open it without store= or --backend (and without a store: block in a config)")
        elif self.store.collection != collection:
            problems.append(f"store.collection {self.store.collection!r} (expected {collection!r})")
        if problems:
            raise StoreError(f"the manifest {path} names {', '.join(problems)}: it was edited or copied from "
                             "another knowledge base, or the knowledge base is opened with another table or "
                             "collection, and rag will not read another knowledge base's data through it. Restore "
                             f"those values or open it with its own store, or delete {home} and index again")

    def reopen(self, name: str, directory: Path, *, backend: str, collection: str, embedding: Embeddings | None,
               chunker: Any, autocontext: AutoContext | None, tagger: Any, given: bool = False) -> Reopened:
        """Knowledge base `name` in `directory` reopened through this manifest, in one pass: the manifest
        must be its own on `backend` and `collection`, in a store given to it or not (`given`, `check_owner`);
        the embedding model, chunker and
        AutoContext given must be those it was built with (`check_embedding`, `check_same`); those not
        given, and the tagger, are rebuilt from it.

        Raises:
            StoreError: the manifest names another knowledge base or store (`check_owner`).
            ConfigError: another backend, embedding model, chunk size or AutoContext setting than recorded,
                or no `chunker` for one built with a chunker rag cannot make by itself.
        """
        home = Path(directory) / "kb" / name
        self.check_owner(name, backend, collection, home / "manifest.json", home, given=given)
        embedding = (embedding_from_id(self.embedding.id) if embedding is None
                     else recorded_precision(embedding, self.embedding.id))
        model_id = embedding_id(embedding)
        self.check_embedding(name, directory, model_id)
        if chunker is None and self.chunking.get("type", "token") not in ("token", "passthrough"):
            raise ConfigError(f"knowledge base {name!r} was built with the chunker {self.chunking['type']!r} "
                              f"(settings {self.chunking}), which rag cannot create by itself; pass "
                              "chunker=<that chunker> when opening it")
        chunker = chunker or chunker_from(self.chunking)
        autocontext = autocontext or AutoContext(**autocontext_kwargs(self.autocontext))
        self.check_same(name, "chunking", chunker.settings())
        self.check_same(name, "autocontext", autocontext.settings())
        if tagger is None and self.tagger:
            tagger = KeywordTagger(**{k: v for k, v in self.tagger.items() if k != "type"})
        return Reopened(embedding, model_id, chunker, autocontext, tagger)

    def check_embedding(self, name: str, directory: Path, model_id: str) -> None:
        """`ConfigError` when the knowledge base is opened with another embedding model than it was built with."""
        if self.embedding.id != model_id:
            dim = f", {self.embedding.dimension}-d" if self.embedding.dimension else ""
            raise ConfigError(f"knowledge base {name!r} in {directory} was built with the embedding model "
                              f"{self.embedding.id!r}{dim}; got {model_id!r}. Open it with the same model, "
                              "or index into a new knowledge base name")

    def check_same(self, name: str, part: str, settings: dict[str, Any]) -> None:
        """`ConfigError` when `settings` of `part` ("chunking", "autocontext") differ from the recorded ones."""
        recorded = getattr(self, part)
        for key in ("type", *_COMPARED[part]):
            if key in recorded and recorded[key] != settings.get(key):
                raise ConfigError(f"knowledge base {name!r} was built with {part} {key}={recorded[key]!r}, "
                                  f"got {settings.get(key)!r}; use the recorded settings or a new knowledge base")

    def save(self, path: Path) -> None:
        """Write atomically (a temporary file renamed over the old one; symlinks are not followed)."""
        refuse_symlinks([path.parent])
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, (json.dumps(self.model_dump(), indent=2, sort_keys=True) + "\n").encode("utf-8"))


def _brief(exc: BaseException, limit: int = 300) -> str:
    """The first error of a validation error, or the message, at most `limit` characters."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        text = f"{'.'.join(map(str, first['loc'])) or 'value'}: {first['msg']}"
    else:
        text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= limit else text[:limit] + "..."


def embedding_from_id(model_id: str) -> Embeddings:
    """The embedding model a manifest names, for reopening a knowledge base without passing one.

    Known ids: all-MiniLM-L6-v2 (the offline default) in fp32 or with an `@bf16`, `@fp16` or `@int8` suffix
    (on the device `RAG_EMBEDDING_DEVICE` or `auto` finds: a store built on a GPU in fp16 is searched on
    a CPU with the same id, its questions in fp32 NumPy as always),
    `DeterministicFakeEmbedding(size=N)` (tests), and OpenAI `text-embedding-*` models. A
    knowledge base reopens with the precision it was built with, whatever
    `RAG_EMBEDDING_PRECISION` says now.

    Raises:
        ConfigError: for any other id; pass `embedding=` explicitly.
    """

    base, _, suffix = model_id.partition("@")
    precision = suffix or "fp32"
    if base == DEFAULT_EMBEDDING_ID and precision in PRECISION_CHOICES:
        default = embedding_choice() == "minilm" and minilm_precision() == precision
        return default_embeddings() if default else MiniLMEmbeddings(precision=precision)  # loads nothing yet
    if (match := _FAKE.fullmatch(model_id)) and 1 <= int(match.group(1)) <= MAX_DIMENSION:
        from langchain_core.embeddings import DeterministicFakeEmbedding

        return DeterministicFakeEmbedding(size=int(match.group(1)))
    if model_id.startswith("text-embedding-"):

        emb = _openai_embeddings()
        return emb if getattr(emb, "model", None) == model_id else emb.model_copy(update={"model": model_id})
    raise ConfigError(f"this knowledge base was built with the embedding model {model_id!r}, which rag cannot "
                      "create by itself; pass embedding=<that model> when opening it")


def recorded_precision(embedding: Embeddings, model_id: str) -> Embeddings:
    """`embedding` in the precision a knowledge base's MiniLM id records, when its own was not asked for.

    A `MiniLMEmbeddings` made for a device (`device="cuda"`, a config's `embedding: {device: ...}`)
    without a precision keeps the one the knowledge base was built with on that device (fp32 built on a
    CPU stays fp32 on a GPU); any other model, or a precision asked for, is returned as it is (and
    `Manifest.check_embedding` then says when it differs).
    """
    base, _, suffix = model_id.partition("@")
    precision = suffix or "fp32"
    if (isinstance(embedding, MiniLMEmbeddings) and embedding.requested_precision is None
            and base == DEFAULT_EMBEDDING_ID and precision in PRECISION_CHOICES and precision != embedding.precision):
        return embedding.with_precision(precision)
    return embedding


def chunker_from(settings: dict[str, Any]) -> Any:
    """The chunker a manifest's `chunking` settings describe."""
    if settings.get("type") == "passthrough":
        return PassthroughChunker()
    # The approximate tokenizer is rebuilt as recorded; the word-piece one (or none recorded) is the default,
    # which falls back to the approximate one where MiniLM's tokenizer cannot be loaded.
    tokenizer = ApproximateTokenizer() if settings.get("tokenizer") == ApproximateTokenizer.name else None
    return TokenChunker(**{k: settings[k] for k in ("chunk_size", "chunk_overlap", "headers", "max_chars")
                           if k in settings}, tokenizer=tokenizer)


def autocontext_kwargs(settings: dict[str, Any]) -> dict[str, Any]:
    """`AutoContext` arguments from a manifest's `autocontext` settings."""
    if str(settings.get("summary", "extractive")).startswith("llm:"):
        logger.info("this knowledge base summarises with %s; new documents get extractive summaries unless "
                    "autocontext=AutoContext(llm=...) is passed", settings["summary"])
    return {k: settings[k] for k in ("enabled", "max_header_tokens") if k in settings}
