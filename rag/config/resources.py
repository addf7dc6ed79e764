"""What the store-backed resource kinds of a config share: the keys every kind has (`ResourceBase`), the
`index:` block (`IndexConfig`) and its sync (`sync_files`), search settings.

The kinds themselves: `chroma` and `chroma_server` (a collection of the default store, in a local
directory or on a server) and the other stores in `rag.config.stores`; `knowledge_base` in
`rag.config.knowledge_base`. The `chroma` kinds and `knowledge_base` take an optional `index:` block (`paths`, `glob`, `exclude`, `chunk_size` in word pieces, the
executor and the cost limits per file):
the files are synced into a knowledge base at every build (the library's one write path,
`rag.indexing.write_path`: unchanged files cost a hash check, changed ones are
re-indexed, deleted ones removed), so a config can serve a folder of documents with no separate
`rag index` step. Without `index:` a missing collection is an error listing the collections that
exist (or `create: true` makes it empty).

Example:
    >>> spec = IndexConfig(paths=["docs"])
    >>> spec.glob, spec.limits == IndexConfig(paths=["x"]).limits
    ('**/*', True)
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from rag.base.errors import ConfigError
from rag.base.text import terminal_safe
from rag.compose.knowledge_base import KnowledgeBase
from rag.compose.resource import validate_search_kwargs
from rag.config.models import StrictModel
from rag.indexing.executors import executor_from
from rag.indexing.limits import LIMIT_NAMES, LoadLimits
from rag.models.embeddings import is_default_embeddings
from rag.stores.registry import store_name

__all__ = [
    "BM25Settings",
    "HybridSearchSettings",
    "IndexConfig",
    "ResourceBase",
    "SectionSettings",
    "kb_embedding",
    "kb_name",
    "sync_files",
    "store_path",
]

logger = logging.getLogger(__name__)
_BATCH = 64


def store_path(raw: str) -> Path:
    """A store directory as an absolute path.

    Relative paths are taken from the current directory when the config is built; making them
    absolute matters because Chroma shares one client per path string within a process.
    """
    return Path(raw).expanduser().resolve()


class IndexConfig(StrictModel):
    """Files to sync into the resource's knowledge base (txt, md, html, pdf); `chunk_size` in word pieces.

    `executor`: where the sync's loading, chunking and embedding run: `local` (default) or `ray`, or
    a mapping such as `{kind: ray, address: "ray://head:10001", concurrency: 8, batch_size: 256}`
    (docs/scale.md).

    The cost limits per file (`rag.indexing.limits.LoadLimits`; left out: the default) are keys of
    their own: `tables` (pdfium, pdfplumber, none), `ocr` (true / false), `table_seconds`,
    `table_page_seconds`, `table_max_chars`, `table_max_objects`, `ocr_dpi`, `ocr_max_pages`, `ocr_seconds`,
    `max_bytes`.
    """

    paths: list[str] = Field(min_length=1)
    glob: str = "**/*"
    exclude: list[str] = Field(default_factory=list)
    chunk_size: int | None = Field(default=None, ge=8, le=254)
    executor: str | dict[str, Any] | None = None
    # (Any: LoadLimits checks each value and says what is valid)
    tables: Any = None
    table_max_chars: Any = None
    table_max_objects: Any = None
    table_seconds: Any = None
    table_page_seconds: Any = None
    ocr: Any = None
    ocr_dpi: Any = None
    ocr_max_pages: Any = None
    ocr_seconds: Any = None
    max_bytes: Any = None

    @field_validator("executor")
    @classmethod
    def _check_executor(cls, value: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
        executor_from(value)   # raises with what is wrong and what is valid
        return value

    @model_validator(mode="after")
    def _check_limits(self) -> IndexConfig:
        _ = self.limits   # raises with the option, the value and what is valid
        return self

    @property
    def limits(self) -> LoadLimits:
        """The cost limits per file the block sets (the defaults for those it leaves out)."""
        return LoadLimits.of({k: getattr(self, k) for k in LIMIT_NAMES if getattr(self, k) is not None})


def kb_embedding(embedding: Any) -> Any:
    """None for `embedding: {kind: default}` ("no particular model": an existing knowledge base keeps
    the model in its manifest, e.g. MiniLM fp32 after the default precision became `auto`)."""
    return None if is_default_embeddings(embedding) else embedding


def sync_files(kb: KnowledgeBase, spec: IndexConfig, *, resource: str) -> None:
    """Sync the files of an `index:` block into `kb` (skipped files are logged with the reason)."""
    report = kb.add_documents([str(Path(p).expanduser()) for p in spec.paths], include=spec.glob,
                              exclude=spec.exclude, cleanup="incremental", executor=spec.executor,
                              limits=spec.limits)
    for skipped in report.skipped:
        # the reason names the file (its path first): printing the path too doubled it
        logger.warning("resource %s: skipped %s", resource, terminal_safe(skipped.reason))
    for note in report.notes:   # what hit a cost limit, per file
        logger.warning("resource %s: note %s: %s", resource, terminal_safe(note.path), terminal_safe(note.note))
    if kb.count() == 0:
        raise ConfigError(f"resource {resource!r}: no readable documents in {spec.paths} matching {spec.glob!r}")
    logger.info("resource %s: %s", resource, report.summary())


def kb_name(name: str) -> str:
    """A knowledge base name (1-63 of [A-Za-z0-9._-]) for a collection or resource name."""
    return store_name(name)[:63]


class ResourceBase(StrictModel):
    """Keys every resource kind has."""

    name: str = Field(min_length=1)
    description: str = ""
    search_kwargs: dict[str, Any] = Field(default_factory=dict)

    @field_validator("search_kwargs")
    @classmethod
    def _check_search_kwargs(cls, value: dict[str, Any]) -> dict[str, Any]:
        return validate_search_kwargs(value)

    def merged_search_kwargs(self, defaults: dict[str, Any]) -> dict[str, Any]:
        return {**defaults, **self.search_kwargs}


class BM25Settings(StrictModel):
    """Okapi BM25 parameters and tokenisation (see `rag.retrieval.lexical.BM25Index`)."""

    k1: float = Field(default=1.5, ge=0)
    b: float = Field(default=0.75, ge=0, le=1)
    stem: bool = True
    stop_words: bool = True
    metadata_fields: list[str] = Field(default_factory=lambda: ["title"])


class HybridSearchSettings(StrictModel):
    """Dense + BM25 fusion settings: the `hybrid` kind, and `hybrid:` on a knowledge base (`as_hybrid_retriever`)."""

    fusion: Literal["rrf", "convex"] = "rrf"
    weights: dict[str, float] | None = None
    fetch_k: int = Field(default=20, ge=1, le=1000)
    rrf_k: int = Field(default=60, ge=0)
    bm25: BM25Settings = Field(default_factory=lambda: BM25Settings(metadata_fields=["title", "section"]))

    @field_validator("weights")
    @classmethod
    def _check_weights(cls, weights: dict[str, float] | None) -> dict[str, float] | None:
        if weights is not None:
            bad = sorted(set(weights) - {"dense", "bm25"})
            if bad:
                raise ValueError(f"unknown weight key(s) {bad}; valid: dense, bm25")
            if any(w < 0 for w in weights.values()):
                raise ValueError("weights must be >= 0")
        return weights

    def fusion_settings(self) -> dict[str, Any]:
        """The `HybridRetriever` fusion keyword arguments: fusion, weights, fetch_k, rrf_k."""
        return {"fusion": self.fusion, "weights": self.weights, "fetch_k": self.fetch_k, "rrf_k": self.rrf_k}


class SectionSettings(StrictModel):
    """Named-section promotion (the pipeline stage of `rag.retrieval.sections.SectionRouter`)."""

    at: int = Field(default=3, ge=0)
    min_score: float = Field(default=2.0, ge=0)
    top_n: int = Field(default=2, ge=1)
    prefix: int = Field(default=5, ge=0)
    detect: bool | Literal["auto"] = "auto"
