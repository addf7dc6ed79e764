"""`knowledge_base_retriever`: the retriever of a knowledge base for a named search mode.

One place decides how a knowledge base is searched, for every front door that searches one
(`KnowledgeBase.as_resource`, `Resource.from_directory`, `build_index`, the config kinds and
`rag ask`):

- ``"hybrid"`` (the default): dense search over the knowledge base's collection and BM25 over
  its stored chunks (title and section indexed with the text), fused (`HybridRetriever`);
- ``"dense"``: the dense vectors only (`KnowledgeBaseRetriever`);
- ``"bm25"``: BM25 over the stored chunks only (`BM25Retriever`).

Routing and named sections are stages of the retrieval pipeline, not wrappers around the
retriever: `knowledge_base_router` gives the `DocumentRouter` a knowledge base's resource carries
(when the question names something, a capitalised word, an acronym, letters with digits, that
identifies documents by their card, title and file name, the pipeline searches only them;
``"auto"``, the default: once the knowledge base holds at least `ROUTING_MIN_DOCUMENTS` documents;
``"on"``: always) and `knowledge_base_sections` the `SectionRouter` (promote the sections a
question names; opt-in: designed on FinanceBench's development questions).
Lexical search runs in the store's engine when it has one: on the embedded default, SQLite FTS5
written with the chunks (`rag.stores.fts_index`, opened by `rag.indexing.lexical_sync`), so a
retriever sees every later write at its next query and nothing is read or rebuilt to search. A
backend without one, or BM25 settings the engine's index was not built with (other
`metadata_fields`, `stem`, `stop_words`, `k1`, `b`), gets the in-process `BM25Index` over the
chunks stored now, saved next to the knowledge base while it is unchanged
(`rag.retrieval.bm25_cache`): build the retriever again after the knowledge base changes.
Named sections read the chunks stored now.

Example:
    >>> from langchain_core.documents import Document
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from rag import KnowledgeBase
    >>> kb = KnowledgeBase("geo", None, embedding=DeterministicFakeEmbedding(size=16))
    >>> _ = kb.add_documents([Document(page_content="Rome is in Italy.", metadata={"source": "it"}),
    ...                       Document(page_content="Paris is in France.", metadata={"source": "fr"})])
    >>> [d.page_content for d in knowledge_base_retriever(kb, search="bm25", k=1).invoke("Rome")]
    ['Rome is in Italy.']
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ValidationError

from rag.base.errors import ConfigError
from rag.indexing.kb_parts import KnowledgeBaseView
from rag.indexing.kb_retriever import KnowledgeBaseRetriever
from rag.indexing.lexical_sync import engine_lexical
from rag.retrieval.bm25_cache import knowledge_base_bm25
from rag.retrieval.hybrid import HybridRetriever
from rag.retrieval.lexical import BM25Index, BM25Retriever, LexicalIndex
from rag.retrieval.routing import DocumentRouter
from rag.retrieval.sections import SectionRouter

__all__ = ["ROUTING_MIN_DOCUMENTS", "SEARCH_MODES", "SearchMode", "document_router", "knowledge_base_retriever",
           "knowledge_base_router", "knowledge_base_sections"]

SearchMode = Literal["hybrid", "dense", "bm25"]
#: The search modes, best general one first (the default).
SEARCH_MODES: tuple[str, ...] = ("hybrid", "dense", "bm25")
_BM25_DEFAULTS = {"metadata_fields": ["title", "section"]}
#: the settings an engine's lexical index is built with (k1 and b: BM25Index's defaults, which the engine's
#: own BM25 stands in for)
_ENGINE_SETTINGS = {"k1": 1.5, "b": 0.75, "stem": True, "stop_words": True, "metadata_fields": ["title", "section"]}
#: `routing="auto"` routes a knowledge base holding at least this many documents (below it, a
#: question's top chunks already come from the right few documents).
ROUTING_MIN_DOCUMENTS = 8
ROUTING_CHOICES = ("auto", "on", "off")


def document_router(kb: KnowledgeBaseView) -> DocumentRouter | None:
    """A `DocumentRouter` over the knowledge base's documents (key ``doc_id``), or None when it holds none.

    Each document's card is what identifies it, its title and file name (not its summary: content
    words such as "server" or "token" would route questions about a topic to one document that
    mentions it), and a route is taken only when the question names something
    (`DocumentRouter(names_only=True)`) that is a name in this knowledge base: the documents it
    names hold at least half of the chunks using the word (counted in the knowledge base's BM25
    index, read on the first question that writes a name), so a word the corpus uses everywhere
    ("URL", "HTTP", "ID" in a documentation set) routes nothing.
    """
    cards = {}
    for record in kb.list_documents():
        name = Path(record.source).stem.replace("_", " ") if record.source else ""
        parts = [p for p in (record.title, name) if p]
        cards[record.doc_id] = " | ".join(dict.fromkeys(parts)) or record.doc_id
    return DocumentRouter(cards, key="doc_id", names_only=True, mentions=_mentions(kb)) if cards else None


def _mentions(kb: KnowledgeBaseView) -> Callable[[str], Counter]:
    """word -> chunks using it per ``doc_id``, from the knowledge base's lexical index (opened on first use)."""
    index: list[LexicalIndex] = []

    def mentions(word: str) -> Counter:
        if not index:
            index.append(knowledge_base_lexical(kb, _BM25_DEFAULTS))
        return index[0].mentions(word)
    return mentions


