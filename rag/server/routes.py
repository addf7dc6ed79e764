"""The HTTP routes of `rag serve` (wired by `rag.server.app.create_app`).

`Served` holds what every request needs (the chain, limits, token, source paths); each
`add_*` function registers one group of routes on the app: error handlers, the page and meta
routes, `/invoke` + `/batch`, and `/stream`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from rag.base.acl import PRINCIPAL_KEY, PUBLIC_BY_DEFAULT_KEY, Principal
from rag.base.errors import AccessError, ConfigError, InputError, RagError
from rag.base.tracing import tracing_callbacks
from rag.base.version import __version__
from rag.compose.streaming import stream_events
from rag.config.models import ServerConfig
from rag.server.errors import classify
from rag.generation.rag_with_source import as_generation_chain
from rag.server.audit import audit, audit_sources, trace_metadata
from rag.server.events import checks_body, error_body, invoke_body, sse
from rag.server.identity import Identities
from rag.server.paths import SourcePaths
from rag.server.schemas import (
    BatchRequest,
    QueryRequest,
    ResourceSettings,
    request_configurable,
)

__all__ = ["STATIC_DIR", "PermissionChange", "Served", "access_configurable", "add_admin_routes", "add_error_handlers", "add_page_and_meta_routes", "add_query_routes",
           "add_stream_route"]

STATIC_DIR = Path(__file__).parent / "static"
_PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
             "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")


@dataclass
class Served:
    """What the routes share: the RAG and its chain, the settings, the identities, the source paths."""

    rag: Any
    chain: Any
    settings: ServerConfig
    token: str
    defaults: dict[str, dict[str, Any]]
    paths: SourcePaths
    support_embedding: str | None
    identities: Identities

    @classmethod
    def build(cls, rag: Any, settings: ServerConfig,
              source_roots: Mapping[str, Sequence[str | Path]] | None) -> Served:
        """Check the settings against the RAG (`ConfigError`) and build the shared state."""
        token = os.environ.get(settings.auth_token_env) or ""
        if settings.require_auth and not token:
            raise ConfigError(f"server.require_auth is set but the environment variable {settings.auth_token_env} "
                              "is empty")
        too_big = {r.name: r.search_kwargs["k"] for r in rag.resources if r.search_kwargs.get("k", 0) > settings.max_k}
        if too_big:
            raise ConfigError(f"resource default k {too_big} is over server.max_k={settings.max_k}; every request "
                              "would be refused: lower the resources' k or raise server.max_k")
        if settings.support_scoring != "semantic":   # the chain's one post-processing step scores lexically
            rag = rag.model_copy(update={"generation_chain": as_generation_chain(rag.generation_chain).with_checks(None)})
        identities = Identities.from_config(settings.identities, token=token)
        return cls(rag=rag, chain=rag.chain(), settings=settings, token=token,
                   defaults={r.name: dict(r.search_kwargs) for r in rag.resources}, paths=SourcePaths(source_roots),
                   support_embedding="default" if settings.support_scoring == "semantic" else None,
                   identities=identities)

    def check_token(self, request: Request) -> Principal | None:
        """Who sent `request` (a FastAPI dependency of every route but the page and `/health`); 401 otherwise."""
        try:
            return self.identities.identify(request.headers.get("authorization"))
        except AccessError as exc:
            raise StarletteHTTPException(exc.status, str(exc)) from None

    def check_admin(self, request: Request) -> Principal | None:
        """`check_token`, and the `admin` role (403 without it; admin routes need `server.identities`)."""
        principal = self.check_token(request)
        if principal is None or not principal.is_admin:
            raise StarletteHTTPException(403, "forbidden: this route needs the admin role")
        return principal

    def config_for(self, body: QueryRequest, principal: Principal | None = None,
                   route: str = "/invoke") -> dict[str, Any]:
        """The run config of one request: its retrieval settings (validated, tenant filter added) and, under
        `server.identities`, its principal, whose permission filter the chain ANDs onto every search.

        Raises:
            AccessError: identities are configured and no principal was given (never run unfiltered).
        """
        return {"configurable": access_configurable(request_configurable(body, self.defaults, self.settings),
                                                    principal, self.identities.enforce, self.settings),
                "run_name": "rag-serve", "callbacks": tracing_callbacks(),
                "metadata": trace_metadata(principal, route)}


def access_configurable(values: dict[str, Any], principal: Principal | None, enforce: bool,
                        settings: ServerConfig) -> dict[str, Any]:
    """A request's `configurable` with its principal (`rag.compose.request`); fails closed without one."""
    if enforce and principal is None:
        raise AccessError("unauthorized: missing credential")
    if principal is not None:
        values = {**values, PRINCIPAL_KEY: principal, PUBLIC_BY_DEFAULT_KEY: settings.public_by_default}
    return values


