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
        └── MissingDependencyError(ImportError)   an optional extra is not installed

Example:
    >>> from rag.core.errors import FilterError, RagError
    >>> issubclass(FilterError, RagError) and issubclass(FilterError, ValueError)
    True
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "FilterError",
    "InputError",
    "LoaderError",
    "MissingDependencyError",
    "RagError",
    "StoreError",
]


class RagError(Exception):
    """Base class of every error raised by `rag`."""


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


class MissingDependencyError(RagError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    @classmethod
    def for_extra(cls, package: str, extra: str, purpose: str) -> MissingDependencyError:
        """Build the standard message: what is missing, why it is needed and how to install it.

        Example:
            >>> print(MissingDependencyError.for_extra("fastapi", "server", "rag serve"))
            rag serve needs the optional package 'fastapi', which is not installed; install it with: pip install 'rag-runnables[server]'
        """
        return cls(
            f"{purpose} needs the optional package {package!r}, which is not installed; "
            f"install it with: pip install 'rag-runnables[{extra}]'"
        )
