"""One error contract for every route of `rag serve`: status, kind and message of any failure.

Every route (`/invoke`, `/batch`, `/stream`, `/v1/chat/completions`, `/v1/models`) turns what it
raised into a response through `classify`, so the same failure gets the same status and code
everywhere (only the body's shape differs: ours, or OpenAI's on `/v1`):

| raised | status | kind |
|---|---|---|
| `FilterError` | 422 | `filter_error` |
| `ConfigError` | 422 | `invalid_setting` |
| `InputError` | 422 | `invalid_input` |
| `AccessError` | 401 / 403 | `unauthorized` / `forbidden` |
| `MissingDependencyError` | 500 | `missing_dependency` |
| `ModelError` (the answer model failed) | 502 | `model_error` ("the answer model failed; see the server log") |
| `StoreError` (a damaged store, a full disk, a lock, a read-only store) | 503 | `store_error` |
| another `RagError` | 500 | `rag_error` |
| any other error | 500 | `internal_error` |

A 4xx message says what was wrong, with any absolute server path in it shown as the source
paths are (`SourcePaths.scrub`); so does a `store_error` (its first line: the one line `rag index` and
`rag ask` print for the store, which says what to do; MCP's tools give the same line), also logged;
any other 5xx message is only `internal error; see the server log`, and the log gets one bounded
record (`rag.server.guard.log_failure`, at most 4,000 characters).

Example:
    >>> from rag.base.errors import FilterError
    >>> failure = classify(FilterError("unknown operator '$gtt'"))
    >>> failure.status, failure.kind
    (422, 'filter_error')
    >>> classify(RuntimeError("/srv/secret/db.sqlite is locked"), log=False).message
    'internal error; see the server log'
"""

from __future__ import annotations

from dataclasses import dataclass

from rag.base.errors import (
    AccessError,
    ConfigError,
    FilterError,
    InputError,
    MissingDependencyError,
    ModelError,
    RagError,
    StoreError,
)
from rag.server.guard import INTERNAL_ERROR_MESSAGE, log_failure
from rag.server.paths import SourcePaths

__all__ = ["MODEL_ERROR_MESSAGE", "Failure", "classify", "store_message"]

#: What a client is told when the answer model failed (its own message may hold secrets: the log has it).
MODEL_ERROR_MESSAGE = "the answer model failed; see the server log"

_CLIENT_ERRORS = ((FilterError, "filter_error"), (ConfigError, "invalid_setting"), (InputError, "invalid_input"))


@dataclass(frozen=True)
class Failure:
    """How a failure is answered: HTTP status, error kind and the message the client sees."""

    status: int
    kind: str
    message: str


def classify(exc: BaseException, *, where: str = "request failed", paths: SourcePaths | None = None,
             log: bool = True) -> Failure:
    """The status, kind and client message for `exc`; a 5xx is logged once, bounded (`log_failure`)."""
    if isinstance(exc, AccessError):
        return Failure(exc.status, "forbidden" if exc.status == 403 else "unauthorized", str(exc))
    if isinstance(exc, RagError):
        for cls, kind in _CLIENT_ERRORS:
            if isinstance(exc, cls):
                return Failure(422, kind, (paths or SourcePaths()).scrub(str(exc)))
    if isinstance(exc, StoreError):   # the store's one line: what is wrong with it and what to do
        if log:
            log_failure(where, exc)
        return Failure(503, "store_error", store_message(exc, paths))
    if isinstance(exc, ModelError):   # what the model said may hold secrets: it goes to the log only
        if log:
            log_failure(where, exc)
        return Failure(502, "model_error", MODEL_ERROR_MESSAGE)
    kind = "missing_dependency" if isinstance(exc, MissingDependencyError) else \
        "rag_error" if isinstance(exc, RagError) else "internal_error"
    if log:
        log_failure(where, exc)
    return Failure(500, kind, INTERNAL_ERROR_MESSAGE)


def store_message(exc: BaseException, paths: SourcePaths | None = None) -> str:
    """The one line a client is told of a `StoreError`: its first line, paths shown as sources are, bounded."""
    first = (str(exc).strip().splitlines() or ["the store cannot be read"])[0]
    return (paths or SourcePaths()).scrub(first)[:2000]
