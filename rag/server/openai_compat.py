"""OpenAI-compatible routes of `rag serve`: `POST /v1/chat/completions` and `GET /v1/models`.

```
GET  /v1/models             the configured pipelines, one model id each
POST /v1/chat/completions   messages -> standalone question -> retrieve -> answer [n] -> checks
                            stream: true -> SSE chunks, the last one with usage and the sources, then [DONE]
```

The messages go through `ConversationalRAG`: the last user message and the turns before it
become one standalone question (exposed as `rag.standalone_question`), which is retrieved and
answered by the RAG's own pipeline. Request and response shapes, the `rag` extension field and
usage are described in `rag.server.openai_schemas`. Both modes run the same event stream as
`POST /stream` (`rag.compose.streaming.stream_events`).

The routes share the rest of the API's bearer token, tenant filter and limits; their errors have
OpenAI's shape (`{"error": {"message", "type", "param", "code"}}`, `code` being the same kind
as elsewhere: `invalid_setting`, `filter_error`, ...), so OpenAI's SDKs raise their usual
exceptions. An error after a stream has started is sent as a `data: {"error": ...}` chunk.

Example:
    >>> from openai import OpenAI                                                 # doctest: +SKIP
    >>> client = OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="<token>")   # doctest: +SKIP
    >>> client.chat.completions.create(model="rag", messages=[{"role": "user", "content": "Hi?"}])  # doctest: +SKIP
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any, ClassVar

from fastapi import APIRouter, Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.routing import APIRoute
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import get_callback_manager_for_config
from pydantic import Field, create_model
from starlette.exceptions import HTTPException as StarletteHTTPException

from rag.base.acl import Principal
from rag.base.errors import ConfigError
from rag.base.tracing import tracing_callbacks
from rag.compose.chat import ConversationalRAG
from rag.compose.streaming import stream_events
from rag.config.models import ServerConfig
from rag.retrieval.budget import TokenCounter
from rag.server.audit import audit_sources, document_ids, trace_metadata
from rag.server.errors import classify
from rag.server.openai_schemas import (
    ChatCompletionRequest,
    RagOptions,
    openai_error,
    question_and_history,
    rag_extension,
)
from rag.server.paths import SourcePaths
from rag.server.routes import access_configurable
from rag.server.schemas import QueryRequest, request_configurable

__all__ = ["OpenAIRoute", "openai_router"]

_OWNER = "rag"
_HTTP_KINDS = {401: ("authentication_error", "unauthorized"), 403: ("permission_error", "forbidden"),
               404: ("not_found_error", "not_found"),
               405: ("invalid_request_error", "method_not_allowed")}


def _validation_error(exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        return JSONResponse(openai_error("the request body is not valid JSON", kind="invalid_request_error",
                                         code="malformed_json"), status_code=400)
    parts, param = [], None
    for e in errors:
        where = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body"
        param = param or where
        msg = str(e.get("msg", "invalid"))
        if e.get("type") == "extra_forbidden":
            msg = f"unknown field; valid: {', '.join(RagOptions.model_fields)}"
        parts.append(f"{where}: {msg}")
    return JSONResponse(openai_error("; ".join(parts), kind="invalid_request_error", code="invalid_request",
                                     param=param), status_code=422)


def error_response(exc: Exception, paths: SourcePaths | None = None) -> JSONResponse:
    """OpenAI's error shape for anything a route raised; status, code and message as on every route
    (`rag.server.errors.classify`: a 5xx says nothing but `internal error; see the server log`)."""
    if isinstance(exc, RequestValidationError):
        return _validation_error(exc)
    if isinstance(exc, StarletteHTTPException):
        kind, code = _HTTP_KINDS.get(exc.status_code, ("invalid_request_error", "http_error"))
        headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
        return JSONResponse(openai_error(str(exc.detail), kind=kind, code=code), status_code=exc.status_code,
                            headers=headers)
    failure = classify(exc, where="OpenAI-compatible request failed", paths=paths)
    kind = _HTTP_KINDS[failure.status][0] if failure.status in (401, 403) else \
        "invalid_request_error" if failure.status < 500 else "server_error"
    headers = {"WWW-Authenticate": "Bearer"} if failure.status == 401 else None
    return JSONResponse(openai_error(failure.message, kind=kind, code=failure.kind), status_code=failure.status,
                        headers=headers)


class OpenAIRoute(APIRoute):
    """A route whose errors (auth, validation, library, crash) get OpenAI's error shape."""

    paths: ClassVar[SourcePaths | None] = None   # how paths in messages are shown (set per router)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:  # every failure becomes an OpenAI-shaped response
                return error_response(exc, self.paths)

        return handle