def add_error_handlers(app: FastAPI, paths: SourcePaths | None = None) -> None:
    """HTTP errors, request validation errors and `RagError`s as JSON error bodies (`rag.server.errors`)."""
    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {401: "unauthorized", 403: "forbidden", 404: "not_found",
                405: "method_not_allowed"}.get(exc.status_code, "http_error")
        headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
        return JSONResponse(error_body(kind, str(exc.detail)), status_code=exc.status_code, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return JSONResponse(error_body("malformed_json", "the request body is not valid JSON"), status_code=400)
        message = _validation_message(errors, lambda loc: _valid_fields(loc, request.url.path))
        return JSONResponse(error_body("invalid_request", message), status_code=422)

    @app.exception_handler(RagError)
    async def _rag_error(request: Request, exc: RagError) -> JSONResponse:
        failure = classify(exc, where=f"request failed on {request.url.path}", paths=paths)
        headers = {"WWW-Authenticate": "Bearer"} if failure.status == 401 else None
        return JSONResponse(error_body(failure.kind, failure.message), status_code=failure.status, headers=headers)


def add_page_and_meta_routes(app: FastAPI, server: Served) -> None:
    """The web page, its static files, `/health` and `/resources`."""
    rag, settings, auth = server.rag, server.settings, [Depends(server.check_token)]
    token = server.token or server.identities.enforce
    answerer = rag.describe_answerer()   # once: describing may ask a model server for its window

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers={"Content-Security-Policy": _PAGE_CSP})

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/health", tags=["meta"])
    async def health() -> dict[str, Any]:
        """Liveness: always 200 while the server runs (no auth); `sync`: the last report of each scheduled source."""
        body = {"status": "ok", "version": __version__, "resources": len(rag.resources), "auth": bool(token),
                "answerer": answerer}
        syncs = getattr(app.state, "syncs", None)   # rag serve's scheduled source syncs (rag.server.sync_schedule)
        if syncs is not None:
            body["sync"] = syncs.status()
        return body

    @app.get("/resources", tags=["meta"], dependencies=auth)
    async def resources() -> dict[str, Any]:
        """The resources this server searches, with their default search settings."""
        return {"resources": [{"name": r.name, "description": r.description, "search_kwargs": r.search_kwargs,
                               "retriever": type(r.retriever).__name__} for r in rag.resources],
                "limits": {"max_k": settings.max_k, "max_batch": settings.max_batch,
                           "max_question_chars": settings.max_question_chars,
                           "max_request_bytes": settings.max_request_bytes},
                "server_filter": settings.tenant_filter is not None}


def add_query_routes(app: FastAPI, server: Served) -> None:
    """`/invoke` (one question) and `/batch` (several, with per-item errors)."""
    chain, settings, paths = server.chain, server.settings, server.paths
    config_for, support_embedding = server.config_for, server.support_embedding
    who = Depends(server.check_token)

    @app.post("/invoke", tags=["rag"])
    async def invoke(body: QueryRequest, principal: Principal | None = who) -> dict[str, Any]:
        """Answer one question; returns the answer, numbered sources, citations and extras.

        With `"checks": true` the response also has `checks`: citation precision / recall and the
        support label of every answer sentence (the stream's citations and support events).
        """
        config = config_for(body, principal)
        out = await chain.ainvoke({"question": body.question}, config=config)
        response = invoke_body(out)
        audit_sources(principal, "/invoke", response["sources"], config)
        paths.rewrite(response["sources"])
        if body.checks:
            response["checks"] = checks_body(out)
        return response

    @app.post("/batch", tags=["rag"])
    async def batch(body: BatchRequest, principal: Principal | None = who) -> dict[str, Any]:
        """Answer several questions concurrently; an item that fails gets `{"error": ...}` in its place.

        Each item is validated on its own: an invalid item (bad filter, unknown field, `k` over
        the limit) gets its error in its place and the others are answered.
        """
        if len(body.requests) > settings.max_batch:
            raise InputError(f"{len(body.requests)} requests in one batch; the limit is {settings.max_batch}")
        results: list[dict[str, Any] | None] = [None] * len(body.requests)
        runnable: list[tuple[int, QueryRequest, dict[str, Any]]] = []
        for i, raw in enumerate(body.requests):
            try:
                item = QueryRequest.model_validate(raw)
                runnable.append((i, item, config_for(item, principal, "/batch")))
            except ValidationError as exc:
                message = _validation_message(exc.errors(include_url=False), lambda loc: list(QueryRequest.model_fields))
                results[i] = error_body("invalid_request", message)
            except RagError as exc:
                failure = classify(exc, where="batch item failed", paths=paths)
                results[i] = error_body(failure.kind, failure.message)
        outs = await chain.abatch([{"question": item.question} for _, item, _ in runnable],
                                  [config for _, _, config in runnable], return_exceptions=True)
        for (i, _, config), out in zip(runnable, outs, strict=True):
            results[i] = _batch_result(out, paths)
            audit_sources(principal, "/batch", results[i].get("sources") or [], config)
        return {"results": results}


