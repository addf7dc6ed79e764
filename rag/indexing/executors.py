"""Where a sync's work runs: this process (`LocalExecutor`, the default) or a Ray cluster (`RayExecutor`).

`rag.indexing.sync.Syncer` decides what changed on the driver, then an executor loads, chunks, adds
AutoContext and embeds the changed documents with the stages of `rag.indexing.ingest`, and the
driver commits their records once the store has their chunks. Both executors give the same chunk
ids, texts, metadata, vectors and report (docs/scale.md).

- `LocalExecutor`: groups of documents (about 250 chunks first, doubling up to 5,000); each group is
  prepared in the caller's thread while the previous one is embedded (sorted by length) and written in
  one writer thread: a producer at most one group ahead of the model, so memory stays bounded. A file
  larger than a group is streamed: chunked, embedded and written in slices of 5,000 chunks, its
  record committed after the last one (`rag.indexing.ingest.prepare_stream`).
- `RayExecutor`: Ray Data over the changed files: stateless `map_batches` tasks load, chunk and
  add AutoContext, an actor pool embeds (the model loaded once per actor), and either the actors
  write to a server store (PostgreSQL + pgvector, a Chroma server: each actor its own
  connection) or the driver writes what they return (embedded stores). Needs
  `pip install 'rag-runnables[ray]'`; `import rag` never imports Ray.

Example:
    >>> executor_from("local")
    LocalExecutor()
    >>> executor_from({"kind": "ray", "concurrency": 2, "batch_size": 128})
    RayExecutor(address=None, concurrency=2, batch_size=128, files_per_task=1)
    >>> executor_from("dask")
    Traceback (most recent call last):
    ...
    rag.base.errors.ConfigError: executor 'dask' is not valid; valid: local, ray (or a mapping with kind: local | ray)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from rag.base.errors import ConfigError, MissingDependencyError
from rag.base.tracing import index_span
from rag.indexing.ingest import (
    STREAM_BATCH,
    STREAM_CHARS,
    Done,
    Item,
    Prepared,
    begin_items,
    done_of,
    embed_texts,
    finish_items,
    item_chars,
    load_item,
    prepare,
    prepare_stream,
    streams,
)
from rag.indexing.kb_parts import IndexTarget
from rag.indexing.plan import Plan
from rag.indexing.report import IndexReport
from rag.indexing.writer import Writer

__all__ = ["EXECUTORS", "ExecutorLike", "LocalExecutor", "RayExecutor", "executor_from"]

EXECUTORS = ("local", "ray")
_GROUP_CHARS = STREAM_CHARS  # text per processing group (~5,000 chunks): bounded memory; a larger file streams
_GROUP_DOCS = 5000
#: the first group is small, and each next one twice as large up to _GROUP_CHARS: the model starts on the first
#: few hundred chunks while the files after them are still being read and chunked
_FIRST_GROUP_CHARS = 250_000
_EMBED_BATCH = 512  # chunks per embedding call (and progress event)
_WRITE_BATCH = STREAM_BATCH  # chunks per Chroma add (Chroma 1.5 accepts up to ~5.4k) and per streamed slice

Emit = Callable[[str, int], None]


class LocalExecutor:
    """Run the stages in this process (the default; no Ray needed)."""

    name = "local"

    def __repr__(self) -> str:
        return "LocalExecutor()"

    def run(self, target: IndexTarget, plan: Plan, report: IndexReport, emit: Emit) -> None:
        """Load each changed file, prepare groups in this thread, embed and write them in the writer thread."""
        components = target.components
        group: list[Item] = []
        pending_chars, limit, writer = [0], [_FIRST_GROUP_CHARS], Writer()

        def flush(force_write: bool = False) -> None:
            pending_chars[0] += item_chars(group[-1]) if group else 0
            if group and (force_write or len(group) >= _GROUP_DOCS or pending_chars[0] >= limit[0]):
                prepared = prepare(components, list(group))
                emit("chunks", len(prepared.chunks))
                writer.submit(_store, target, prepared, report, emit)
                group.clear()
                pending_chars[0] = 0
                limit[0] = min(2 * limit[0], _GROUP_CHARS)

        try:
            for item in plan.items(quiesce=writer.wait):
                if item is not None and (reason := load_item(item, components.limits)) is not None:
                    plan.failed(item, reason, quiesce=writer.wait)
                    item = None
                elif item is not None:
                    plan.noted(item)
                emit("file", 1)
                if item is None:
                    continue
                emit("pages", len(item.docs) if any("page" in d.metadata for d in item.docs) else 0)  # PDFs
                if streams(components, item, _GROUP_CHARS):
                    flush(force_write=True)   # (the group before it)
                    _stream(target, item, report, emit, writer)
                    continue
                group.append(item)
                flush()
            flush(force_write=True)
            writer.wait()
        finally:
            writer.close()


def _store(target: IndexTarget, prepared: Prepared, report: IndexReport, emit: Emit) -> None:
    """Embed the new chunks of a prepared group and write them, then commit its records."""
    existing = _begin(target, prepared.items)
    _write_missing(target, prepared, existing, report, emit)
    _finish(target, existing, prepared.ids, done_of(prepared), report)


def _begin(target: IndexTarget, items: list[Item]) -> set[str]:
    """Mark the items' records pending; the chunk ids the store holds for them.

    Records are marked pending first; chunks are written only after that, so a document without a
    record has nothing in the store: the metadata query (costly for large groups) is skipped for those.
    """
    begin_items(target.records, items)
    doc_ids = [i.doc_id for i in items if i.known]
    return set(target.chunks.get_ids({"doc_id": {"$in": doc_ids}})) if doc_ids else set()


def _write_missing(target: IndexTarget, prepared: Prepared, existing: set[str], report: IndexReport,
                   emit: Emit) -> None:
    """Embed and add the prepared chunks the store does not hold (`existing`: what it holds of their documents)."""
    ids = prepared.ids
    todo = [n for n, cid in enumerate(ids) if cid not in existing]
    vectors = _embed_by_length(target, [prepared.texts[n] for n in todo], report, emit)
    # Chroma's cost per call is high: write in large batches. `todo` holds only ids the store does
    # not have (known documents were looked up above, new ones have nothing stored): `add`, no check.
    for begin in range(0, len(todo), _WRITE_BATCH):
        part = range(begin, min(begin + _WRITE_BATCH, len(todo)))
        with index_span("rag.index.write", chunks=len(part)):
            target.chunks.add([ids[todo[k]] for k in part], [vectors[k] for k in part],
                              [prepared.chunks[todo[k]].page_content for k in part],
                              [prepared.metas[todo[k]] for k in part])
        report.chunks_added += len(part)


def _embed_by_length(target: IndexTarget, texts: list[str], report: IndexReport, emit: Emit) -> list[list[float]]:
    """Vectors for `texts` in their order, embedded `_EMBED_BATCH` at a time from the shortest to the longest.

    Sorting the whole group (not each call) lets every forward pass pad little: on a GPU, where a batch
    is as slow as its longest text, that is most of the gain; the order is restored for the writes.
    """
    order = sorted(range(len(texts)), key=lambda n: len(texts[n]))
    vectors: list[list[float]] = [[] for _ in texts]
    for begin in range(0, len(order), _EMBED_BATCH):
        batch = order[begin:begin + _EMBED_BATCH]
        embedded_vectors, embedded = embed_texts(target.embedding, [texts[n] for n in batch])
        target.record_dimension(len(embedded_vectors[0]))
        report.embedded += embedded
        for n, vector in zip(batch, embedded_vectors, strict=True):
            vectors[n] = vector
        emit("embeddings", len(batch))
    return vectors


def _finish(target: IndexTarget, existing: set[str], ids: list[str], done: list[Done], report: IndexReport) -> None:
    """Delete the documents' chunks no longer produced, then commit their records (`ok`)."""
    stale = sorted(existing - set(ids))
    target.chunks.delete(stale)
    report.chunks_deleted += len(stale)
    finish_items(target.records, done, report)


