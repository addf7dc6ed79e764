"""`configure_otlp_export`: send `rag`'s spans to an OpenTelemetry collector over OTLP (see docs/observability.md)."""

from __future__ import annotations

import os

from rag.base.errors import MissingDependencyError
from rag.base.tracing import tracing_enabled

__all__ = ["configure_otlp_export"]


def configure_otlp_export() -> bool:
    """Export spans over OTLP when tracing is on and `OTEL_EXPORTER_OTLP_ENDPOINT` is set.

    `rag serve` and `rag index` call it. It installs an SDK tracer provider (service name from
    `OTEL_SERVICE_NAME`, default `rag`) with a batching OTLP/gRPC exporter, unless the process
    already has an SDK provider (e.g. set up by `opentelemetry-instrument`). Returns whether it
    installed one.

    Raises:
        MissingDependencyError: the OpenTelemetry SDK or its OTLP exporter is not installed.
    """
    if not tracing_enabled() or not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return False
    from opentelemetry import trace

    try:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter,
        )
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise MissingDependencyError.for_extra("opentelemetry.sdk", "tracing", "OTLP export of traces") from exc
    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return False
    provider = TracerProvider(resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "rag")}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return True
