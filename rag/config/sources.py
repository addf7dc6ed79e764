"""`sources:` of a `knowledge_base` resource: the places it stays in sync with, and when (docs/sources.md).

    resources:
      - name: handbook
        kind: knowledge_base
        path: .rag
        sources:
          - {name: site, kind: web, url: "https://handbook.example.org/sitemap.xml", schedule: {every: 3600}}
          - {name: reports, kind: object_store, url: "s3://acme/reports",
             storage_options: {endpoint_url: "https://s3.example.org", key_env: S3_KEY, secret_env: S3_SECRET},
             access: {"*/hr/*": {groups: [hr]}}}
          - {name: wiki, kind: git, repository: "https://git.example.org/wiki.git", revision: main}
          - {name: notes, kind: folder, path: notes, schedule: {every: 600}}

A source without `schedule` is synced when the config is built (as an `index:` block is); one with
`schedule: {every: SECONDS}` is synced by `rag serve`'s one background writer, first when the
server starts, then every `every` seconds (`rag.server.sync_schedule`), and its last report is in
`/health`. Everything is data: kinds from an allowlist, secrets as environment variable names.

Example:
    >>> spec = source_spec({"name": "site", "kind": "web", "url": "https://a.org/sitemap.xml",
    ...                     "schedule": {"every": 3600}})
    >>> spec.every, type(spec.build()).__name__
    (3600.0, 'WebSource')
    >>> source_spec({"kind": "web", "url": "https://a.org/", "schedule": {"evry": 1}})
    Traceback (most recent call last):
    ...
    rag.base.errors.ConfigError: source 'web': schedule takes every (seconds, at least 1); got keys ['evry']
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag.base.errors import ConfigError
from rag.base.text import terminal_safe
from rag.indexing.folder_source import FolderSource
from rag.sources.base import Source
from rag.sources.specs import SOURCE_KINDS, source_from

__all__ = ["SourceSpec", "source_spec", "sync_now"]

logger = logging.getLogger(__name__)

#: (a folder syncs as `add_documents` does; for access per file, use kind object_store with a file:// URL)
_FOLDER_OPTIONS = ("path", "include", "exclude", "follow_symlinks")


@dataclass(frozen=True)
class SourceSpec:
    """A checked `sources:` entry: its name, its options, and its schedule (`every` seconds, or None)."""

    name: str
    spec: Mapping[str, Any]
    every: float | None

    def build(self) -> Source:
        """The source (a new object each time: a source holds listing state)."""
        options = {k: v for k, v in self.spec.items() if k not in ("name", "schedule")}
        if options.get("kind") == "folder":
            options.pop("kind")
            return FolderSource(str(Path(options.pop("path")).expanduser()), **options)
        return source_from(options)


def source_spec(spec: Any) -> SourceSpec:
    """Check one `sources:` entry (see the module docstring); `ConfigError` naming what is wrong and what is valid."""
    if not isinstance(spec, Mapping):
        raise ConfigError(f"a sources entry is a mapping with kind ({', '.join((*SOURCE_KINDS, 'folder'))}), "
                          f"got {type(spec).__name__}")
    kind = spec.get("kind")
    name = spec.get("name", kind)
    if not isinstance(name, str) or not 0 < len(name) <= 63:
        raise ConfigError(f"source name must be 1-63 characters, got {str(name)[:80]!r}")
    every = _every(spec.get("schedule"), name)
    checked = SourceSpec(name, dict(spec), every)
    if kind == "folder":
        if unknown := [k for k in spec if k not in (*_FOLDER_OPTIONS, "kind", "name", "schedule")]:
            raise ConfigError(f"source {name!r}: option {str(unknown[0])[:40]!r} is not valid for kind folder; "
                              f"valid: {', '.join(_FOLDER_OPTIONS)}")
        if not isinstance(spec.get("path"), str):
            raise ConfigError(f"source {name!r}: kind folder needs a path")
    checked.build()   # every other kind: its options checked by building it (nothing is opened)
    return checked


def _every(schedule: Any, name: str) -> float | None:
    if schedule is None:
        return None
    if not isinstance(schedule, Mapping) or set(schedule) != {"every"}:
        keys = sorted(schedule) if isinstance(schedule, Mapping) else schedule
        raise ConfigError(f"source {name!r}: schedule takes every (seconds, at least 1); got keys {keys!r}")
    every = schedule["every"]
    if isinstance(every, bool) or not isinstance(every, int | float) or not 1 <= every <= 31 * 86400:
        raise ConfigError(f"source {name!r}: schedule.every must be seconds from 1 to 2678400, got {every!r}")
    return float(every)


def sync_now(kb: Any, spec: SourceSpec, *, resource: str) -> Any:
    """Sync one source into `kb` now, logging what was skipped; returns the report."""
    source = spec.build()
    try:
        report = kb.sync(source)
    finally:
        source.close()
    for skipped in report.skipped:
        logger.warning("resource %s, source %s: skipped %s", resource, spec.name, terminal_safe(skipped.reason))
    logger.info("resource %s, source %s: %s", resource, spec.name, report.summary())
    return report