@dataclass
class _Streamed:
    """One large file written in slices: what its record needs once the store holds every slice."""

    item: Item
    existing: set[str] | None = None
    ids: list[str] = field(default_factory=list)
    title: str | None = None
    summary: str = ""


def _stream(target: IndexTarget, item: Item, report: IndexReport, emit: Emit, writer: Writer) -> None:
    """Index one large file in slices of `_WRITE_BATCH` chunks: chunked here while the writer thread embeds and
    writes the slice before; its record is committed after the last slice is stored (a failure leaves it pending,
    and the next sync writes only the chunks the store lacks)."""
    streamed = _Streamed(item)
    for prepared in prepare_stream(target.components, item, batch=_WRITE_BATCH):
        emit("chunks", len(prepared.chunks))
        writer.submit(_store_slice, target, prepared, streamed, report, emit)
    writer.submit(_end_stream, target, streamed, report)


def _store_slice(target: IndexTarget, prepared: Prepared, streamed: _Streamed, report: IndexReport,
                 emit: Emit) -> None:
    if streamed.existing is None:
        streamed.existing = _begin(target, [streamed.item])
    _write_missing(target, prepared, streamed.existing, report, emit)
    streamed.ids += prepared.ids
    if streamed.title is None and prepared.chunks:
        streamed.title = str(prepared.chunks[0].metadata.get("title", ""))
    streamed.summary = prepared.summaries.get(streamed.item.doc_id, "")


