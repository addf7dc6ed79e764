"""The recommended retrieval pipeline: the defaults of `RetrievalSettings`, so of every door.

`RAG(resources=[...]).chain()`, `rag.retrieve`, `airag`, `ConversationalRAG`, `rag ask`, configs,
`rag serve` and the FinanceBench `default` row all run this pipeline unless told otherwise; the
seed's plain top-k (each resource's `search_kwargs`, fused, nothing cut) is `RAG(..., retrieval="plain")`.

Per resource (a knowledge base's `as_resource()`): hybrid search (dense MiniLM + BM25 over title,
section and text, fused by reciprocal rank) over AutoContext chunks, and document routing once it
holds 8 documents (`routing="auto"`; the router belongs to the resource and the pipeline applies it): a question that names documents (a capitalised word, an
acronym, letters with digits matching their title or file name) searches only them, and any other
question searches everything. Across resources (`RetrievalSettings()`; `RECOMMENDED` is the same as data):
candidates fused, each candidate's score smoothed with the evidence of its page (0.2 of the normalised
sum of the page's three best candidates: a statement table rises with the title and prose of its
page) and of its document (0.1: a lone look-alike chunk of another document yields to a document
several candidates come from; `rag.retrieval.aggregation`), then packed page-diversely (a chunk loses 0.3 of its normalised
score per better chunk already taken from its page) into a context budget of 4,000 tokens rather
than a fixed number of chunks.

Why these: on FinanceBench (92 questions, 54 filings) the pieces that held up on filings and
questions kept back from development were AutoContext, routing and hybrid search; page-diverse
packing is a general rule (a page is rarely worth a second and third chunk before another page's
first). The pieces designed after reading the development misses (named sections, the reranker
blend) stay opt-in (`sections=`, `reranker=`) until they help on other data. See
docs/retrieval.md ("The default pipeline") for the figures.

Example:
    >>> settings = recommended_retrieval(max_tokens=1000)
    >>> settings.page_diversity, settings.max_tokens, settings.reranker is None
    (0.3, 1000, True)
"""

from __future__ import annotations

from typing import Any

from rag.compose.retrieval_settings import RetrievalSettings, retrieval_settings

__all__ = ["CONTEXT_TOKENS", "RECOMMENDED", "recommended_retrieval"]

#: The context budget of the default pipeline (word pieces of the embedding model).
CONTEXT_TOKENS: int = RetrievalSettings().max_tokens or 4000
#: The default pipeline's cross-resource settings, as data: `RetrievalSettings()`'s own defaults.
RECOMMENDED: dict[str, Any] = {key: getattr(RetrievalSettings(), key)
                               for key in ("k", "fetch_k", "fusion", "page_evidence", "document_evidence",
                                           "page_diversity", "max_tokens", "token_counter")}


def recommended_retrieval(**overrides: Any) -> RetrievalSettings:
    """The recommended `RetrievalSettings` (`RetrievalSettings()`), with `overrides` (any field) on top."""
    return retrieval_settings(**overrides)
