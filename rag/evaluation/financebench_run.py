"""Run retrieval configurations over FinanceBench questions and score them.

A configuration is anything with a `name`, a `description` and a `retrieve(question, doc_name=...)`
method returning a `Retrieval`: the ranked chunks (for hit@k and MRR) and the final context (for
the headline metric). `doc_name` is the single-document filter, or None for the shared store.

Metrics, per setting, averaged over questions:

- `context_hit`: the final context, capped at the token budget, contains a gold evidence page;
- `hit@1`, `hit@5`, `mrr`: by chunk, a chunk counts when its page is a gold evidence page
  (`rag.evaluation.metrics`);
- `context_tokens`: mean tokens of the final context.

Example:
    >>> report = run_benchmark(data, [config], settings=("single", "shared"))   # doctest: +SKIP
    >>> report.results["single"][config.name]["context_hit"]                     # doctest: +SKIP
    0.97
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from langchain_core.documents import Document

from rag.base.errors import ConfigError
from rag.base.result import RAGResult
from rag.evaluation.financebench import FinanceBenchData, Question
from rag.evaluation.metrics import hit_rate, mrr

__all__ = [
    "SETTINGS",
    "BenchReport",
    "Configuration",
    "Retrieval",
    "cap_context",
    "document_pages",
    "estimate_tokens",
    "ranked_documents",
    "run_benchmark",
    "score_question",
]

#: single: search only the question's filing (a doc_name filter); shared: all filings, no filter.
SETTINGS = ("single", "shared")
DEFAULT_BUDGET = 4000
#: ranked chunks kept per question for hit@k and MRR
RANKED = 50


def estimate_tokens(text: str) -> int:
    """Tokens of `text` for budgeting: one per four characters, the usual rule for English.

    Example:
        >>> estimate_tokens("x" * 1000)
        250
    """
    return (len(text) + 3) // 4


@dataclass
class Retrieval:
    """What one configuration retrieved for one question."""

    ranked: list[Document]          # chunks, best first
    context: list[Document]         # the context handed to the generator, within the budget
    extras: dict[str, Any] = field(default_factory=dict)


class Configuration(Protocol):
    """A retrieval configuration under test."""

    name: str
    description: str

    def retrieve(self, question: str, *, doc_name: str | None) -> Retrieval:
        """Retrieve for `question`, from the filing `doc_name` only, or from all filings when None."""
        ...


def ranked_documents(result: RAGResult, *, limit: int = RANKED) -> list[Document]:
    """The first `limit` candidates of `rag.retrieve`'s last ranking stage (before the context is assembled), best first."""
    stage = next(reversed(result.stages), None)
    return [] if stage is None else [c.document for c in result.stages[stage][:limit]]


def document_pages(doc: Document) -> set[tuple[str, int]]:
    """The (doc_name, zero-based page) pairs a chunk or merged segment covers.

    A merged segment lists its pages in `metadata["pages"]`; a chunk has one `metadata["page"]`.

    Example:
        >>> sorted(document_pages(Document(page_content="x", metadata={"doc_name": "A", "pages": [3, 4]})))
        [('A', 3), ('A', 4)]
    """
    name = str(doc.metadata.get("doc_name", ""))
    pages = doc.metadata.get("pages")
    if pages is None:
        page = doc.metadata.get("page")
        pages = [] if page is None else [page]
    return {(name, int(p)) for p in pages}


def cap_context(context: Sequence[Document], *, budget: int = DEFAULT_BUDGET,
                count: Callable[[str], int] = estimate_tokens) -> list[Document]:
    """The longest prefix of `context` within `budget` tokens; a too-long document is cut to fit.

    This is the benchmark's own guard: a configuration that returns more than the budget is
    judged on what fits, so no configuration gains from a larger context.

    Example:
        >>> docs = [Document(page_content="a" * 400), Document(page_content="b" * 400)]
        >>> [len(d.page_content) for d in cap_context(docs, budget=150)]
        [400, 200]
    """
    out: list[Document] = []
    used = 0
    for doc in context:
        tokens = count(doc.page_content)
        if used + tokens <= budget:
            out.append(doc)
            used += tokens
            continue
        room = budget - used
        if room > 0:
            # Cut by characters proportionally; the pages kept are those of the kept text only
            # when the document says where its pages start (metadata["page_starts"]).
            keep = int(len(doc.page_content) * room / tokens)
            while keep > 0 and count(doc.page_content[:keep]) > room:
                keep -= 1
            if keep > 0:
                out.append(_truncate(doc, keep))
        break
    return out


