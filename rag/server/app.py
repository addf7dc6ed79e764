"""The HTTP API and web page of `rag serve` (FastAPI).

```
GET  /            the web page (static HTML/CSS/JS, no build step, no CDN)
GET  /health      liveness, no auth
GET  /resources   the resources and their default search settings
POST /invoke      {"question", "k"?, "filter"?, "retrieval_chain"?} -> answer, sources, citations, extras
POST /batch       {"requests": [...]} -> {"results": [...]}
POST /stream      the same body -> server-sent events: sources, token..., citations, usage, done
GET  /docs        OpenAPI docs (/openapi.json)
GET  /v1/models, POST /v1/chat/completions   OpenAI-compatible (see rag.server.openai_compat)
```

The `RAG` and its chain are built once per app; each request's settings travel in its own
`RunnableConfig`, so concurrent requests never see each other's `k` or filters. Errors are JSON
`{"error": {"type", "message"}}` with 400 (malformed JSON), 401 (token), 404, 413 (body too
large), 422 (invalid request, filter or setting) and 500 (no details leaked).

Example:
    >>> from rag.core.config import from_config                          # doctest: +SKIP
    >>> app = create_app(from_config(RAG, "configs/default.yaml"))       # doctest: +SKIP
    >>> # uvicorn.run(app, host="127.0.0.1", port=8000)
"""

from __future__ import annotations

import hmac
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rag.base.errors import (
    ConfigError,
    FilterError,
    InputError,
    MissingDependencyError,
    RagError,
)
from rag.base.version import __version__

try:
    from fastapi import Depends, FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
    from fastapi.staticfiles import StaticFiles
    from pydantic import ValidationError
    from starlette.exceptions import HTTPException as StarletteHTTPException
except ImportError as _exc:  # the server is an optional extra
    raise MissingDependencyError.for_extra("fastapi", "server", "rag serve") from _exc

from rag.base.errors import MissingDependencyError
from rag.base.tracing import tracing_callbacks
from rag.core.config import load_config
from rag.core.config_models import ServerConfig
from rag.core.generator import RAG
from rag.generation.streaming import stream_events
from rag.server.events import checks_body, error_body, invoke_body, sse
from rag.server.guard import (
    INTERNAL_ERROR_MESSAGE,
    InternalErrorMiddleware,
    log_failure,
)
from rag.server.openai_compat import openai_router
from rag.server.paths import SourcePaths
from rag.server.schemas import (
    BatchRequest,
    QueryRequest,
    ResourceSettings,
    retrieval_settings,
)

__all__ = ["STATIC_DIR", "app_from_config", "create_app", "source_roots"]

STATIC_DIR = Path(__file__).parent / "static"
_PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
             "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")


