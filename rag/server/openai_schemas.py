"""Request and response shapes of the OpenAI-compatible routes (`/v1/chat/completions`, `/v1/models`).

The request is OpenAI's chat-completions body. Fields of OpenAI's API that have no meaning for
a RAG pipeline (`temperature`, `tools`, `seed`, ...) are accepted and ignored, so any client
works; `n` must be 1. One extension field, `rag`, sets retrieval per request (strict: unknown
keys are refused with the valid ones):

    {"model": "rag", "messages": [...], "rag": {"k": 4, "filter": {"year": 2024},
                                               "retrieval_chain": {"docs": {"search_kwargs": {"k": 2}}}}}

The answer keeps its `[n]` markers. The sources travel in the extension field `rag` of the
message (non-streaming: `choices[0].message.rag`) or of the last chunk's delta (streaming:
`choices[0].delta.rag`, the chunk whose `finish_reason` is set):

    {"standalone_question": str, "sources": [{"n", "id", "source", "page", "resource", "score",
      "label", "content", "cited", "citation_checks": [...], "support": [...]}],
     "cited": [int], "invalid": [int], "citations": {"precision", "recall"}, "support": [...],
     "summary": {...}, "flags": [str], "usage": {...}, "timings": {...}}

`usage` (OpenAI's `prompt_tokens` / `completion_tokens` / `total_tokens`) is in the response
and in that last chunk. When the answer model reports no token counts (the offline extractive
answerer), they are estimated from the text and `rag.usage.estimated` is true.

Example:
    >>> req = ChatCompletionRequest(model="rag", messages=[{"role": "user", "content": "Hi?"}])
    >>> question_and_history(req.messages)
    ('Hi?', [])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rag.base.errors import InputError, short_repr
from rag.base.text import check_unicode
from rag.server.schemas import ResourceSettings

__all__ = ["ROLES", "ChatCompletionRequest", "ChatMessage", "RagOptions", "openai_error", "question_and_history",
           "rag_extension"]

#: The message roles accepted; `tool` and `function` messages have no place in a RAG conversation.
ROLES = ("system", "developer", "user", "assistant")


class RagOptions(BaseModel):
    """The `rag` extension of a request: retrieval settings for this request only.

    Attributes:
        k: chunks in the context (the request's `k`, as `POST /invoke`'s; capped by the server's `max_k`).
        filter: a portable metadata filter for every resource (ANDed with the tenant filter).
        retrieval_chain: per-resource `{"search_kwargs": {"k", "filter"}}`; wins over `k` / `filter`.
    """

    model_config = ConfigDict(extra="forbid")

    k: int | None = Field(default=None, ge=1)
    filter: dict[str, Any] | None = None
    retrieval_chain: dict[str, ResourceSettings] | None = None


class ChatMessage(BaseModel):
    """One message; `content` is a string or a list of `{"type": "text", "text": ...}` parts."""

    model_config = ConfigDict(extra="ignore")

    role: str = Field(json_schema_extra={"enum": list(ROLES)})   # documented; checked with a clear message
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None

    def text(self, index: int) -> str:
        """The message's text; non-text parts (images, audio) and text that is not valid Unicode are refused."""
        if self.content is None or isinstance(self.content, str):
            return check_unicode(self.content or "", f"messages[{index}].content")
        pieces = []
        for part in self.content:
            if part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise InputError(f"messages[{index}]: content part of type {short_repr(part.get('type'))} is not "
                                 "supported; valid: text")
            pieces.append(check_unicode(part["text"], f"messages[{index}].content"))
        return "\n".join(pieces)


class ChatCompletionRequest(BaseModel):
    """OpenAI's chat-completions body plus the `rag` extension (see the module docstring)."""

    model_config = ConfigDict(extra="ignore")

    model: str = Field(examples=["rag"])
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    n: int = Field(default=1, ge=1, le=1)
    rag: RagOptions = Field(default_factory=RagOptions)


def question_and_history(messages: Sequence[ChatMessage], *,
                         max_chars: int | None = None) -> tuple[str, list[tuple[str, str]]]:
    """The last user message, and the user / assistant turns before it as `(role, text)` pairs.

    System and developer messages are accepted but not passed on: the RAG's own prompt governs
    the answer, and the condensing step must not take orders from the conversation.

    Args:
        messages: the request's messages.
        max_chars: the most characters the whole conversation may hold (every message's text,
            whatever its role), so a long history cannot carry what the question limit refuses.

    Raises:
        InputError: an unsupported role, text that is not valid Unicode, a conversation over
            `max_chars`, or the last message is not the user's.
    """
    for i, message in enumerate(messages):
        if message.role not in ROLES:
            raise InputError(f"messages[{i}].role {message.role!r} is not supported; valid: {', '.join(ROLES)}")
    texts = [m.text(i) for i, m in enumerate(messages)]
    total = sum(len(t) for t in texts)
    if max_chars is not None and total > max_chars:
        raise InputError(f"the conversation has {total:,} characters in {len(messages)} messages; the limit is "
                         f"{max_chars:,} (server.max_conversation_chars): send fewer or shorter messages")
    if messages[-1].role != "user":
        raise InputError(f"the last message must be the user's (role 'user'); got {messages[-1].role!r}")
    history = [("human" if m.role == "user" else "ai", texts[i]) for i, m in enumerate(messages[:-1])
               if m.role in ("user", "assistant")]
    return texts[-1], history


def openai_error(message: str, *, kind: str, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error body: `{"error": {"message", "type", "param", "code"}}`.

    Example:
        >>> openai_error("no such model", kind="invalid_request_error", code="model_not_found")["error"]["code"]
        'model_not_found'
    """
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def rag_extension(events: Mapping[str, Mapping[str, Any]], usage: Mapping[str, Any]) -> dict[str, Any]:
    """The `rag` field of the answer from the protocol events of `stream_events` (by type)."""
    sources_event, citations, support = events["sources"], events["citations"], events["support"]
    checks = citations.get("checks") or []
    cited = set(citations.get("cited") or [])
    sources = []
    for source in sources_event["sources"]:
        n = source["n"]
        sources.append({"n": n, "id": source.get("doc_id"), "source": source.get("source"), "page": source.get("page"),
                        "resource": source.get("resource"), "score": source.get("score"),
                        "label": source.get("label"), "chunk_index": source.get("chunk_index"),
                        "content": source.get("content"), "cited": n in cited,
                        "citation_checks": [c for c in checks if n in (c.get("citations") or [])],
                        "support": [s for s in support["sentences"] if s.get("chunk") == n]})
    sources.sort(key=lambda s: not s["cited"])   # the cited sources first, then those retrieved but not used
    return {"standalone_question": sources_event.get("standalone_question"), "sources": sources,
            "cited": sorted(cited), "invalid": citations.get("invalid") or [],
            "citations": {"precision": citations.get("precision"), "recall": citations.get("recall"),
                          "checks": checks},
            "support": support["sentences"], "summary": support["summary"], "flags": support["flags"],
            **{key: events["done"].get(key) for key in ("refused", "confidence", "passage", "answerer")},
            "usage": dict(usage), "timings": events["usage"].get("timings", {})}

