"""Finished OpenTelemetry spans as a tree, for the tracing tests of the core and of the server."""

from __future__ import annotations

from typing import Literal

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def span_tree(exporter: InMemorySpanExporter, *, siblings: Literal["start", "name"] = "start") -> list[tuple[int, str]]:
    """(depth, name) of every finished span, parents before children; siblings by start time or by name
    (by name where they run concurrently, e.g. a request's parallel branches)."""
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time)
    by_id = {s.context.span_id: s for s in spans}
    children: dict[int | None, list] = {}
    for s in spans:
        parent = s.parent.span_id if s.parent is not None and s.parent.span_id in by_id else None
        children.setdefault(parent, []).append(s)
    out: list[tuple[int, str]] = []

    def walk(parent: int | None, depth: int) -> None:
        kids = children.get(parent, [])
        for s in sorted(kids, key=lambda s: s.name) if siblings == "name" else kids:
            out.append((depth, s.name))
            walk(s.context.span_id, depth + 1)

    walk(None, 0)
    return out


def span_attributes(exporter: InMemorySpanExporter, name: str) -> dict:
    """The attributes of the first finished span called `name`."""
    return dict(next(s for s in exporter.get_finished_spans() if s.name == name).attributes)
