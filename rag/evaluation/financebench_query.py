"""Offline query analysis used by the benchmark pipelines: sub-queries.

`sub_queries` splits a long question into its sentences (a question often states the metric,
then defines it with the line items to look up), so each part is searched on its own. Document
routing is the library's `rag.retrieval.routing.DocumentRouter`.

Example:
    >>> sub_queries("What is the FY2019 DPO? DPO is 365 * payables / COGS.")[1]
    'DPO is 365 * payables / COGS.'
"""

from __future__ import annotations

from rag.base.text import split_sentences, tokenize

__all__ = ["sub_queries"]

_MIN_SUB_QUERY_TOKENS = 3


def sub_queries(question: str) -> list[str]:
    """The question followed by those of its sentences that say enough to search on their own.

    Example:
        >>> sub_queries("What is the FY2019 DPO? DPO is 365 * payables / COGS. Answer in days.")
        ['What is the FY2019 DPO? DPO is 365 * payables / COGS. Answer in days.', 'DPO is 365 * payables / COGS.']
    """
    sentences = split_sentences(question)
    if len(sentences) < 2:
        return [question]
    return [question] + [s for s in sentences if len(tokenize(s)) >= _MIN_SUB_QUERY_TOKENS]