class _Pipeline:
    """One model id: a RAG, its conversational chain and its resources' default search settings."""

    def __init__(self, rag: Any) -> None:
        self.rag = rag
        self.chain: Runnable = ConversationalRAG(rag).chain()
        self.defaults = {r.name: dict(r.search_kwargs) for r in rag.resources}


def openai_router(pipelines: Mapping[str, Any], *, settings: ServerConfig, auth: Callable[..., Any],
                  support_embedding: Any = None, paths: SourcePaths | None = None,
                  enforce: bool = False) -> APIRouter:
    """The `/v1` routes over named pipelines (`{model id: RAG}`).

    Args:
        pipelines: the RAGs served, by the model id clients pass as `model`.
        settings: the server's limits and tenant filter (the same as the rest of the API).
        auth: the API's credential dependency (returns the request's principal, or None).
        enforce: every request must have a principal (`server.identities`); its permissions filter every search.
        support_embedding: the embedding for the support checks (None: lexical only).
        paths: how source paths are shown (the rest of the API's `SourcePaths`; default: relative to
            the working directory, else the file name).
    """
    if not pipelines:
        raise ConfigError("openai_router needs at least one pipeline ({model id: RAG})")
    served = {name: _Pipeline(rag) for name, rag in pipelines.items()}
    created = int(time.time())
    paths = paths or SourcePaths()
    route_class = type("OpenAIRoute", (OpenAIRoute,), {"paths": paths})
    router = APIRouter(prefix="/v1", tags=["openai"], route_class=route_class, dependencies=[Depends(auth)])

    @router.get("/models")
    async def models() -> dict[str, Any]:
        """The model ids this server answers as (one per configured pipeline)."""
        return {"object": "list", "data": [{"id": name, "object": "model", "created": created, "owned_by": _OWNER}
                                           for name in served]}

    async def chat_completions(body: ChatCompletionRequest, principal: Principal | None = Depends(auth)) -> Any:
        """OpenAI chat completions answered by the RAG, with sources in `message.rag` (see the module docstring)."""
        return await _complete(served, body, settings=settings, support_embedding=support_embedding, paths=paths,
                               principal=principal, enforce=enforce)

    # the schema names the served model ids (an unknown one is still the 404 OpenAI's clients expect)
    chat_completions.__annotations__["body"] = create_model(
        "ChatCompletionRequest", __base__=ChatCompletionRequest,
        model=(str, Field(examples=list(served)[:1], json_schema_extra={"enum": list(served)})))
    router.post("/chat/completions", responses={200: {"content": {"text/event-stream": {}}}})(chat_completions)

    return router