def add_stream_route(app: FastAPI, server: Served) -> None:
    """`/stream`: one question as server-sent events."""
    chain, paths = server.chain, server.paths
    config_for, support_embedding = server.config_for, server.support_embedding

    @app.post("/stream", tags=["rag"],
              responses={200: {"content": {"text/event-stream": {}},
                               "description": "sources, token..., citations, support, usage, done"}})
    async def stream(body: QueryRequest, principal: Principal | None = Depends(server.check_token)) -> StreamingResponse:
        """Answer one question as server-sent events (see `rag.server.events`)."""
        config = config_for(body, principal, "/stream")  # validated before the stream starts, so errors get a status code

        async def events() -> AsyncIterator[str]:
            try:
                async for event in stream_events(chain, body.question, config=config, embedding=support_embedding):
                    if isinstance(event.get("sources"), list):
                        audit_sources(principal, "/stream", event["sources"], config)
                        paths.rewrite(event["sources"])
                    yield sse(event)
            except Exception as exc:  # noqa: BLE001 - a stream ends with an error event, whatever failed
                failure = classify(exc, where="stream failed", paths=paths)
                yield sse({"type": "error", **error_body(failure.kind, failure.message)})

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


def _batch_result(out: Any, paths: SourcePaths) -> dict[str, Any]:
    """One `/batch` result: the answer, or the error in its place (internal details only in the log)."""
    if isinstance(out, Exception):
        failure = classify(out, where="batch item failed", paths=paths)
        return error_body(failure.kind, failure.message)
    response = invoke_body(out)
    paths.rewrite(response["sources"])
    return response


def _validation_message(errors: Sequence[Mapping[str, Any]], fields_at: Callable[[tuple[Any, ...]], list[str]]) -> str:
    """pydantic's errors as one line: `where: what` for each, unknown fields with the valid ones."""
    parts = []
    for e in errors:
        where = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body"
        msg = str(e.get("msg", "invalid"))
        if e.get("type") == "extra_forbidden":
            msg = f"unknown field; valid: {', '.join(fields_at(tuple(e.get('loc', ()))))}"
        parts.append(f"{where if len(where) <= 80 else where[:77] + '...'}: {msg}")
    return "; ".join(parts)


def _valid_fields(loc: tuple[Any, ...], path: str) -> list[str]:
    """The fields valid where an unknown one was found (loc is pydantic's error location)."""
    if "retrieval_chain" in loc:
        return list(ResourceSettings.model_fields)
    if path.rstrip("/").endswith("/batch") and len(loc) <= 2:
        return list(BatchRequest.model_fields)
    return list(QueryRequest.model_fields)


class PermissionChange(BaseModel):
    """`POST /admin/permissions`: who may now read one document of a knowledge base resource."""

    model_config = ConfigDict(extra="forbid")

    resource: str = Field(description="the knowledge base resource holding the document")
    source: str = Field(min_length=1, description="the document: its path as indexed, its source or its doc_id")
    permissions: Literal["public"] | dict[str, Any] = Field(
        description='"public" or {"users": [...], "groups": [...], "public": false}')


def add_admin_routes(app: FastAPI, server: Served, knowledge_bases: Mapping[str, Any]) -> None:
    """`POST /admin/permissions` (the `admin` role): change a document's readers in place, nothing re-embedded."""

    @app.post("/admin/permissions", tags=["admin"])
    async def change_permissions(body: PermissionChange,
                                 principal: Principal | None = Depends(server.check_admin)) -> dict[str, Any]:
        """Give one document new permissions (its chunks' metadata is updated; nothing is embedded again)."""
        kb = knowledge_bases.get(body.resource)
        if kb is None:
            raise ConfigError(f"no knowledge base resource {body.resource!r} on this server; valid: "
                              f"{', '.join(knowledge_bases) or '(none)'}")
        changed = await asyncio.to_thread(kb.set_permissions, body.source, body.permissions)
        audit(principal, "/admin/permissions", [{"source": body.source}])
        return {"resource": body.resource, "changed_chunks": changed}
