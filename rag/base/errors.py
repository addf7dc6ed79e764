"""Errors raised by `rag`.

Every error the library raises on purpose is a `RagError`, so callers can catch one type.
Errors about bad input also subclass `ValueError`, and a missing optional package also
subclasses `ImportError`, so generic handlers keep working::

    Exception
    └── RagError
        ├── FilterError(ValueError)        bad metadata filter (unknown operator, empty $in, ...)
        ├── ConfigError(ValueError)        bad settings: unknown resource or key, bad YAML, model mismatch
        ├── InputError(ValueError)         a bad chain input (no question, wrong type)
        ├── LoaderError(ValueError)        a file that cannot be read (encrypted PDF, binary, ...)
        ├── StoreError                     the store is missing, locked or inconsistent
        ├── ModelError                     the answer model failed (unreachable, refused the request, ...)
        └── MissingDependencyError(ImportError)   an optional extra is not installed

Values quoted in messages go through `short_repr`, and every message is capped at
`MAX_MESSAGE_CHARS`, so a hostile input (a 32 MB alias-expanded value, a filter nested 100,000
levels deep) can never become a 32 MB message or a `RecursionError` while the error is built.

Example:
    >>> from rag.base.errors import FilterError, RagError
    >>> issubclass(FilterError, RagError) and issubclass(FilterError, ValueError)
    True
    >>> short_repr("x" * 1000)[:12], len(short_repr("x" * 1000)) < 100
    ("'xxxxxxxxxxx", True)
"""

from __future__ import annotations

import reprlib
from typing import Any

__all__ = [
    "MAX_MESSAGE_CHARS",
    "AccessError",
    "ConfigError",
    "FilterError",
    "InputError",
    "LoaderError",
    "MissingDependencyError",
    "ModelError",
    "RagError",
    "RemovedError",
    "StoreError",
    "from_validation",
    "removed_names",
    "short_repr",
]

#: The longest message a `RagError` keeps; the middle of a longer one is cut out.
MAX_MESSAGE_CHARS = 2000

_REPR = reprlib.Repr()
for _name in ("maxtuple", "maxlist", "maxarray", "maxdict", "maxset", "maxfrozenset", "maxdeque"):
    setattr(_REPR, _name, 6)
_REPR.maxlevel, _REPR.maxstring, _REPR.maxlong, _REPR.maxother = 3, 60, 40, 60


def short_repr(value: Any) -> str:
    """A bounded `repr` for quoting a user's value in an error message.

    Strings, numbers and containers are shortened with `...` (at most 3 levels, 6 items and
    60 characters per string), so a huge or deeply nested value costs nothing to quote.

    Example:
        >>> short_repr({"a": {"b": {"c": {"d": 1}}}})
        "{'a': {'b': {'c': {...}}}}"
    """
    try:
        return _REPR.repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__ must not replace the error being reported
        return f"<{type(value).__name__}>"


def _cap(message: str) -> str:
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    half = MAX_MESSAGE_CHARS // 2 - 20
    return f"{message[:half]} ...[{len(message) - 2 * half} characters cut]... {message[-half:]}"


class RagError(Exception):
    """Base class of every error raised by `rag`.

    A message longer than `MAX_MESSAGE_CHARS` is cut in the middle (it still says what and where).
    """

    def __init__(self, *args: object) -> None:
        if len(args) == 1 and isinstance(args[0], str):
            args = (_cap(args[0]),)
        super().__init__(*args)


class FilterError(RagError, ValueError):
    """A metadata filter is not valid in the portable filter dialect."""


class ConfigError(RagError, ValueError):
    """Settings are invalid: unknown names or keys, wrong types, incompatible stores."""


class InputError(RagError, ValueError):
    """A chain was called with input it cannot use (no question, wrong type)."""


class LoaderError(RagError, ValueError):
    """A document could not be loaded (unreadable, encrypted, binary, empty)."""


class StoreError(RagError):
    """A store is missing, locked by another writer, or inconsistent."""


class ModelError(RagError):
    """The answer model failed: an endpoint that is down, a request it refused, a model that crashed."""


class AccessError(RagError, PermissionError):
    """Who is asking is unknown (`status` 401: no, a bad or an expired credential) or may not do this (403).

    The message says only the kind (`missing credential`, `expired token`, ...), never why a token failed
    in detail, what was expected or who else could.
    """

    def __init__(self, message: str, *, status: int = 401) -> None:
        super().__init__(message)
        self.status = status


class MissingDependencyError(RagError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    @classmethod
    def for_extra(cls, package: str, extra: str, purpose: str) -> MissingDependencyError:
        """Build the standard message: what is missing, why it is needed and how to install it.

        Example:
            >>> print(MissingDependencyError.for_extra("fastapi", "server", "rag serve"))
            rag serve needs the optional package 'fastapi', which is not installed; install it from your rag checkout with: pip install -e '.[server]'
        """
        return cls(
            f"{purpose} needs the optional package {package!r}, which is not installed; "
            f"install it from your rag checkout with: pip install -e '.[{extra}]'"
        )


class RemovedError(RagError, ImportError):
    """A name this library no longer has; the message says what replaces it."""


def removed_names(module: str, replacements: dict[str, str]) -> Any:
    """A module `__getattr__` that raises `RemovedError` naming the replacement of each removed name.

    Example:
        >>> getattr_ = removed_names("rag.x", {"Old": "use New"})
        >>> try:
        ...     getattr_("Old")
        ... except RemovedError as err:
        ...     print(err)
        rag.x.Old was removed: use New
    """
    def __getattr__(name: str) -> Any:
        if name in replacements:
            raise RemovedError(f"{module}.{name} was removed: {replacements[name]}")
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


def from_validation(exc: Any, what: str) -> ConfigError:
    """A `ConfigError` for a pydantic `ValidationError`: which field, what is wrong, what was given.

    Public constructors (`RAG(...)`, `Resource(...)`) raise this instead of pydantic's error, so
    every user mistake is a `RagError` with the message style of the filter dialect.

    Example:
        >>> from pydantic import BaseModel, Field, ValidationError
        >>> class Settings(BaseModel):
        ...     k: int = Field(ge=1)
        >>> try:
        ...     Settings(k=0)
        ... except ValidationError as exc:
        ...     print(from_validation(exc, "Settings"))
        invalid Settings: k: Input should be greater than or equal to 1 (got 0)
    """
    parts = []
    for error in exc.errors()[:5]:
        loc = ".".join(str(part) for part in error.get("loc", ())) or "(top level)"
        message = str(error.get("msg", "")).removeprefix("Value error, ")
        parts.append(f"{loc}: {message} (got {short_repr(error.get('input'))})")
    return ConfigError(f"invalid {what}: " + "; ".join(parts))
