"""The recommended retrieval pipeline: what `rag ask`, `rag serve` configs and `airag` use by default.

Per resource (a knowledge base's `as_resource()`): hybrid search (dense MiniLM + BM25 over title,
section and text, fused by reciprocal rank) over AutoContext chunks, and document routing once it
holds 8 documents (`routing="auto"`): a question that names documents (a capitalised word, an
acronym, letters with digits matching their title or file name) searches only them, and any other
question searches everything. Across resources (`RECOMMENDED`, a `RAG`'s `retrieval`):
candidates fused, then packed page-diversely (a chunk loses 0.3 of its normalised score per
better chunk already taken from its page) into a context budget of 4,000 tokens rather than a
fixed number of chunks.

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

from rag.core.retrieval_settings import RetrievalSettings
from rag.core.retrieve import retrieval_settings

__all__ = ["CONTEXT_TOKENS", "RECOMMENDED", "recommended_retrieval"]

#: The context budget of the default pipeline (word pieces of the embedding model).
CONTEXT_TOKENS = 4000
#: The default pipeline's cross-resource settings, as data (`RetrievalSettings` fields).
RECOMMENDED: dict[str, Any] = {
    "k": 64,                  # an upper bound only: the token budget decides how many chunks fit
    "fetch_k": 100,           # candidates per resource and query
    "fusion": "rrf",
    "page_diversity": 0.3,
    "max_tokens": CONTEXT_TOKENS,
    "token_counter": "auto",
}


def recommended_retrieval(**overrides: Any) -> RetrievalSettings:
    """The recommended `RetrievalSettings`, with `overrides` (any `RetrievalSettings` field) on top."""
    return retrieval_settings(**{**RECOMMENDED, **overrides})