def knowledge_base_lexical(kb: KnowledgeBaseView, settings: Mapping[str, Any]) -> LexicalIndex:
    """`kb`'s lexical index for BM25 `settings`: its engine's when it has one built with them, else the
    in-process `BM25Index` (saved next to the knowledge base while it is unchanged)."""
    wanted = {**_ENGINE_SETTINGS, **settings}
    wanted["metadata_fields"] = list(wanted["metadata_fields"])
    if kb.exists and wanted == _ENGINE_SETTINGS:
        engine = engine_lexical(kb)
        if engine is not None:
            return engine
    return knowledge_base_bm25(kb, settings)


def knowledge_base_retriever(kb: KnowledgeBaseView, *, search: str = "hybrid", k: int = 4, fusion: str = "rrf",
                             weights: dict[str, float] | None = None, fetch_k: int = 20, rrf_k: int = 60,
                             bm25_settings: Mapping[str, Any] | None = None,
                             chunks: Sequence[Document] | None = None) -> BaseRetriever:
    """A retriever over `kb` for the search mode `search` (see the module docstring).

    Args:
        kb: the knowledge base.
        search: ``"hybrid"``, ``"dense"`` or ``"bm25"``.
        k: how many chunks a direct call returns (the pipeline asks for its `fetch_k` per call).
        fusion, weights, fetch_k, rrf_k: hybrid fusion settings (`HybridRetriever`; `fetch_k`: each
            list's depth before fusion, at least the `k` asked for).
        bm25_settings: `BM25Index.from_documents` settings (title and section are indexed by default).
        chunks: the stored chunks, when the caller has read them already.

    Raises:
        ConfigError: an unknown mode or setting, or an empty knowledge base for BM25 / hybrid.
    """
    if search not in SEARCH_MODES:
        raise ConfigError(f"unknown search mode {search!r}; valid: {', '.join(SEARCH_MODES)}")
    bm25 = None
    if search != "dense":
        settings = {**_BM25_DEFAULTS, **(bm25_settings or {})}
        bm25 = (knowledge_base_lexical(kb, settings) if chunks is None
                else BM25Index.from_documents(chunks, **settings))
    if bm25 is not None and not len(bm25):
        raise ConfigError(f"knowledge base {kb.name!r} is empty: index documents before searching it with "
                          f"{search!r} search")
    try:
        return _base_retriever(kb, search, k=k, fusion=fusion, weights=weights, fetch_k=fetch_k, rrf_k=rrf_k,
                               bm25=bm25)
    except ValidationError as exc:
        raise ConfigError(f"{search} search over {kb.name!r}: {exc.errors()[0]['msg']}") from exc


def knowledge_base_router(kb: KnowledgeBaseView, routing: str | bool = "auto") -> DocumentRouter | None:
    """The `DocumentRouter` of a knowledge base's resource for `routing` (see the module docstring), or None.

    ``"auto"``: one once the knowledge base holds `ROUTING_MIN_DOCUMENTS` documents; ``"on"`` / True:
    always (when it holds any); ``"off"`` / False: none.

    Raises:
        ConfigError: an unknown `routing` value.
    """
    choice = {True: "on", False: "off"}.get(routing, routing) if isinstance(routing, bool) else routing
    if choice not in ROUTING_CHOICES:
        raise ConfigError(f"unknown routing {routing!r}; valid: {', '.join(ROUTING_CHOICES)}")
    if choice == "off" or (choice == "auto" and len(kb.list_documents()) < ROUTING_MIN_DOCUMENTS):
        return None
    return document_router(kb)


def knowledge_base_sections(kb: KnowledgeBaseView, sections: Mapping[str, Any] | None,
                            chunks: Sequence[Document] | None = None) -> SectionRouter | None:
    """The `SectionRouter` of a knowledge base's resource (`SectionRouter` settings plus ``at``), or None (off).

    Raises:
        ConfigError: an empty knowledge base, or a bad setting.
    """
    if sections is None:
        return None
    chunks = kb.get_documents() if chunks is None else chunks
    if not chunks:
        raise ConfigError(f"knowledge base {kb.name!r} is empty: index documents before promoting its sections")
    return SectionRouter(chunks, **dict(sections))


def _base_retriever(kb: KnowledgeBaseView, search: str, *, k: int, fusion: str, weights: dict[str, float] | None,
                    fetch_k: int, rrf_k: int, bm25: LexicalIndex | None) -> BaseRetriever:
    if search == "dense" or bm25 is None:
        return KnowledgeBaseRetriever(chunks=kb.chunks, embedding=kb.embedding, k=k)
    if search == "bm25":
        return BM25Retriever(index=bm25, k=k)
    store = kb.chunks.vectorstore(kb.embedding)
    return HybridRetriever(vectorstore=store, bm25=bm25, k=k, fusion=fusion, weights=weights,
                           fetch_k=max(fetch_k, k), rrf_k=rrf_k)