class BodyLimitMiddleware:
    """Reject request bodies over `max_bytes` with 413 before the app reads them (ASGI)."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            await self._reject(send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await self._reject(send)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()  # lets streaming responses notice a disconnect

        await self.app(scope, replay, send)

    async def _reject(self, send: Any) -> None:
        response = JSONResponse(error_body("request_too_large",
                                           f"the request body is over the limit of {self.max_bytes} bytes"),
                                status_code=413)
        await response({"type": "http"}, None, send)


def _status_for(exc: RagError) -> tuple[int, str]:
    if isinstance(exc, FilterError):
        return 422, "filter_error"
    if isinstance(exc, ConfigError):
        return 422, "invalid_setting"
    if isinstance(exc, InputError):
        return 422, "invalid_input"
    if isinstance(exc, MissingDependencyError):
        return 500, "missing_dependency"
    return 500, "rag_error"


def create_app(rag: Any, *, settings: ServerConfig | None = None, title: str = "rag",
               source_roots: Mapping[str, Sequence[str | Path]] | None = None,
               models: Mapping[str, Any] | None = None) -> FastAPI:
    """Build the FastAPI app around one `RAG` (built once, shared by all requests).

    Args:
        rag: the `RAG` to serve.
        settings: limits, tenant filter and auth settings; defaults to `ServerConfig()`.
        title: shown in the OpenAPI docs.
        source_roots: `{resource name: folders it was indexed from}`; response sources are shown
            relative to these (or to the working directory), never as absolute server paths.
        models: the pipelines `/v1/chat/completions` answers as, by model id; default
            `{"rag": rag}`.

    Raises:
        ConfigError: `require_auth` is set but the token variable is empty, or a resource's
            default `k` is over `max_k`.
    """

    settings = settings or ServerConfig()
    token = os.environ.get(settings.auth_token_env) or ""
    if settings.require_auth and not token:
        raise ConfigError(f"server.require_auth is set but the environment variable {settings.auth_token_env} is empty")
    too_big = {r.name: r.search_kwargs["k"] for r in rag.resources if r.search_kwargs.get("k", 0) > settings.max_k}
    if too_big:
        raise ConfigError(f"resource default k {too_big} is over server.max_k={settings.max_k}; every request "
                          "would be refused: lower the resources' k or raise server.max_k")
    chain = rag.chain()
    support_embedding = "default" if settings.support_scoring == "semantic" else None
    defaults = {r.name: dict(r.search_kwargs) for r in rag.resources}
    paths = SourcePaths(source_roots)

    app = FastAPI(title=title, version=__version__, docs_url=None, redoc_url=None,
                  description="Retrieval-augmented generation over the configured resources.")
    _add_offline_docs(app)
    app.state.rag = rag
    app.state.settings = settings
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_request_bytes)
    app.add_middleware(InternalErrorMiddleware)  # outermost of ours: nothing escapes to poison the connection

    def check_token(request: Request) -> None:
        if not token:
            return
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), token.encode()):
            raise StarletteHTTPException(401, "missing or wrong bearer token; send 'Authorization: Bearer <token>'")

    auth = [Depends(check_token)]

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {401: "unauthorized", 404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
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
        status, kind = _status_for(exc)
        if status >= 500:
            log_failure(f"request failed on {request.url.path}", exc)
        return JSONResponse(error_body(kind, str(exc) if status < 500 else INTERNAL_ERROR_MESSAGE), status_code=status)

    def config_for(body: QueryRequest) -> dict[str, Any]:
        return {"configurable": {"retrieval_chain": retrieval_settings(body, defaults, settings)},
                "run_name": "rag-serve", "callbacks": tracing_callbacks()}

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers={"Content-Security-Policy": _PAGE_CSP})

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/health", tags=["meta"])
    async def health() -> dict[str, Any]:
        """Liveness: always 200 while the server runs (no auth)."""
        return {"status": "ok", "version": __version__, "resources": len(rag.resources),
                "auth": bool(token)}

    @app.get("/resources", tags=["meta"], dependencies=auth)
    async def resources() -> dict[str, Any]:
        """The resources this server searches, with their default search settings."""
        return {"resources": [{"name": r.name, "description": r.description, "search_kwargs": r.search_kwargs,
                               "retriever": type(r.retriever).__name__} for r in rag.resources],
                "limits": {"max_k": settings.max_k, "max_batch": settings.max_batch,
                           "max_question_chars": settings.max_question_chars,
                           "max_request_bytes": settings.max_request_bytes},
                "server_filter": settings.tenant_filter is not None}

    @app.post("/invoke", tags=["rag"], dependencies=auth)
    async def invoke(body: QueryRequest) -> dict[str, Any]:
        """Answer one question; returns the answer, numbered sources, citations and extras.

        With `"checks": true` the response also has `checks`: citation precision / recall and the
        support label of every answer sentence (the stream's citations and support events).
        """
        out = await chain.ainvoke({"question": body.question}, config=config_for(body))
        response = invoke_body(out)
        paths.rewrite(response["sources"])
        if body.checks:
            response["checks"] = await checks_body(out, embedding=support_embedding)
        return response

    @app.post("/batch", tags=["rag"], dependencies=auth)
    async def batch(body: BatchRequest) -> dict[str, Any]:
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
                runnable.append((i, item, config_for(item)))
            except ValidationError as exc:
                message = _validation_message(exc.errors(include_url=False), lambda loc: list(QueryRequest.model_fields))
                results[i] = error_body("invalid_request", message)
            except RagError as exc:
                results[i] = error_body(_status_for(exc)[1], str(exc))
        outs = await chain.abatch([{"question": item.question} for _, item, _ in runnable],
                                  [config for _, _, config in runnable], return_exceptions=True)
        for (i, _, _), out in zip(runnable, outs, strict=True):
            results[i] = _batch_result(out, paths)
        return {"results": results}

    @app.post("/stream", tags=["rag"], dependencies=auth,
              responses={200: {"content": {"text/event-stream": {}},
                               "description": "sources, token..., citations, support, usage, done"}})
    async def stream(body: QueryRequest) -> StreamingResponse:
        """Answer one question as server-sent events (see `rag.server.events`)."""
        config = config_for(body)  # validated before the stream starts, so errors get a status code

        async def events() -> AsyncIterator[str]:
            try:
                async for event in stream_events(chain, body.question, config=config, embedding=support_embedding):
                    if isinstance(event.get("sources"), list):
                        paths.rewrite(event["sources"])
                    yield sse(event)
            except Exception as exc:  # noqa: BLE001 - a stream ends with an error event, whatever failed
                if isinstance(exc, RagError) and _status_for(exc)[0] < 500:
                    yield sse({"type": "error", **error_body(_status_for(exc)[1], str(exc))})
                else:
                    log_failure("stream failed", exc)
                    yield sse({"type": "error", **error_body("internal_error", INTERNAL_ERROR_MESSAGE)})

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    app.include_router(openai_router(models or {"rag": rag}, settings=settings, auth=check_token,
                                     support_embedding=support_embedding))
    return app


def _batch_result(out: Any, paths: SourcePaths) -> dict[str, Any]:
    """One `/batch` result: the answer, or the error in its place (internal details only in the log)."""
    if isinstance(out, RagError) and _status_for(out)[0] < 500:
        return error_body(_status_for(out)[1], str(out))
    if isinstance(out, Exception):
        log_failure("batch item failed", out)
        return error_body("internal_error", INTERNAL_ERROR_MESSAGE)
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


def app_from_config(path: str | Path, **build_kwargs: Any) -> FastAPI:
    """Load a config file, build its `RAG` once and wrap it in the app (`rag serve` uses this)."""

    config = load_config(path)
    rag = RAG.from_config(config, **build_kwargs)
    return create_app(rag, settings=config.server, title=f"rag: {Path(path).stem}", source_roots=source_roots(config))


def source_roots(config: Any) -> dict[str, list[str]]:
    """`{resource name: its index.paths}` for the resources of a config that index folders."""
    return {spec.name: list(spec.index.paths) for spec in config.resources if getattr(spec, "index", None)}


def _add_offline_docs(app: FastAPI) -> None:
    """Serve the Swagger UI at /docs from the swagger-ui-bundle wheel, so it works without internet.

    FastAPI's default page loads its scripts from a CDN; without the wheel we fall back to it.
    """
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.staticfiles import StaticFiles

    try:
        from swagger_ui_bundle import swagger_ui_path
    except ImportError:
        js, css = ("https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js",
                   "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui.css")
    else:
        app.mount("/docs-static", StaticFiles(directory=str(swagger_ui_path)), name="docs-static")
        js, css = "/docs-static/swagger-ui-bundle.js", "/docs-static/swagger-ui.css"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> Any:
        return get_swagger_ui_html(openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} - API",
                                   swagger_js_url=js, swagger_css_url=css, swagger_favicon_url="data:,")
