"""Configuration files: `configs/*.yaml` -> validated pydantic models -> a ready `RAG`.

A config is data, never code: YAML is read as plain, bounded YAML (no `!!python` tags, no
duplicate keys, no alias bombs; see `rag.config.yaml_file`), every
model forbids unknown keys and names the valid ones, resource kinds, models and extras are
chosen from allowlists by name, and secrets are given as the *names* of environment variables.

```yaml
version: 1
embedding: {kind: minilm}                 # minilm | openai | deterministic
llm: {kind: default}                      # default (RAG_LLM) | extractive | openai | local
generation: {temperature: 0.0}
search_kwargs: {k: 4}                     # default for every resource
resources:
  - {name: docs, kind: chroma, path: .rag, index: {paths: [docs]}}
extras: [count_docs]
server: {tenant_filter: {tenant: acme}, max_k: 20}
```

Relative paths are resolved against the current working directory.

Example:
    >>> cfg = parse_config({"embedding": {"kind": "deterministic", "size": 8},
    ...                     "resources": [{"name": "docs", "kind": "chroma", "path": "/tmp/x"}]})
    >>> cfg.resources[0].collection_name
    'docs'
    >>> try:
    ...     parse_config({"resourcez": []})
    ... except ConfigError as err:
    ...     print(str(err).split("; valid")[0])
    invalid config: (top level): unknown key 'resourcez'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import Field, ValidationError, field_validator

from rag.base.errors import ConfigError, short_repr
from rag.base.tracing import enable_tracing
from rag.compose.resource import validate_search_kwargs
from rag.config.knowledge_base import KnowledgeBaseResourceConfig
from rag.config.lexical import BM25ResourceConfig, HybridResourceConfig
from rag.config.models import (
    EmbeddingConfig,
    GenerationConfig,
    LLMConfig,
    ServerConfig,
    StrictModel,
    TracingConfig,
    build_embedding,
    build_llm,
    kind_of,
)
from rag.config.retrieval import RetrievalConfig
from rag.config.stores import (
    ChromaResourceConfig,
    ChromaServerResourceConfig,
    FaissResourceConfig,
    LanceDBResourceConfig,
    MilvusResourceConfig,
    PGVectorResourceConfig,
    QdrantResourceConfig,
)
from rag.config.yaml_file import read_config_file
from rag.generation.prompts import source_label
from rag.generation.rag_with_source import rag_chain_from_docs

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings


__all__ = [
    "EXTRAS",
    "RESOURCE_KINDS",
    "RagConfig",
    "from_config",
    "load_config",
    "parse_config",
    "register_extra",
]

ResourceConfig = (ChromaResourceConfig | ChromaServerResourceConfig | KnowledgeBaseResourceConfig
                  | BM25ResourceConfig | HybridResourceConfig | PGVectorResourceConfig | QdrantResourceConfig
                  | MilvusResourceConfig | LanceDBResourceConfig | FaissResourceConfig)

#: kind -> config model: the only resource types a config can build.
RESOURCE_KINDS: dict[str, type] = {kind_of(model): model for model in (
    ChromaResourceConfig, ChromaServerResourceConfig, KnowledgeBaseResourceConfig, BM25ResourceConfig,
    HybridResourceConfig, PGVectorResourceConfig, QdrantResourceConfig, MilvusResourceConfig, LanceDBResourceConfig,
    FaissResourceConfig)}


# ------------------------------------------------------------------------------ extras registry
def _count_docs(output: Mapping[str, Any]) -> int:
    return len(output.get("context") or [])


def _source_labels(output: Mapping[str, Any]) -> list[str]:

    return [f"[{i}] {source_label(doc)}" for i, doc in enumerate(output.get("context") or [], start=1)]


def _resources_used(output: Mapping[str, Any]) -> list[str]:
    names: list[str] = []
    for doc in output.get("context") or []:
        name = doc.metadata.get("resource")
        if name and name not in names:
            names.append(name)
    return names


#: Extras a config can name. Add your own with `register_extra`; a config cannot import code.
EXTRAS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "count_docs": _count_docs,
    "source_labels": _source_labels,
    "resources_used": _resources_used,
}


def register_extra(name: str, fn: Callable[[Mapping[str, Any]], Any], *, replace: bool = False) -> None:
    """Make `fn` available to configs as `extras: [name]`.

    Example:
        >>> register_extra("answer_chars", lambda out: len(out["answer"]))
        >>> "answer_chars" in EXTRAS
        True
    """
    if not name or not isinstance(name, str):
        raise ConfigError(f"an extra needs a non-empty string name, got {name!r}")
    if not callable(fn):
        raise ConfigError(f"extra {name!r} must be callable, got {type(fn).__name__}")
    if name in EXTRAS and not replace and EXTRAS[name] is not fn:
        raise ConfigError(f"an extra named {name!r} is already registered; pass replace=True to replace it")
    EXTRAS[name] = fn


# ------------------------------------------------------------------------------ the top-level model
class RagConfig(StrictModel):
    """A whole config file. Only `resources` is required."""

    version: Literal[1] = 1
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    generation: GenerationConfig = Field(default_factory=GenerationConfig)
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    resources: list[Annotated[ResourceConfig, Field(discriminator="kind")]]
    extras: list[str] = Field(default_factory=list)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    tracing: TracingConfig = Field(default_factory=TracingConfig)

    @field_validator("search_kwargs")
    @classmethod
    def _check_search_kwargs(cls, value: dict[str, Any]) -> dict[str, Any]:
        return validate_search_kwargs(value, where="search_kwargs")

    @field_validator("resources")
    @classmethod
    def _check_names(cls, resources: list[Any]) -> list[Any]:
        if not resources:
            raise ValueError(f"at least one resource is needed; kinds: {', '.join(RESOURCE_KINDS)}")
        names = [r.name for r in resources]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"resource names must be unique; duplicated: {dupes}")
        return resources

    @field_validator("extras")
    @classmethod
    def _check_extras(cls, extras: list[str]) -> list[str]:
        unknown = [e for e in extras if e not in EXTRAS]
        if unknown:
            raise ValueError(f"unknown extra(s) {unknown}; registered: {', '.join(sorted(EXTRAS))}")
        return extras


# ------------------------------------------------------------------------------ loading
def _format_errors(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors(include_url=False):
        where = _loc(err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "union_tag_invalid":
            msg = f"unknown kind {short_repr(err['input'].get('kind'))}; valid: {', '.join(RESOURCE_KINDS)}" \
                if isinstance(err.get("input"), Mapping) else msg
        elif err["type"] == "union_tag_not_found":
            msg = f"missing 'kind'; valid: {', '.join(RESOURCE_KINDS)}"
        lines.append(f"{where}: {msg}")
    return "; ".join(lines)


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in RESOURCE_KINDS and i >= 2 and loc[i - 2] == "resources" and isinstance(loc[i - 1], int):
            continue  # the discriminator tag pydantic inserts after resources[i]
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def parse_config(data: Any, *, source: str = "config") -> RagConfig:
    """Validate an already-parsed mapping (e.g. from YAML or JSON) into a `RagConfig`.

    Raises:
        ConfigError: naming every bad key and, for unknown keys, the valid ones.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the top level must be a mapping of settings, got {type(data).__name__}")
    try:
        return RagConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(f"invalid {source}: {_format_errors(exc)}") from None


