"""Neighbour expansion: widen each hit to its neighbouring chunks, merging windows that overlap.

A hit at ``chunk_index = i`` becomes the window ``i - window .. i + window`` of its document
(``window=2`` as in the tutorial). Windows of the same document that overlap or touch are merged
into one, so no chunk's text appears twice; the chunks of a window are read from a chunk source
(`rag.indexing.neighbours`) and joined in chunk order by `merge_chunk_texts`, which also removes
the characters that consecutive chunks share when the splitter used an overlap:

1. by offsets when both chunks carry ``start_index`` (``add_start_index=True`` in LangChain
   splitters): the next chunk is cut at ``prev.start_index + len(prev) - next.start_index``;
2. otherwise by the longest suffix of one chunk that begins the next (at least 8 characters, so
   an accidental one-word match is not removed).

Each window is one document: metadata of its first chunk plus ``chunk_start`` / ``chunk_end``
(exclusive), ``chunk_indices``, ``pages`` (distinct ``page`` values, in order), ``hits`` (the
chunk indices that were retrieved) and the best hit's ``score`` / ``scores``. Windows come in the
order of their best hit. Hits without ``doc_id`` / ``chunk_index`` pass through unchanged.

Example:
    >>> from langchain_core.documents import Document
    >>> from rag.retrieval.lexical import BM25Index
    >>> chunks = [Document(page_content=f"s{i}.", metadata={"doc_id": "d", "chunk_index": i}) for i in range(8)]
    >>> source = BM25Index.from_documents(chunks)
    >>> [d.page_content for d in expand_neighbours([chunks[2], chunks[4]], source, window=1)]
    ['s1.\\ns2.\\ns3.\\ns4.\\ns5.']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document

from rag.base.errors import ConfigError
from rag.base.filters import matches_canonical, validate_filter
from rag.indexing.neighbours import chunk_range

__all__ = ["expand_neighbours", "merge_chunk_texts", "merge_windows"]

MIN_TEXT_OVERLAP = 8


def _overlap(prev: Document, nxt: Document) -> int:
    a, b = prev.metadata.get("start_index"), nxt.metadata.get("start_index")
    if isinstance(a, int) and isinstance(b, int) and b >= a:
        return max(0, min(a + len(prev.page_content) - b, len(nxt.page_content)))
    left, right = prev.page_content, nxt.page_content
    for size in range(min(len(left), len(right)), MIN_TEXT_OVERLAP - 1, -1):
        if left.endswith(right[:size]):
            return size
    return 0


def merge_chunk_texts(chunks: Sequence[Document], *, separator: str = "\n") -> str:
    """Join consecutive chunks of one document, dropping the text each shares with the previous one."""
    parts: list[str] = []
    for i, chunk in enumerate(chunks):
        if i == 0:
            parts.append(chunk.page_content)
            continue
        cut = _overlap(chunks[i - 1], chunk)
        parts.append(chunk.page_content[cut:] if cut else separator + chunk.page_content)
    return "".join(parts)


def merge_windows(windows: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merge half-open [start, end) intervals that overlap or touch.

    Example:
        >>> merge_windows([(5, 8), (0, 3), (2, 5), (10, 11)])
        [(0, 8), (10, 11)]
    """
    merged: list[list[int]] = []
    for start, end in sorted(windows):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def window_document(chunks: Sequence[Document], *, hits: Sequence[Document] = ()) -> Document:
    """One document for consecutive chunks of one document (metadata as in the module docstring)."""
    first = chunks[0]
    metadata: dict[str, Any] = {k: v for k, v in first.metadata.items() if k not in ("score", "scores")}
    indices = [c.metadata["chunk_index"] for c in chunks]
    pages = list(dict.fromkeys(c.metadata["page"] for c in chunks if c.metadata.get("page") is not None))
    metadata.update(chunk_start=indices[0], chunk_end=indices[-1] + 1, chunk_indices=indices, pages=pages,
                    hits=sorted({h.metadata["chunk_index"] for h in hits}))
    if hits:
        best = max(hits, key=lambda h: h.metadata.get("score", float("-inf")))
        if "score" in best.metadata:
            metadata["score"] = best.metadata["score"]
        if "scores" in best.metadata:
            metadata["scores"] = dict(best.metadata["scores"])
    return Document(page_content=merge_chunk_texts(chunks), metadata=metadata)


def expand_neighbours(hits: Sequence[Document], source: Any, *, window: int = 2,
                      filter: dict[str, Any] | None = None) -> list[Document]:
    """Widen every hit to +-`window` neighbouring chunks, merging overlapping windows per document.

    Args:
        hits: retrieved chunks, best first (with ``doc_id`` and ``chunk_index`` metadata).
        source: where to read neighbours: Chroma, PartitionedChroma or BM25Index.
        window: neighbours on each side.
        filter: the search's portable filter: only neighbours matching it are read (hits that do
            not match it are dropped), so expansion never widens what the search was allowed to see.
    """
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise ConfigError(f"window must be a non-negative integer, got {window!r}")
    canon = validate_filter(filter)
    if canon is not None:
        hits = [h for h in hits if matches_canonical(h.metadata, canon)]
    rank_of = {id(h): i for i, h in reversed(list(enumerate(hits)))}
    by_doc: dict[str, list[Document]] = {}
    order: list[tuple[str, Any]] = []   # ("doc", doc_id) or ("raw", document), in best-hit order
    for hit in hits:
        md = hit.metadata
        if isinstance(md.get("chunk_index"), int) and md.get("doc_id") is not None:
            if md["doc_id"] not in by_doc:
                order.append(("doc", md["doc_id"]))
            by_doc.setdefault(md["doc_id"], []).append(hit)
        else:
            order.append(("raw", hit))
    windows: dict[str, list[tuple[Document, int]]] = {}
    for doc_id, doc_hits in by_doc.items():
        spans = merge_windows([(max(0, h.metadata["chunk_index"] - window), h.metadata["chunk_index"] + window + 1)
                               for h in doc_hits])
        for start, end in spans:
            chunks = chunk_range(source, doc_id, start, end, filter=canon)
            inside = [h for h in doc_hits if start <= h.metadata["chunk_index"] < end]
            if not chunks:
                chunks = sorted(inside, key=lambda h: h.metadata["chunk_index"])
            rank = min(rank_of[id(h)] for h in inside)
            windows.setdefault(doc_id, []).append((window_document(chunks, hits=inside), rank))
    out: list[tuple[Document, int]] = []
    for kind, item in order:
        if kind == "raw":
            out.append((item, rank_of[id(item)]))
        else:
            out.extend(windows.get(item, []))
    return [doc for doc, _ in sorted(out, key=lambda pair: pair[1])]