async def _complete(served: Mapping[str, _Pipeline], body: ChatCompletionRequest, *, settings: ServerConfig,
                    support_embedding: Any, paths: SourcePaths, principal: Principal | None = None,
                    enforce: bool = False) -> Any:
    pipeline = served.get(body.model)
    if pipeline is None:
        return JSONResponse(openai_error(f"the model {body.model!r} does not exist; valid: {', '.join(served)}",
                                         kind="invalid_request_error", code="model_not_found", param="model"),
                            status_code=404)
    question, history = question_and_history(body.messages, max_chars=settings.max_conversation_chars)
    # Validated before anything runs or streams, so a bad setting gets a status code.
    # Fields validated by RagOptions; request_configurable checks the question (blank, too long).
    query = QueryRequest.model_construct(question=question, k=body.rag.k, filter=body.rag.filter,
                                         retrieval_chain=body.rag.retrieval_chain, checks=False)
    values = access_configurable(request_configurable(query, pipeline.defaults, settings), principal, enforce,
                                 settings)
    config: RunnableConfig = {"configurable": values, "callbacks": tracing_callbacks(),
                              "metadata": trace_metadata(principal, "/v1/chat/completions")}
    answer = _Answer(pipeline.chain, {"question": question, "history": history}, config, support_embedding,
                     model=body.model, stream=body.stream, paths=paths, principal=principal)
    if body.stream:
        return StreamingResponse(answer.sse(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
    return JSONResponse(await answer.completion())  # plain JSON data: no jsonable_encoder pass


class _Answer:
    """One completion: runs the event stream under a `chat.completions` run and shapes its output."""

    def __init__(self, chain: Runnable, payload: dict[str, Any], config: RunnableConfig, embedding: Any, *,
                 model: str, stream: bool, paths: SourcePaths, principal: Principal | None = None) -> None:
        self.chain, self.payload, self.config, self.embedding = chain, payload, config, embedding
        self.principal = principal
        self.paths = paths
        self.model, self.stream = model, stream
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.events: dict[str, dict[str, Any]] = {}
        self._usage: dict[str, Any] | None = None

    async def events_and_tokens(self) -> AsyncIterator[str]:
        """The answer's text pieces as they come; the other events are kept in `self.events`."""
        manager = get_callback_manager_for_config(self.config)
        run = manager.on_chain_start(None, {"question": self.payload["question"]}, name="chat.completions") \
            if manager.handlers else None
        config = {**self.config, "callbacks": run.get_child()} if run is not None else self.config
        try:
            async for event in stream_events(self.chain, self.payload, config=config, embedding=self.embedding):
                if event["type"] == "token":
                    yield event["text"]
                else:
                    if isinstance(event.get("sources"), list):   # shown as on every route: no server paths
                        audit_sources(self.principal, "/v1/chat/completions", event["sources"], self.config)
                        self.paths.rewrite(event["sources"])
                    self.events[event["type"]] = event
        except BaseException as exc:
            if run is not None:
                run.on_chain_error(exc)
            raise
        if run is not None:
            usage = self.usage()
            run.on_chain_end({"rag_attributes": {"model": self.model, "stream": self.stream,
                                                 "prompt_tokens": usage["prompt_tokens"],
                                                 "completion_tokens": usage["completion_tokens"],
                                                 "documents": len(self.events["sources"]["sources"]),
                                                 "document_ids": ",".join(document_ids(
                                                     self.events["sources"]["sources"]))}})

    def usage(self) -> dict[str, Any]:
        """OpenAI's usage; estimated from the text when the model reported no token counts."""
        if self._usage is None:
            self._usage = self._count_usage()
        return self._usage

    def _count_usage(self) -> dict[str, Any]:
        tracked = self.events["usage"]["usage"]
        if tracked.get("total_tokens"):
            prompt, completion, estimated = tracked["input_tokens"], tracked["output_tokens"], False
        else:
            counter = TokenCounter("approx")
            turns = [text for _, text in self.payload["history"]] + [self.payload["question"]]
            sources = [s.get("content") or "" for s in self.events["sources"]["sources"]]
            prompt = sum(counter.count(t) for t in turns + sources)
            completion = counter.count(self.events["done"]["answer"])
            estimated = True
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "estimated": estimated}

    def extension(self) -> dict[str, Any]:
        usage = self.usage()
        return rag_extension(self.events, {**self.events["usage"]["usage"], "estimated": usage["estimated"]})

    def _openai_usage(self) -> dict[str, int]:
        usage = self.usage()
        return {k: usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}

    async def completion(self) -> dict[str, Any]:
        """The non-streaming response (the answer with dangling `[n]` removed)."""
        async for _ in self.events_and_tokens():
            pass
        message = {"role": "assistant", "content": self.events["done"]["answer"], "rag": self.extension()}
        return {"id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
                "choices": [{"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}],
                "usage": self._openai_usage()}

    def _chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        chunk = {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **extra}
        return f"data: {json.dumps(chunk, ensure_ascii=False, default=str)}\n\n"

    async def sse(self) -> AsyncIterator[str]:
        """The streaming response: role, text pieces as they come, then the last chunk and `[DONE]`.

        The pieces are the model's raw text; the last chunk's `rag.answer` is the answer with
        dangling `[n]` removed (what the non-streaming response returns as its content).
        """
        try:
            yield self._chunk({"role": "assistant", "content": ""})
            async for piece in self.events_and_tokens():
                yield self._chunk({"content": piece})
            extension = {**self.extension(), "answer": self.events["done"]["answer"]}
            yield self._chunk({"rag": extension}, "stop", usage=self._openai_usage())
        except Exception as exc:  # the status line is sent: report in the stream, as OpenAI does
            response = error_response(exc, self.paths)
            yield f"data: {response.body.decode()}\n\n"
        yield "data: [DONE]\n\n"
