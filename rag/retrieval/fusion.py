"""Rank fusion: merge several scored result lists into one, keeping every score.

Two methods:

- ``"rrf"``, reciprocal rank fusion: ``sum_i w_i / (k + rank_i)`` with ranks from 1 and ``k=60``
  by default (Cormack et al.). Ignores score scales, so it suits lists from different retrievers.
- ``"convex"``, a normalised convex combination: each list's scores are min-max normalised to
  [0, 1] (a single hit gets 1), then ``sum_i w_i * norm_i`` with weights summing to 1; a document
  missing from a list gets 0 there.

Documents with equal fused scores are ordered by their rank in the first list, then the next, then by
`doc_key`. With ``shared_ties=True`` (what `HybridRetriever` passes for its engines' lists) hits with
equal scores in one list share the best rank among them: an engine's order between equal scores is
arbitrary (PostgreSQL and SQLite order two equal BM25 scores differently), so the fused order is then
the same whichever backend ranked the lists. Without it a list's order is its ranking, as a
retriever returned it.

Documents are identified by `doc_key` (``Document.id``, else ``doc_id``/``chunk_index`` metadata,
else the text), so the same chunk found twice is merged. The returned documents are copies whose
``metadata["score"]`` is the fused score and ``metadata["scores"]`` holds the score each list gave
it (``{"dense": 0.71, "bm25": 12.3, "rrf": 0.032}``) plus any scores the inputs already carried.

Example:
    >>> from langchain_core.documents import Document
    >>> a, b = Document(page_content="a"), Document(page_content="b")
    >>> fused = fuse({"dense": [(a, 0.9), (b, 0.5)], "bm25": [(b, 7.0)]}, method="rrf")
    >>> [(d.page_content, round(s, 4)) for d, s in fused]
    [('b', 0.0325), ('a', 0.0164)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from langchain_core.documents import Document

from rag.base.errors import ConfigError

__all__ = ["FUSION_METHODS", "doc_key", "documents_to_scored", "fuse", "shared_ranks", "with_scores"]

FUSION_METHODS = ("rrf", "convex")
FusionMethod = Literal["rrf", "convex"]
Scored = Sequence[tuple[Document, float]]


def doc_key(doc: Document) -> str:
    """A stable identity for a chunk: its id, else doc_id:chunk_index, else its text."""
    if doc.id:
        return f"id:{doc.id}"
    md = doc.metadata
    if "doc_id" in md and "chunk_index" in md:
        return f"chunk:{md['doc_id']}:{md['chunk_index']}"
    return f"text:{md.get('source', '')}:{doc.page_content}"


def with_scores(doc: Document, score: float, scores: Mapping[str, float] | None = None) -> Document:
    """A copy of `doc` with `metadata["score"]` set and `scores` merged into `metadata["scores"]`."""
    metadata = dict(doc.metadata)
    metadata["scores"] = {**(doc.metadata.get("scores") or {}), **(scores or {})}
    metadata["score"] = float(score)
    return Document(page_content=doc.page_content, metadata=metadata, id=doc.id)


def _check_weights(names: Sequence[str], weights: Mapping[str, float] | None) -> dict[str, float]:
    if weights is None:
        return {name: 1.0 for name in names}
    unknown = sorted(set(weights) - set(names))
    if unknown:
        raise ConfigError(f"fusion weights name unknown result lists {unknown}; valid: {', '.join(names)}")
    bad = {n: w for n, w in weights.items() if isinstance(w, bool) or not isinstance(w, int | float) or w < 0}
    if bad:
        raise ConfigError(f"fusion weights must be non-negative numbers, got {bad}")
    return {name: float(weights.get(name, 0.0)) for name in names}


def fuse(results: Mapping[str, Scored], *, method: FusionMethod = "rrf", k: int = 60,
         weights: Mapping[str, float] | None = None, top_k: int | None = None,
         shared_ties: bool = False) -> list[tuple[Document, float]]:
    """Fuse named result lists (each best first) into one list of (document, fused score), best first.

    Args:
        results: list name -> [(document, score)], each sorted best first.
        method: "rrf" or "convex".
        k: the RRF constant (ignored by "convex").
        weights: per-list weights (default 1 each for RRF, equal shares for convex; convex weights
            are rescaled to sum to 1). A list left out of `weights` gets weight 0.
        top_k: keep only the best `top_k`.
        shared_ties: hits of equal score in one list share a rank (for lists whose order between equal
            scores is the engine's accident, not a ranking).
    """
    if method not in FUSION_METHODS:
        raise ConfigError(f"unknown fusion method {method!r}; valid: {', '.join(FUSION_METHODS)}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ConfigError(f"the RRF constant k must be a non-negative integer, got {k!r}")
    names = list(results)
    w = _check_weights(names, weights)
    if method == "convex":
        total = sum(w.values())
        if total <= 0:
            raise ConfigError(f"convex fusion needs a positive weight for at least one list, got {weights}")
        w = {name: value / total for name, value in w.items()}
    fused: dict[str, float] = {}
    docs: dict[str, Document] = {}
    raw: dict[str, dict[str, float]] = {}
    ranks: dict[str, list[float]] = {}
    for position, name in enumerate(names):
        hits = list(results[name])
        shared = shared_ranks([s for _, s in hits]) if shared_ties else list(range(1, len(hits) + 1))
        contributions = [1.0 / (k + rank) for rank in shared] if method == "rrf" else minmax([s for _, s in hits])
        for (doc, score), value, rank in zip(hits, contributions, shared, strict=True):
            key = doc_key(doc)
            if key in raw and name in raw[key]:
                continue  # a list that repeats a chunk counts its best rank only
            docs.setdefault(key, doc)
            raw.setdefault(key, {})[name] = float(score)
            ranks.setdefault(key, [float("inf")] * len(names))[position] = rank
            fused[key] = fused.get(key, 0.0) + w[name] * value
    order = sorted(fused, key=lambda key: (-fused[key], ranks[key], key))
    if top_k is not None:
        order = order[:top_k]
    return [(with_scores(docs[key], fused[key], {**raw[key], method: fused[key]}), fused[key]) for key in order]


def shared_ranks(scores: Sequence[float]) -> list[int]:
    """Ranks from 1 for a list sorted best first, equal scores sharing the best rank among them.

    Example:
        >>> shared_ranks([0.9, 0.5, 0.5, 0.1])
        [1, 2, 2, 4]
    """
    out: list[int] = []
    for i, score in enumerate(scores):
        out.append(out[-1] if i and score == scores[i - 1] else i + 1)
    return out


def minmax(scores: Sequence[float]) -> list[float]:
    """Scores scaled to 0..1 (all 1.0 when they are equal).

    Example:
        >>> minmax([2.0, 4.0, 3.0])
        [0.0, 1.0, 0.5]
    """
    scores = list(scores)
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi - lo <= 1e-12:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]


def documents_to_scored(docs: Sequence[Document], *, name: str | None = None) -> list[tuple[Document, Any]]:
    """Pair documents with `metadata["scores"][name]` (or `metadata["score"]`, or a rank-based score)."""
    out = []
    for rank, doc in enumerate(docs):
        scores = doc.metadata.get("scores") or {}
        score = scores.get(name) if name else None
        if score is None:
            score = doc.metadata.get("score", -float(rank))
        out.append((doc, float(score)))
    return out
