"""The server's last line of defence: an unexpected error becomes one 500 and one bounded log record.

Starlette's outermost middleware re-raises whatever reaches it after sending the 500, so the ASGI
server logs a second traceback and, on a keep-alive connection, closes the socket under the
client's next request. `InternalErrorMiddleware` sits inside it: the error stops here, the client
gets the JSON 500 on a connection that stays usable, and the log gets one record whose size is
bounded (`MAX_LOG_CHARS`; a `RecursionError` traceback is otherwise a thousand frames long).

Example:
    >>> try:
    ...     raise ValueError("x" * 10_000)
    ... except ValueError as exc:
    ...     len(bounded_traceback(exc)) <= MAX_LOG_CHARS
    True
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Sequence
from typing import Any

from fastapi.responses import JSONResponse

from rag.base.errors import short_repr
from rag.server.events import error_body

__all__ = ["INTERNAL_ERROR_MESSAGE", "MAX_LOG_CHARS", "HostCheckMiddleware", "InternalErrorMiddleware",
           "bounded_traceback", "host_name", "log_failure"]

logger = logging.getLogger("rag.server.app")
#: The longest log record one failed request adds.
MAX_LOG_CHARS = 4000
#: How many innermost stack frames the log keeps.
MAX_FRAMES = 12
INTERNAL_ERROR_MESSAGE = "internal error; see the server log"


def bounded_traceback(exc: BaseException) -> str:
    """The exception and its innermost frames, cut to `MAX_LOG_CHARS` (no chained causes)."""
    lines = traceback.format_exception(exc, limit=-MAX_FRAMES, chain=False)
    text = "".join(line if len(line) <= 500 else line[:480] + " ...[cut]\n" for line in lines)
    if len(text) > MAX_LOG_CHARS:
        text = text[:MAX_LOG_CHARS // 2] + "\n...[cut]...\n" + text[-MAX_LOG_CHARS // 2 + 20:]
    return text


def log_failure(what: str, exc: BaseException) -> None:
    """Log one failed request: one record, bounded, with the innermost frames."""
    logger.error("%s: %s", what, bounded_traceback(exc).rstrip())


class InternalErrorMiddleware:
    """Turn any exception the app lets through into a JSON 500, logged once (ASGI middleware)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:  # noqa: BLE001 - the last line of defence: every error becomes a 500
            log_failure(f"unhandled error on {scope.get('method')} {scope.get('path')}", exc)
            if not started:  # once a response has begun, the server can only end the connection
                response = JSONResponse(error_body("internal_error", INTERNAL_ERROR_MESSAGE), status_code=500)
                await response(scope, receive, send)


def host_name(header: str) -> str:
    """The host name of a `Host` header: lowercased, without the port or IPv6 brackets.

    Example:
        >>> host_name("LocalHost:8000"), host_name("[::1]:8000"), host_name("127.0.0.1")
        ('localhost', '::1', '127.0.0.1')
    """
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header if header.count(":") > 1 else header.split(":", 1)[0]


class HostCheckMiddleware:
    """Refuse requests whose `Host` is not an allowed name (ASGI): no DNS rebinding to a local server.

    A web page the operator opens can make the browser send requests to ``evil.example``, which
    its DNS then points at 127.0.0.1; the browser treats the answers as the page's own. The page
    cannot choose the `Host` header, so a server that answers only its own names is out of reach.
    """

    def __init__(self, app: Any, allowed: Sequence[str]) -> None:
        self.app = app
        self.allowed = frozenset(allowed)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or "*" in self.allowed:
            await self.app(scope, receive, send)
            return
        raw = dict(scope.get("headers") or []).get(b"host", b"")
        host = host_name(raw.decode("latin-1"))
        if host in self.allowed:
            await self.app(scope, receive, send)
            return
        shown = short_repr(host) if host else "(none)"
        message = (f"the host {shown} is not served here; allowed: {', '.join(sorted(self.allowed))} "
                   "(server.allowed_hosts in the config)")
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await JSONResponse(error_body("host_not_allowed", message), status_code=400)(scope, receive, send)
