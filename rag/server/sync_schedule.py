"""`SyncScheduler`: `rag serve`'s one background writer, syncing the scheduled `sources:` of a config.

One thread runs every scheduled sync, one at a time (so the server has one writer however many
sources it has; each sync also takes its knowledge base's writer lock): each source is synced when
the server starts, then `every` seconds after its last sync ended. A sync that fails is logged and
tried again at its next time; the last report of each source is what `/health` shows under `sync`
(counts, seconds, when, and the error kind if it failed, never the items' names).

Example:
    >>> scheduler = SyncScheduler([])
    >>> scheduler.status()
    {}
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rag.base.text import terminal_safe
from rag.config.sources import SourceSpec, sync_now

__all__ = ["ScheduledSync", "SyncScheduler", "scheduled_syncs"]

logger = logging.getLogger(__name__)


@dataclass
class ScheduledSync:
    """One scheduled source: the resource and knowledge base it syncs into, and when it runs next."""

    resource: str
    kb: Any
    spec: SourceSpec
    next_at: float = 0.0
    last: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.resource}/{self.spec.name}"


def scheduled_syncs(config: Any) -> list[ScheduledSync]:
    """The scheduled sources of a built config's knowledge base resources (after `RAG.from_config`)."""
    jobs = []
    for resource in getattr(config, "resources", ()):
        kb = getattr(resource, "_kb", None)
        if kb is None or not getattr(resource, "sources", None):
            continue
        jobs += [ScheduledSync(resource.name, kb, spec) for spec in resource.source_specs() if spec.every is not None]
    return jobs


class SyncScheduler:
    """Runs scheduled syncs in one background thread (see the module docstring)."""

    def __init__(self, jobs: list[ScheduledSync], *, clock: Any = time.monotonic) -> None:
        self.jobs, self.clock = jobs, clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.runs = 0

    def start(self) -> SyncScheduler:
        """Start the writer thread (nothing to do without jobs)."""
        if self.jobs and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="rag-source-sync", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the sync in progress, if any."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def status(self) -> dict[str, dict[str, Any]]:
        """The last report of each source, by `resource/source`."""
        with self._lock:
            return {job.key: dict(job.last) for job in self.jobs if job.last}

    def run_due(self) -> int:
        """Run every job that is due now, in order; returns how many ran."""
        ran = 0
        for job in sorted(self.jobs, key=lambda j: j.next_at):
            if self._stop.is_set() or job.next_at > self.clock():
                continue
            self._run(job)
            ran += 1
        return ran

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.run_due()
            wait = min(job.next_at for job in self.jobs) - self.clock()
            self._stop.wait(max(0.05, wait))

    def _run(self, job: ScheduledSync) -> None:
        started = datetime.now(UTC).isoformat(timespec="seconds")
        try:
            report = sync_now(job.kb, job.spec, resource=job.resource)
            last = {"at": started, "ok": True, "added": len(report.added), "updated": len(report.updated),
                    "unchanged": len(report.unchanged), "deleted": len(report.deleted),
                    "skipped": len(report.skipped), "embedded": report.embedded, "seconds": round(report.seconds, 3)}
        except Exception as exc:  # noqa: BLE001 - a failed sync is retried at its next time; the server goes on
            logger.warning("source %s: sync failed: %s", job.key, terminal_safe(f"{type(exc).__name__}: {exc}"))
            last = {"at": started, "ok": False, "error": type(exc).__name__}
        with self._lock:
            job.last = last
            self.runs += 1
        job.next_at = self.clock() + job.spec.every
