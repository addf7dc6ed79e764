"""The streaming event protocol, shared by `astream` users and the server's SSE endpoint.

`stream_events(chain_or_rag, question)` is an async generator of plain-dict events (JSON-ready:
only str / int / float / bool / None / list / dict), always in this order:

1. `{"type": "sources", "question": str, "standalone_question": str | None, "sources": [
   {"n", "source", "page", "resource", "doc_id", "chunk_index", "label", "score", "content"}, ...]}`
   once, as soon as retrieval is done (`n` is the number the answer cites as `[n]`);
2. `{"type": "token", "text": str}` zero or more times, answer text as the model produces it;
3. `{"type": "citations", "answer": str, "cited": [int], "invalid": [int], "sources": [...],
   "precision": float | None, "recall": float | None, "checks": [...]}`: the answer with
   dangling `[n]` removed, the cited sources and the checked citations;
4. `{"type": "support", "sentences": [{"sentence", "chunk", "score", "label", ...}],
   "summary": {"score", "supported", "partial", "unsupported", ...}, "flags": [str]}`;
5. `{"type": "usage", "usage": {"input_tokens", "output_tokens", "total_tokens", "calls",
   "cost", "models"}, "timings": {"retrieve": s, "generate": s, "checks": s}}`;
6. `{"type": "done", "answer": str, "cited", "refused", "confidence", "passage", "support", "flags",
   "invalid", "answerer", "report"}`: the final answer and its fields (`rag.base.answer.Answer.fields`),
   the same the chain's `invoke` returns: the generation chain hands its final `Answer` to the run
   (`ANSWER_SINK`), so streaming and invoking run one post-processing step.

It is async all the way: retrieval and generation run through `astream`, and the CPU-bound
post-checks (embedding the answer sentences) run in a worker thread, so concurrent requests
share one event loop. Errors propagate to the caller (the server turns them into an error event).

`chain_or_rag` is a `RAG`, an object with a `chain()` method (e.g. `ConversationalRAG`) or any
runnable whose streamed output has `context` (list of Documents) before `answer` (str pieces),
such as `RAG.chain()`; a `standalone_question` key is passed through in the sources event.

Example:
    >>> async def show(rag):                                       # doctest: +SKIP
    ...     async for event in stream_events(rag, "Where is Rome?"):
    ...         print(event["type"])
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.runnables import Runnable, RunnableConfig

from rag.base.errors import InputError
from rag.base.tracing import stage
from rag.base.answer import as_answer
from rag.checks.citations import source_map
from rag.checks.postprocess import finalise
from rag.generation.rag_with_source import ANSWER_SINK
from rag.models.usage import UsageTracker, with_tracker

__all__ = ["EVENT_TYPES", "answer_events", "stream_events"]

EVENT_TYPES = ("sources", "token", "citations", "support", "usage", "done")


def _runnable(chain_or_rag: Any) -> Runnable:
    if isinstance(chain_or_rag, Runnable):
        return chain_or_rag
    if callable(getattr(chain_or_rag, "chain", None)):
        return chain_or_rag.chain()
    raise InputError(f"stream_events takes a RAG, an object with .chain(), or a runnable; "
                     f"got {type(chain_or_rag).__name__}")


def _sources_event(question: str, standalone: str | None, context: list[Document]) -> dict[str, Any]:
    sources = [{**s, "score": _score(doc), "content": doc.page_content} for s, doc in zip(source_map(context), context)]
    return {"type": "sources", "question": question, "standalone_question": standalone, "sources": sources}


def _score(doc: Document) -> float | None:
    score = doc.metadata.get("score")
    return float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None


async def stream_events(chain_or_rag: Any, question: str | dict[str, Any], *, config: RunnableConfig | None = None,
                        embedding: Embeddings | str | None = "default",
                        threshold: float = 0.6) -> AsyncIterator[dict[str, Any]]:
    """Stream one answer as protocol events (see the module docstring for the order and fields).

    Args:
        chain_or_rag: a `RAG`, a `ConversationalRAG` (anything with `.chain()`), or a runnable.
        question: the question, or the chain's input dict (e.g. `{"question": ..., "history": [...]}`).
        config: the runnable config (callbacks, `configurable` retrieval settings, ...).
        embedding: embedding model for the support scores of a runnable that is not a `RAG` chain (a RAG's
            generation chain checks its own answer: `rag_chain_from_docs(..., checks_embedding=...)`).
        threshold: support score at which such a sentence counts as supported.
    """
    runnable = _runnable(chain_or_rag)
    tracker = UsageTracker()
    sink: list[Any] = []   # the generation chain hands its final Answer here (`ANSWER_SINK`)
    run_config = with_tracker(config, tracker)
    run_config = {**run_config, "configurable": {**(run_config.get("configurable") or {}), ANSWER_SINK: sink}}
    text = question if isinstance(question, str) else str((question or {}).get("question", ""))
    context: list[Document] | None = None
    standalone: str | None = None
    pieces: list[str] = []
    timings: dict[str, float] = {}
    start = time.perf_counter()
    generation_start: float | None = None

    async for chunk in runnable.astream(question, run_config):
        if not isinstance(chunk, dict):
            raise InputError(f"stream_events needs a chain that streams dicts with 'context' and 'answer'; "
                             f"got a {type(chunk).__name__} chunk")
        if "standalone_question" in chunk:
            standalone = chunk["standalone_question"]
        if "context" in chunk and context is None:
            context = list(chunk["context"] or [])
            timings["retrieve"] = round(time.perf_counter() - start, 4)
            generation_start = time.perf_counter()
            yield _sources_event(text, standalone, context)
        piece = chunk.get("answer")
        if isinstance(piece, str) and piece:
            if context is None:
                raise InputError("the chain streamed answer text before its context; stream_events needs the context first")
            pieces.append(piece)
            yield {"type": "token", "text": piece}
    if context is None:
        context = []
        yield _sources_event(text, standalone, context)
    timings["generate"] = round(time.perf_counter() - (generation_start or start), 4)

    answer = "".join(pieces)
    checks_start = time.perf_counter()
    with stage("checks", run_config, sentences=0) as current:  # a child run: tracers see the checks
        final = sink[-1] if sink else await asyncio.to_thread(   # a chain that is not a GenerationChain
            finalise, answer, standalone or text, context, embedding=embedding, threshold=threshold)
        current.attributes.update(sentences=len(final.support), flags=len(final.flags),
                                  citation_precision=final.report.get("precision"))
    timings["checks"] = round(time.perf_counter() - checks_start, 4)
    for event in answer_events(final, context):
        if event["type"] == "done":
            yield {"type": "usage", "usage": tracker.summary(), "timings": timings}
        yield event


def answer_events(answer: Any, context: list[Document]) -> list[dict[str, Any]]:
    """The closing events of one final answer: citations, support and done (the answer's fields)."""
    final = as_answer(answer)
    sources = [s for s in source_map(context) if s["n"] in set(final.cited)]
    return [{"type": "citations", "answer": final.text, **final.citation_fields(), "sources": sources},
            {"type": "support", "sentences": final.support, "summary": final.report.get("summary", {}),
             "flags": final.flags},
            {"type": "done", **final.fields()}]
