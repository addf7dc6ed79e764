"""JSON shapes of the HTTP API: sources, answers, errors, and server-sent events.

`POST /stream` sends the events of `rag.compose.streaming.stream_events` (sources, token...,
citations, support, usage, done; see that module), each encoded by `sse`; a failure after the
stream has started ends it with `{"type": "error", "error": {"type", "message"}}`. `POST /invoke`
returns the same source entries (`n`, `label`, `source`, `page`, `content`, ...) plus `metadata`.

Example:
    >>> sse({"type": "token", "text": "hi"})
    'event: token\\ndata: {"type": "token", "text": "hi"}\\n\\n'
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.documents import Document

from rag.base.answer import as_answer
from rag.checks.citations import cited_first, source_map

__all__ = ["checks_body", "error_body", "invoke_body", "sources_with_content", "sse"]

_OUTPUT_KEYS = ("question", "answer", "context")


def sse(event: Mapping[str, Any]) -> str:
    """Encode one event as a server-sent event (`event:` line + one JSON `data:` line)."""
    payload = json.dumps(event, ensure_ascii=False, default=str)
    return f"event: {event.get('type', 'message')}\ndata: {payload}\n\n"


def error_body(kind: str, message: str) -> dict[str, Any]:
    """The JSON error shape of every endpoint: `{"error": {"type": ..., "message": ...}}`."""
    return {"error": {"type": kind, "message": message}}


def sources_with_content(context: Sequence[Document]) -> list[dict[str, Any]]:
    """The protocol's numbered source entries, with the chunk text and its scalar metadata.

    Example:
        >>> doc = Document(page_content="x", metadata={"source": "a.pdf", "page": 0})
        >>> [s["label"] for s in sources_with_content([doc])]
        ['a.pdf, page 1']
    """

    return [{**entry, "content": doc.page_content, "metadata": _scalars(doc.metadata)}
            for entry, doc in zip(source_map(context), context, strict=True)]


def _scalars(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metadata.items() if isinstance(v, str | int | float | bool) or v is None}


def invoke_body(output: Mapping[str, Any]) -> dict[str, Any]:
    """The `/invoke` response for one chain output: the answer and its fields (`Answer.fields`: cited, refused,
    confidence, passage, support, flags, answerer, ...), the sources (cited first) and the extras."""

    context = list(output.get("context") or [])
    answer = as_answer(output.get("answer"))
    extras = {k: v for k, v in output.items() if k not in _OUTPUT_KEYS}
    sources = cited_first(sources_with_content(context), answer.cited)   # cited first, then retrieved but unused
    return {"question": output.get("question"), **answer.fields(), "sources": sources,
            "extras": json.loads(json.dumps(extras, default=str))}


def checks_body(output: Mapping[str, Any]) -> dict[str, Any]:
    """Citation and support checks of one answer (as in the stream's citations and support events): the
    report the chain's one post-processing step made (`rag.checks.postprocess.finalise`)."""

    answer = as_answer(output.get("answer"))
    return {"citations": answer.citation_fields(), "support": answer.support,
            "summary": answer.report.get("summary", {}), "flags": answer.flags}
