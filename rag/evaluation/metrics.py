"""Ranking metrics in the BEIR / trec_eval convention: `hit_rate`, `mrr`, `ndcg_at_k`, `recall_at_k`.

Each function scores one query: `retrieved` is the ranked list of ids (best first; duplicates
after the first occurrence are ignored), `relevant` the gold ids, either a collection (binary
relevance) or a mapping id -> graded relevance (0 means not relevant). `mean_metrics` averages over
queries. nDCG uses linear gain, ``rel / log2(rank + 1)``, normalised by the ideal ordering of all
relevant ids cut at k, as trec_eval's ``ndcg_cut`` that BEIR reports.

Example:
    >>> hit_rate(["a", "b", "c"], {"c"}, k=2)
    0.0
    >>> mrr(["a", "b", "c"], {"c"})
    0.3333333333333333
    >>> recall_at_k(["a", "b", "c"], {"a", "z"}, k=3)
    0.5
    >>> round(ndcg_at_k(["a", "b"], {"b"}, k=2), 4)
    0.6309
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Mapping, Sequence

from rag.base.errors import ConfigError

__all__ = ["hit_rate", "mean_metrics", "mrr", "ndcg_at_k", "recall_at_k"]

Relevant = Collection[Hashable] | Mapping[Hashable, float]


def _grades(relevant: Relevant) -> dict[Hashable, float]:
    if isinstance(relevant, Mapping):
        return {key: float(g) for key, g in relevant.items() if g > 0}
    if isinstance(relevant, str):
        raise ConfigError("relevant must be a collection of ids, not a single string; wrap it in a set")
    return {key: 1.0 for key in relevant}


def _ranked(retrieved: Sequence[Hashable], k: int | None) -> list[Hashable]:
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ConfigError(f"k must be a positive integer or None, got {k!r}")
    seen: set[Hashable] = set()
    out = []
    for item in retrieved:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out if k is None else out[:k]


def hit_rate(retrieved: Sequence[Hashable], relevant: Relevant, *, k: int | None = None) -> float:
    """1.0 if any relevant id is in the top k (all of `retrieved` when k is None), else 0.0."""
    grades = _grades(relevant)
    return float(any(item in grades for item in _ranked(retrieved, k)))


def mrr(retrieved: Sequence[Hashable], relevant: Relevant, *, k: int | None = None) -> float:
    """Reciprocal rank of the first relevant id within the top k; 0.0 when there is none."""
    grades = _grades(relevant)
    for rank, item in enumerate(_ranked(retrieved, k), start=1):
        if item in grades:
            return 1.0 / rank
    return 0.0


def recall_at_k(retrieved: Sequence[Hashable], relevant: Relevant, *, k: int) -> float:
    """Share of the relevant ids found in the top k; 0.0 when nothing is relevant."""
    grades = _grades(relevant)
    if not grades:
        return 0.0
    return sum(1 for item in _ranked(retrieved, k) if item in grades) / len(grades)


def ndcg_at_k(retrieved: Sequence[Hashable], relevant: Relevant, *, k: int) -> float:
    """Normalised discounted cumulative gain at k (linear gain); 0.0 when nothing is relevant."""
    grades = _grades(relevant)
    dcg = sum(grades.get(item, 0.0) / math.log2(rank + 1)
              for rank, item in enumerate(_ranked(retrieved, k), start=1))
    ideal = sorted(grades.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, start=1))
    return dcg / idcg if idcg else 0.0


def mean_metrics(runs: Sequence[Sequence[Hashable]], qrels: Sequence[Relevant], *,
                 ks: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
    """Average every metric over queries: ``hit@k``, ``recall@k``, ``ndcg@k`` for each k, and ``mrr``.

    Example:
        >>> mean_metrics([["a", "b"], ["c"]], [{"b"}, {"x"}], ks=(1,))
        {'mrr': 0.25, 'hit@1': 0.0, 'recall@1': 0.0, 'ndcg@1': 0.0}
    """
    if len(runs) != len(qrels):
        raise ConfigError(f"got {len(runs)} rankings but {len(qrels)} relevance sets; they must match")
    n = len(runs) or 1
    out = {"mrr": sum(mrr(r, q) for r, q in zip(runs, qrels, strict=True)) / n}
    for k in ks:
        out[f"hit@{k}"] = sum(hit_rate(r, q, k=k) for r, q in zip(runs, qrels, strict=True)) / n
        out[f"recall@{k}"] = sum(recall_at_k(r, q, k=k) for r, q in zip(runs, qrels, strict=True)) / n
        out[f"ndcg@{k}"] = sum(ndcg_at_k(r, q, k=k) for r, q in zip(runs, qrels, strict=True)) / n
    return out