def _end_stream(target: IndexTarget, streamed: _Streamed, report: IndexReport) -> None:
    item = streamed.item
    existing = streamed.existing if streamed.existing is not None else _begin(target, [item])
    _finish(target, existing, streamed.ids, [Done(item, streamed.ids, streamed.title or "", streamed.summary,
                                                  len(item.docs or ()))], report)


class RayExecutor:
    """Run loading, chunking, AutoContext and embedding on a Ray cluster (Ray Data); the driver commits.

    Args:
        address: the cluster (`ray://...` or `host:port`); None: `RAY_ADDRESS`, else a local Ray
            started for the run with this machine's cores (and stopped after it).
        concurrency: embedding actors (each loads the model once); None: one per CPU of the cluster.
        batch_size: chunks per embedding call of an actor (and per store write of a worker).
        files_per_task: files per load-and-chunk task.

    Raises:
        ConfigError: a value out of range (the message names it and what is valid).
    """

    name = "ray"

    def __init__(self, *, address: str | None = None, concurrency: int | None = None, batch_size: int = 256,
                 files_per_task: int = 1) -> None:
        if address is not None and (not isinstance(address, str) or not address.strip()):
            raise ConfigError(f"address must be a Ray address such as 'ray://head:10001' or 'auto', got {address!r}")
        for label, value, low in (("concurrency", concurrency, 1), ("batch_size", batch_size, 1),
                                  ("files_per_task", files_per_task, 1)):
            if value is None and label == "concurrency":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 100_000:
                raise ConfigError(f"{label} must be an integer from {low} to 100000, got {value!r}")
        self.address, self.concurrency, self.batch_size, self.files_per_task = (address, concurrency, batch_size,
                                                                                files_per_task)

    def __repr__(self) -> str:
        return (f"RayExecutor(address={self.address!r}, concurrency={self.concurrency!r}, "
                f"batch_size={self.batch_size!r}, files_per_task={self.files_per_task!r})")

    @property
    def cluster_address(self) -> str | None:
        """The address to connect to: the one given, else `RAY_ADDRESS`, else None (start a local Ray)."""
        return self.address or os.environ.get("RAY_ADDRESS") or None

    def run(self, target: IndexTarget, plan: Plan, report: IndexReport, emit: Emit) -> None:
        """Index the plan's changed documents on the cluster (`rag.indexing.ray_executor`)."""
        try:
            import ray  # noqa: F401 - only to say what to install
        except ImportError as exc:
            raise MissingDependencyError.for_extra("ray", "ray", "indexing with executor='ray'") from exc
        from rag.indexing.ray_executor import run_on_ray

        run_on_ray(self, target, plan, report, emit)


#: what `executor_from` reads: None or "local" (this process), "ray", a mapping `{kind: ray, ...}`, or an executor
ExecutorLike = Union[None, str, Mapping[str, Any], LocalExecutor, RayExecutor]  # noqa: UP007 - a runtime alias


def executor_from(spec: ExecutorLike) -> LocalExecutor | RayExecutor:
    """An executor from None / "local" / "ray", a mapping `{kind: ray, address, concurrency, ...}` or an executor."""
    if spec is None:
        return LocalExecutor()
    if isinstance(spec, LocalExecutor | RayExecutor):
        return spec
    kind, options = (spec, {}) if isinstance(spec, str) else (None, None)
    if isinstance(spec, dict):
        options = {k: v for k, v in spec.items() if k != "kind"}
        kind = spec.get("kind")
    if kind == "local" and not options:
        return LocalExecutor()
    if kind == "ray":
        try:
            return RayExecutor(**options)
        except TypeError as exc:
            raise ConfigError(f"executor: {exc}; valid keys: kind, address, concurrency, batch_size, "
                              "files_per_task") from exc
    raise ConfigError(f"executor {kind if kind is not None else spec!r} is not valid; valid: local, ray "
                      "(or a mapping with kind: local | ray)")
