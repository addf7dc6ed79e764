"""Turning a RAG run into JSON for the HTTP API: source lists, citations and server-sent events.

The streaming protocol (shared with `rag.generation.streaming`) is a sequence of events::

    {"type": "sources",   "sources": [{"id": 1, "label": "a.md", ...}, ...]}
    {"type": "token",     "text": "Paris"}                 (many)
    {"type": "citations", "citations": [{"id": 1, ...}], "invalid": [7]}
    {"type": "support",   "sentences": [...]}              (when support scoring is available)
    {"type": "usage",     "usage": {...}}
    {"type": "done",      "answer": "..."}

and, if something fails midway, `{"type": "error", "error": {"type": ..., "message": ...}}`.

Example:
    >>> sse({"type": "token", "text": "hi"})
    'event: token\\ndata: {"type": "token", "text": "hi"}\\n\\n'
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig

__all__ = ["citations", "error_body", "rag_events", "source_dict", "sse"]

_CITATION = re.compile(r"\[(\d{1,4})\]")
MAX_SOURCE_CHARS = 4000


def sse(event: dict[str, Any]) -> str:
    """Encode one event as a server-sent event (`event:` line + one JSON `data:` line)."""
    payload = json.dumps(event, ensure_ascii=False, default=str)
    return f"event: {event.get('type', 'message')}\ndata: {payload}\n\n"


def error_body(kind: str, message: str) -> dict[str, Any]:
    """The JSON error shape of every endpoint: `{"error": {"type": ..., "message": ...}}`."""
    return {"error": {"type": kind, "message": message}}


def source_dict(number: int, doc: Document) -> dict[str, Any]:
    """One numbered source as JSON: label (file, page), location fields and the text."""
    from rag.generation.prompts import source_label

    md = doc.metadata
    page = md.get("page")
    return {
        "id": number,
        "label": source_label(doc),
        "source": md.get("source"),
        "page": page + 1 if isinstance(page, int) and not isinstance(page, bool) else None,
        "resource": md.get("resource"),
        "text": doc.page_content[:MAX_SOURCE_CHARS],
        "metadata": {k: v for k, v in md.items() if isinstance(v, str | int | float | bool) or v is None},
    }


def citations(answer: str, sources: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The `[n]` markers of an answer resolved to sources; markers that point at nothing are listed apart.

    Example:
        >>> citations("Paris [1]. Rome [3].", [{"id": 1, "label": "a.md"}])
        {'citations': [{'id': 1, 'label': 'a.md'}], 'invalid': [3]}
    """
    by_id = {s["id"]: s for s in sources}
    cited: list[int] = []
    for match in _CITATION.finditer(answer):
        n = int(match.group(1))
        if n not in cited:
            cited.append(n)
    return {"citations": [{"id": n, "label": by_id[n]["label"]} for n in cited if n in by_id],
            "invalid": [n for n in cited if n not in by_id]}


async def rag_events(rag: Any, question: str, config: RunnableConfig) -> AsyncIterator[dict[str, Any]]:
    """Run retrieval then stream generation, yielding protocol events (see the module docstring).

    Args:
        rag: a `RAG`; its `resources_retrieval_chain` and `generation_chain` are used as they are.
        question: the question.
        config: the request's config, holding `configurable["retrieval_chain"]`.
    """
    docs = await rag.resources_retrieval_chain.ainvoke(question, config)
    sources = [source_dict(i, d) for i, d in enumerate(docs, start=1)]
    yield {"type": "sources", "sources": sources}
    parts: list[str] = []
    async for chunk in rag.generation_chain.astream({"question": question, "context": docs}, config):
        text = chunk if isinstance(chunk, str) else str(getattr(chunk, "content", chunk))
        if text:
            parts.append(text)
            yield {"type": "token", "text": text}
    answer = "".join(parts)
    yield {"type": "citations", **citations(answer, sources)}
    yield {"type": "usage", "usage": {}}
    yield {"type": "done", "answer": answer}