def _truncate(doc: Document, keep: int) -> Document:
    meta = dict(doc.metadata)
    starts = meta.get("page_starts")
    if starts is not None and meta.get("pages") is not None:
        meta["pages"] = [p for p, s in zip(meta["pages"], starts, strict=True) if s < keep]
        meta["page_starts"] = [s for s in starts if s < keep]
    return Document(page_content=doc.page_content[:keep], metadata=meta)


def score_question(question: Question, retrieval: Retrieval, *, budget: int = DEFAULT_BUDGET,
                   count: Callable[[str], int] = estimate_tokens) -> dict[str, float]:
    """Score one retrieval: context hit within the budget, chunk hit@1/@5, MRR, context tokens."""

    gold = question.evidence_pages
    context = cap_context(retrieval.context, budget=budget, count=count)
    context_hit = any(document_pages(d) & gold for d in context)
    ranks = [bool(document_pages(d) & gold) for d in retrieval.ranked]
    ids = list(range(len(ranks)))
    relevant = {i for i, hit in enumerate(ranks) if hit}
    return {
        "context_hit": float(context_hit),
        "hit@1": hit_rate(ids, relevant, k=1) if ids else 0.0,
        "hit@5": hit_rate(ids, relevant, k=5) if ids else 0.0,
        "mrr": mrr(ids, relevant) if ids else 0.0,
        "context_tokens": float(sum(count(d.page_content) for d in context)),
    }


@dataclass
class BenchReport:
    """Scores of every configuration in every setting, and per-question outcomes."""

    results: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)   # setting -> config -> metric
    per_question: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # setting/config -> id -> hit
    descriptions: dict[str, str] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"meta": self.meta, "descriptions": self.descriptions, "results": self.results,
                "per_question": self.per_question}


def run_benchmark(data: FinanceBenchData, configs: Sequence[Configuration], *,
                  settings: Iterable[str] = SETTINGS, budget: int = DEFAULT_BUDGET,
                  count: Callable[[str], int] = estimate_tokens,
                  progress: Callable[[str], None] | None = None) -> BenchReport:
    """Run every configuration on every question in every setting and average the scores.

    Raises:
        ConfigError: an unknown setting, or two configurations with the same name.
    """
    settings = list(settings)
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        raise ConfigError(f"unknown setting(s) {unknown}; valid: {', '.join(SETTINGS)}")
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise ConfigError(f"configuration names must be unique, got {names}")
    report = BenchReport(descriptions={c.name: c.description for c in configs},
                         meta={"questions": len(data.questions), "documents": len(data.documents),
                               "budget_tokens": budget, "settings": settings})
    for setting in settings:
        report.results[setting] = {}
        for config in configs:
            started = time.perf_counter()
            rows = {}
            for q in data.questions:
                retrieval = config.retrieve(q.question, doc_name=q.doc_name if setting == "single" else None)
                rows[q.id] = score_question(q, retrieval, budget=budget, count=count)
            elapsed = time.perf_counter() - started
            n = len(rows) or 1
            metrics = {key: sum(r[key] for r in rows.values()) / n for key in next(iter(rows.values()))}
            metrics["seconds_per_query"] = elapsed / n
            report.results[setting][config.name] = metrics
            report.per_question[f"{setting}/{config.name}"] = {qid: r["context_hit"] for qid, r in rows.items()}
            if progress is not None:
                progress(f"{setting:6s} {config.name:28s} context hit {metrics['context_hit']:.1%}  "
                         f"hit@1 {metrics['hit@1']:.1%}  hit@5 {metrics['hit@5']:.1%}  MRR {metrics['mrr']:.3f}  "
                         f"tokens {metrics['context_tokens']:.0f}  ({elapsed / n * 1000:.0f} ms/q)")
    return report
