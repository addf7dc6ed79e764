"""`source_from`: a source from a URL (`rag index s3://bucket/prefix`) or a config mapping (`sources:` in YAML).

A config names what to build with data only (no import of a class by name, no code): `kind` is one
of `object_store`, `web`, `git`, and the rest are the source's options. Secrets are never written in
a config: `storage_options` takes `key_env`, `secret_env`, `token_env` naming environment variables.

Example:
    >>> source_from("s3://bucket/reports")
    ObjectStoreSource('s3://bucket/reports/')
    >>> source_from({"kind": "web", "url": "https://docs.example.org/sitemap.xml", "max_pages": 200})
    WebSource('https://docs.example.org/sitemap.xml', mode='sitemap')
    >>> source_from({"kind": "ftp"})
    Traceback (most recent call last):
    ...
    rag.base.errors.ConfigError: source kind 'ftp' is not valid; valid: object_store, web, git
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from rag.base.errors import ConfigError
from rag.sources.base import Source
from rag.sources.git import GitSource
from rag.sources.object_store import ObjectStoreSource
from rag.sources.web import WebSource

__all__ = ["OBJECT_STORE_SCHEMES", "SOURCE_KINDS", "is_source_url", "source_from"]

SOURCE_KINDS = ("object_store", "web", "git")
OBJECT_STORE_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "memory")
_OPTIONS = {
    "object_store": ("url", "storage_options", "include", "exclude", "max_bytes", "acl_from_tags", "access"),
    "web": ("url", "sitemap", "allow_private", "max_pages", "max_sitemaps", "max_bytes", "timeout", "max_seconds",
            "access"),
    "git": ("repository", "revision", "include", "exclude", "cache_dir", "max_bytes", "access"),
}
_STORAGE_PLAIN = ("endpoint_url", "anon", "region", "use_ssl")
_STORAGE_ENV = {"key_env": "key", "secret_env": "secret", "token_env": "token"}


def is_source_url(text: str) -> bool:
    """Whether a `rag index` argument names a remote source (an object store or web URL) rather than a path."""
    scheme, sep, _ = str(text).partition("://")
    return bool(sep) and scheme.lower() in (*OBJECT_STORE_SCHEMES, "http", "https")


def source_from(spec: str | Mapping[str, Any], **options: Any) -> Source:
    """A source from a URL (object store or web) or a mapping with `kind` (see the module docstring).

    Raises:
        ConfigError: an unknown kind or option, a literal secret, a URL of no known kind.
    """
    if isinstance(spec, str):
        scheme = spec.partition("://")[0].lower()
        if scheme in OBJECT_STORE_SCHEMES:
            return ObjectStoreSource(spec, **options)
        if scheme in ("http", "https"):
            return WebSource(spec, **options)
        raise ConfigError(f"{spec[:120]!r} is not a source URL; valid: {', '.join(OBJECT_STORE_SCHEMES)}, http, "
                          "https (schemes), or a mapping with kind")
    if not isinstance(spec, Mapping):
        raise ConfigError(f"a source is a URL or a mapping with kind, got {type(spec).__name__}")
    kind = spec.get("kind")
    if kind not in SOURCE_KINDS:
        raise ConfigError(f"source kind {str(kind)[:40]!r} is not valid; valid: {', '.join(SOURCE_KINDS)}")
    given = {k: v for k, v in spec.items() if k not in ("kind", "name", "schedule")}
    if unknown := [k for k in given if k not in _OPTIONS[kind]]:
        raise ConfigError(f"source option {str(unknown[0])[:40]!r} is not valid for kind {kind}; valid: "
                          f"{', '.join(_OPTIONS[kind])}")
    if "storage_options" in given:
        given["storage_options"] = _storage_options(given["storage_options"])
    try:
        if kind == "object_store":
            return ObjectStoreSource(**given)
        if kind == "web":
            return WebSource(**given)
        return GitSource(**given)
    except TypeError as exc:
        raise ConfigError(f"source of kind {kind}: {exc}") from exc


def _storage_options(value: Any) -> dict[str, Any]:
    """fsspec options from a config: plain settings, and secrets read from the environment variables named."""
    if not isinstance(value, Mapping):
        raise ConfigError("storage_options must be a mapping")
    out: dict[str, Any] = {}
    for key, given in value.items():
        if key in _STORAGE_PLAIN:
            out["client_kwargs" if key == "region" else key] = {"region_name": given} if key == "region" else given
        elif key in _STORAGE_ENV:
            if not isinstance(given, str) or given not in os.environ:
                raise ConfigError(f"storage_options.{key} names the environment variable {str(given)[:60]!r}, "
                                  "which is not set")
            out[_STORAGE_ENV[key]] = os.environ[given]
        elif key in _STORAGE_ENV.values():
            raise ConfigError(f"storage_options.{key}: secrets are not written in a config; name an environment "
                              f"variable with {key}_env")
        else:
            raise ConfigError(f"storage_options key {str(key)[:40]!r} is not valid; valid: "
                              f"{', '.join((*_STORAGE_PLAIN, *_STORAGE_ENV))}")
    return out