def load_config(path: str | Path) -> RagConfig:
    """Read and validate a YAML config file (plain YAML, no tags that run code; see `config_yaml`).

    Raises:
        ConfigError: for every problem: a missing or non-UTF-8 file, invalid YAML, a duplicate
            key, an alias bomb, too deep a nesting, or settings the models reject.

    Example:
        >>> cfg = load_config("configs/default.yaml")      # doctest: +SKIP
        >>> [r.name for r in cfg.resources]                 # doctest: +SKIP
        ['docs']
    """
    data = read_config_file(path)
    return parse_config(data if data is not None else {}, source=f"config {path}")


# ------------------------------------------------------------------------------ building
#: what `from_config` builds: `RAG` or a subclass (configuration sits below the chain and needs no name of it)
Built = TypeVar("Built")


def from_config(cls: Callable[..., Built], source: str | Path | Mapping[str, Any] | RagConfig, *,
                embedding: Embeddings | None = None, llm: Any = None) -> Built:
    """`RAG.from_config(path)`: load a YAML file (or take a mapping / `RagConfig`) and build `cls`.

    Args:
        cls: the class to build (`RAG` or a subclass), called with `resources`, `generation_chain`,
            `extras` and `retrieval`.
        source: a YAML path, a mapping, or a validated `RagConfig`.
        embedding: use this embedding model instead of the configured one (tests, notebooks).
        llm: use this answer model instead of the configured one.

    Example:
        >>> from rag.compose.generator import RAG
        >>> rag = from_config(RAG, {"embedding": {"kind": "deterministic", "size": 8}, "llm": {"kind": "extractive"},
        ...                         "resources": [{"name": "notes", "kind": "chroma", "path": "/tmp/rag-doc-notes",
        ...                                        "create": True}]})
        >>> rag.resource_names
        ['notes']
    """
    if isinstance(source, RagConfig):
        config = source
    elif isinstance(source, Mapping):
        config = parse_config(source)
    else:
        config = load_config(source)
    if config.tracing.enabled:  # process-wide, as OpenTelemetry's own provider is
        enable_tracing(capture_content=config.tracing.capture_content)
    embedder = embedding if embedding is not None else build_embedding(config.embedding)
    resources = [spec.build(embedding=embedder, default_search_kwargs=config.search_kwargs)
                 for spec in config.resources]
    model = llm if llm is not None else build_llm(config.llm)
    generation = rag_chain_from_docs(model, config.generation.prompt, context_window=config.llm.context_window)
    settings = config.generation.model_settings()
    if settings:
        generation = generation.with_settings(**settings)
    extras = {name: EXTRAS[name] for name in config.extras}
    return cls(resources=resources, generation_chain=generation, extras=extras,
               retrieval=config.retrieval.settings(llm=model))
