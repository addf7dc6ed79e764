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
POST /mcp         Model Context Protocol tools over streamable HTTP (rag.server.mcp_server; the mcp extra)
POST /admin/permissions   change who may read a document (the admin role; rag.server.identity)
```

The `RAG` and its chain are built once per app; each request's settings travel in its own
`RunnableConfig`, so concurrent requests never see each other's `k` or filters. Errors are JSON
`{"error": {"type", "message"}}` with 400 (malformed JSON), 401 (credential), 403 (role), 404, 413 (body too
large), 422 (invalid request, filter or setting) and 500 (no details leaked).

Example:
    >>> from rag.config.rag_config import from_config                          # doctest: +SKIP
    >>> app = create_app(from_config(RAG, "configs/default.yaml"))       # doctest: +SKIP
    >>> # uvicorn.run(app, host="127.0.0.1", port=8000)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag.base.errors import MissingDependencyError
from rag.base.version import __version__

try:
    from fastapi import Depends, FastAPI
    from fastapi.responses import JSONResponse
except ImportError as _exc:  # the server is an optional extra
    raise MissingDependencyError.for_extra("fastapi", "server", "rag serve") from _exc

from rag.compose.generator import RAG
from rag.config.models import ServerConfig
from rag.config.rag_config import load_config
from rag.server.events import error_body
from rag.server.guard import HostCheckMiddleware, InternalErrorMiddleware
from rag.server.openai_compat import openai_router
from rag.server.routes import (
    STATIC_DIR,
    Served,
    add_admin_routes,
    add_error_handlers,
    add_page_and_meta_routes,
    add_query_routes,
    add_stream_route,
)

__all__ = ["STATIC_DIR", "app_from_config", "create_app", "source_roots"]



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


def create_app(rag: Any, *, settings: ServerConfig | None = None, title: str = "rag",
               source_roots: Mapping[str, Sequence[str | Path]] | None = None,
               models: Mapping[str, Any] | None = None, syncs: Any = None,
               knowledge_bases: Mapping[str, Any] | None = None) -> FastAPI:
    """Build the FastAPI app around one `RAG` (built once, shared by all requests).

    Args:
        rag: the `RAG` to serve.
        settings: limits, tenant filter and auth settings; defaults to `ServerConfig()`.
        title: shown in the OpenAPI docs.
        source_roots: `{resource name: folders it was indexed from}`; response sources are shown
            relative to these (or to the working directory), never as absolute server paths.
        models: the pipelines `/v1/chat/completions` answers as, by model id; default
            `{"rag": rag}`.
        syncs: the `rag.server.sync_schedule.SyncScheduler` of the config's scheduled sources, whose last
            reports `/health` shows (the caller starts and stops it).
        knowledge_bases: `{resource name: KnowledgeBase}` whose documents' permissions
            `POST /admin/permissions` may change (the `admin` role of `server.identities`).

    Raises:
        ConfigError: `require_auth` is set but the token variable is empty, or a resource's
            default `k` is over `max_k`.
    """
    server = Served.build(rag, settings or ServerConfig(), source_roots)
    app = FastAPI(title=title, version=__version__, docs_url=None, redoc_url=None, openapi_url=None,
                  description="Retrieval-augmented generation over the configured resources.")
    _add_offline_docs(app, [] if server.settings.public_docs else [Depends(server.check_token)])
    app.state.rag = rag
    app.state.settings = server.settings
    app.state.syncs = syncs
    app.add_middleware(BodyLimitMiddleware, max_bytes=server.settings.max_request_bytes)
    app.add_middleware(InternalErrorMiddleware)  # nothing escapes to poison the connection
    app.add_middleware(HostCheckMiddleware, allowed=server.settings.allowed_hosts)   # outermost: DNS rebinding
    add_error_handlers(app, server.paths)
    add_page_and_meta_routes(app, server)
    add_query_routes(app, server)
    add_stream_route(app, server)
    if knowledge_bases:
        add_admin_routes(app, server, knowledge_bases)
    app.include_router(openai_router(models or {"rag": server.rag}, settings=server.settings, auth=server.check_token,
                                     support_embedding=server.support_embedding, paths=server.paths,
                                     enforce=server.identities.enforce))
    _mount_mcp(app, server)
    return app


def _mount_mcp(app: FastAPI, server: Served) -> None:
    """The MCP tools at `/mcp` when the `mcp` extra is installed (the rest of the API works without it)."""
    try:
        from rag.server.mcp_server import mount_mcp
    except ImportError:
        return
    mount_mcp(app, server)


def app_from_config(path: str | Path, **build_kwargs: Any) -> FastAPI:
    """Load a config file, build its `RAG` once and wrap it in the app (`rag serve` uses this)."""

    config = load_config(path)
    rag = RAG.from_config(config, **build_kwargs)
    return create_app(rag, settings=config.server, title=f"rag: {Path(path).stem}", source_roots=source_roots(config))


def source_roots(config: Any) -> dict[str, list[str]]:
    """`{resource name: its index.paths}` for the resources of a config that index folders."""
    return {spec.name: list(spec.index.paths) for spec in config.resources if getattr(spec, "index", None)}


def _add_offline_docs(app: FastAPI, auth: list[Any]) -> None:
    """Serve `/openapi.json` and the Swagger UI at /docs (from the swagger-ui-bundle wheel, so it works
    without internet), behind `auth` (the token, unless `server.public_docs`).

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

    @app.get("/openapi.json", include_in_schema=False, dependencies=auth)
    async def openapi() -> Any:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False, dependencies=auth)
    async def swagger_ui() -> Any:
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{app.title} - API",
                                   swagger_js_url=js, swagger_css_url=css, swagger_favicon_url="data:,")
