"""`build_index` (RAGTools): sources -> chunks -> tags -> embeddings -> store -> a searchable `Resource`.

A one-call front door to the library's one write path, through a `KnowledgeBase`
(`rag.indexing.write_path`: load, chunk, AutoContext, tag, embed, write). Each
step is a component with a default, replaceable by keyword:

| step        | default                                 | replace with                               |
|-------------|-----------------------------------------|--------------------------------------------|
| chunker     | `TokenChunker()` (200 word pieces, 30 overlap) | any `TokenChunker` / `PassthroughChunker`, or `chunker_kwargs` |
| autocontext | `AutoContext()` (title / section + summary) | `AutoContext(...)` or False              |
| tagger      | None                                    | True (`KeywordTagger()`) or a `KeywordTagger` |
| embedding   | the offline MiniLM                      | any LangChain `Embeddings`                 |
| store       | in memory                               | a folder: a persistent knowledge base there |
| search      | ``"hybrid"`` (dense + BM25)             | ``"dense"`` or ``"bm25"``                  |

With a `store` folder a second call only indexes what changed. For a named, long-lived
knowledge base use `rag.KnowledgeBase` directly.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.documents import Document
    >>> res = build_index([Document(page_content="Paris is in France.", metadata={"source": "geo"})],
    ...                   embedding=DeterministicFakeEmbedding(size=16), chunker_kwargs={"chunk_size": 64})
    >>> [d.page_content for d in res.retrieve("Paris")]
    ['Paris is in France.']
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from rag.base.errors import ConfigError
from rag.compose.knowledge_base import KnowledgeBase
from rag.compose.resource import Resource
from rag.indexing.autocontext import AutoContext
from rag.indexing.chunking import PassthroughChunker, TokenChunker
from rag.indexing.tags import KeywordTagger
from rag.stores.registry import store_name

__all__ = ["build_index"]


def build_index(
    sources: str | Path | Document | Sequence[str | Path | Document],
    *,
    name: str = "index",
    embedding: Embeddings | None = None,
    chunker: TokenChunker | PassthroughChunker | None = None,
    chunker_kwargs: dict[str, Any] | None = None,
    autocontext: AutoContext | bool = True,
    tagger: KeywordTagger | bool | None = None,
    store: str | Path | None = None,
    search: str = "hybrid",
    search_kwargs: dict[str, Any] | None = None,
    description: str = "",
) -> Resource:
    """Index files, folders or Documents and return a searchable `Resource` (see the module docstring).

    Args:
        sources: paths (files or folders) and/or Documents.
        name: the resource name (and the knowledge base's name).
        embedding: the embedding model (default: the offline MiniLM).
        chunker: the chunker; or `chunker_kwargs` for a `TokenChunker(**chunker_kwargs)`.
        autocontext: True (default `AutoContext()`), False, or an `AutoContext`.
        tagger: None / False (no tags), True (`KeywordTagger()`), or a `KeywordTagger`.
        store: a folder for a persistent knowledge base; None keeps it in memory.
        search: ``"hybrid"``, ``"dense"`` or ``"bm25"``.
        search_kwargs: the resource's default search settings (`k`, `filter`, ...).
        description: what it holds.

    Raises:
        ConfigError: nothing readable, or a step of the wrong kind.

    Example:
        >>> res = build_index("docs/", chunker_kwargs={"chunk_size": 128}, tagger=True)   # doctest: +SKIP
        >>> res.retrieve("install", search_kwargs={"filter": {"tag_linux": True}})       # doctest: +SKIP
    """
    items = [sources] if isinstance(sources, str | Path | Document) else list(sources)
    kb = KnowledgeBase(store_name(name)[:63], store, embedding=embedding,
                       chunker=_chunker(chunker, chunker_kwargs), autocontext=_autocontext(autocontext),
                       tagger=_tagger(tagger), description=description)
    kb.add_documents(items)
    if kb.count() == 0:
        raise ConfigError(f"no chunks to index from {len(items)} source(s): nothing readable was found")
    return kb.as_resource(name=name, search=search, search_kwargs=search_kwargs, description=description)


def _chunker(chunker: Any, kwargs: dict[str, Any] | None) -> TokenChunker | PassthroughChunker | None:
    if chunker is not None and kwargs:
        raise ConfigError("give either chunker or chunker_kwargs, not both")
    if chunker is not None and not isinstance(chunker, TokenChunker | PassthroughChunker):
        raise ConfigError(f"chunker must be a TokenChunker or PassthroughChunker, got {type(chunker).__name__}")
    return TokenChunker(**kwargs) if kwargs else chunker


def _autocontext(value: Any) -> AutoContext:
    if isinstance(value, AutoContext):
        return value
    if isinstance(value, bool):
        return AutoContext(enabled=value)
    raise ConfigError(f"autocontext must be True, False or an AutoContext, got {type(value).__name__}")


def _tagger(value: Any) -> KeywordTagger | None:
    if value is None or value is False:
        return None
    if value is True:
        return KeywordTagger()
    if isinstance(value, KeywordTagger):
        return value
    raise ConfigError(f"tagger must be None, True or a KeywordTagger, got {type(value).__name__}")
