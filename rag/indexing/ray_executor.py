"""A sync's work on a Ray cluster (`RayExecutor`): Ray Data over the changed files, the driver commits.

The driver (the process that called `add_documents`, holding the writer lock) decides what changed
exactly as a local sync does (`rag.indexing.plan.Plan`), marks those documents `pending` /
`updating`, reads the chunk ids the store already holds for the known ones, and runs one Ray Data
pipeline over them:

1. `map_batches(chunk_files)` (`rag.indexing.ray_chunking`): stateless tasks load each file within the run's `LoadLimits`
   (`ingest.load_item`), chunk, tag and add AutoContext (`ingest.prepare`); one row per chunk (id,
   embedded text, text, metadata as JSON, whether the store lacks it), plus the document's facts
   (chunk ids in order, title, summary, pages, load-limit notes) or why it could not be loaded; a
   file of `STREAM_CHARS` or more is prepared in slices (`ingest.prepare_stream`), each its own
   output block, as the local executor streams it, so no task holds all of a large file's chunks;
2. `map_batches(EmbedChunks)`: an actor pool (`concurrency` actors, each loading the embedding
   model once, in its constructor: `rag.indexing.embed_worker`; on a cluster with GPUs, one actor per
   GPU asking for `num_gpus=1`, the load-and-chunk tasks then taking one CPU each on the CPUs left:
   `embed_worker.actor_shape`) embeds the chunks the store lacks,
   `batch_size` at a time, timing its load, embedding and writes; for a server store
   (`rag.stores.connections`: PostgreSQL + pgvector, a Chroma server) each actor opens its own
   connection and writes them with an idempotent upsert by id, and returns only acknowledgements;
   for an embedded store (Chroma on disk, FAISS, LanceDB, ...) the driver writes the vectors returned;
3. the driver reads the results as they stream in; a document is committed (record `ok`, its stale
   chunks deleted) only once every one of its chunk ids is acknowledged. At the end it logs each
   embedding worker's clock (INFO, logger `rag.indexing.embed_worker`).

A killed worker's task is retried by Ray (the ids are deterministic and the writes idempotent, so a
retry writes nothing twice); a killed driver leaves records `pending`, and the next sync redoes
those documents, embedding only chunks the store still lacks. Results are identical to a local
run (tests/unit/indexing/test_indexing_ray.py): the stages are the same functions.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from rag.base.errors import ConfigError
from rag.base.tracing import index_span
from rag.indexing.embed_worker import WorkerClock, actor_shape, embeds_on_gpu, log_workers, worker_embedding
from rag.indexing.ingest import (
    STREAM_BATCH,
    STREAM_CHARS,
    Done,
    Item,
    begin_items,
    embed_texts,
    finish_items,
    scalar_metadata,
)
from rag.indexing.kb_parts import IndexTarget
from rag.indexing.plan import Plan
from rag.indexing.ray_chunking import chunk_files, component_settings
from rag.indexing.report import IndexReport
from rag.models.devices import embedding_device
from rag.stores.connections import connection_spec, open_connection, upsert_chunks

__all__ = ["EmbedChunks", "run_on_ray"]

logger = logging.getLogger(__name__)

_LOOKUP_BATCH = 500  # documents per query for the chunk ids a store already holds
_WRITE_BATCH = 1000  # chunks per driver write: written while the actors embed, so little is left after the last
_BLOCK_BYTES = 1 << 20  # about 256 chunk rows (embedded text, text and metadata)


class RaySettings(Protocol):
    """What the run reads of its `rag.indexing.executors.RayExecutor` (which imports this module)."""
    concurrency: int | None
    batch_size: int
    files_per_task: int

    @property
    def cluster_address(self) -> str | None: ...


def run_on_ray(settings: RaySettings, target: IndexTarget, plan: Plan, report: IndexReport, emit: Any) -> None:
    """Index the plan's changed documents on the cluster (see the module docstring)."""
    items: list[Item] = []
    for item in plan.items(quiesce=lambda: None):   # (nothing is written while the plan is made)
        if item is None:
            emit("file", 1)
        else:
            item.data = None   # (a worker reads the file again, the same way: not every file's bytes held here)
            items.append(item)
    if not items:
        return
    settings_json = component_settings(target)
    begin_items(target.records, items)
    existing = _existing_ids(target, items)
    spec = connection_spec(target.chunks)
    with _cluster(settings) as cpus, index_span("rag.index.ray", documents=len(items), cpus=cpus,
                                                writes="workers" if spec else "driver"):
        results = _Results(target, plan, items, existing, report, emit, driver_writes=spec is None)
        pipeline = _pipeline(settings, target, items, existing, spec, cpus, settings_json)
        for batch in pipeline.iter_batches(batch_size=None, batch_format="pandas"):
            results.take(batch.to_dict("records"))
        results.finish()


def _existing_ids(target: IndexTarget, items: list[Item]) -> dict[str, set[str]]:
    """The chunk ids the store holds for each known document (new ones have nothing stored)."""
    known = [i.doc_id for i in items if i.known]
    out: dict[str, set[str]] = {}
    for start in range(0, len(known), _LOOKUP_BATCH):
        ids, metas = target.chunks.get_metadatas({"doc_id": {"$in": known[start:start + _LOOKUP_BATCH]}})
        for cid, meta in zip(ids, metas, strict=True):
            out.setdefault(str((meta or {}).get("doc_id")), set()).add(cid)
    return out


@contextlib.contextmanager
def _cluster(settings: RaySettings) -> Iterator[int]:
    """Connected to the cluster for the run (one already connected is used and left running); yields its CPUs."""
    import ray

    started = False
    if not ray.is_initialized():
        address = settings.cluster_address
        kwargs: dict[str, Any] = {"address": address} if address else {"num_cpus": os.cpu_count() or 1,
                                                                         "include_dashboard": False}
        ray.init(**kwargs, logging_level=logging.WARNING, configure_logging=False,
                 runtime_env={"env_vars": {k: os.environ[k] for k in _FORWARDED_ENV if k in os.environ}})
        started = True
    from ray.data import DataContext

    context = DataContext.get_current()
    saved = context.enable_progress_bars, context.print_on_execution_start, context.target_max_block_size
    context.enable_progress_bars = context.print_on_execution_start = False   # (the caller shows its own progress)
    # Blocks of about one embedding batch: a block goes to one actor, so a large file's chunks spread over all
    context.target_max_block_size = _BLOCK_BYTES
    try:
        yield max(1, int(ray.cluster_resources().get("CPU", 1)))
    finally:
        context.enable_progress_bars, context.print_on_execution_start, context.target_max_block_size = saved
        if started:
            ray.shutdown()


#: settings a worker must see as the driver does (offline model files, no telemetry)
_FORWARDED_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "ANONYMIZED_TELEMETRY", "RAG_EMBEDDING_PRECISION",
                  "RAG_EMBEDDING_DEVICE", "RAG_CACHE_DIR", "PYTHONPATH")


def _pipeline(settings: RaySettings, target: IndexTarget, items: list[Item], existing: dict[str, set[str]],
              spec: dict[str, Any] | None, cpus: int, settings_json: str) -> Any:
    import ray

    rows = [_input_row(n, item, existing.get(item.doc_id, set())) for n, item in enumerate(items)]
    shape = actor_shape(cpus, int(ray.cluster_resources().get("GPU", 0)), settings.concurrency,
                        gpu_model=embeds_on_gpu(target.embedding_model))
    ds = ray.data.from_items(rows, override_num_blocks=max(1, -(-len(rows) // settings.files_per_task)))
    ds = ds.map_batches(chunk_files, fn_kwargs={"settings": settings_json, "stream": (STREAM_CHARS, STREAM_BATCH)},
                        batch_size=settings.files_per_task, batch_format="pandas", num_cpus=shape.chunk_cpus,
                        compute=ray.data.TaskPoolStrategy(size=shape.chunk_tasks))
    return ds.map_batches(EmbedChunks, fn_constructor_kwargs={"embedding": worker_embedding(target.embedding_model,
                                                                                            gpu=shape.gpus > 0),
                                                              "spec": spec},
                          batch_size=shape.batch_size or settings.batch_size, batch_format="pandas",
                          num_cpus=1, num_gpus=shape.gpus, compute=ray.data.ActorPoolStrategy(size=shape.actors))


def _input_row(n: int, item: Item, existing: set[str]) -> dict[str, Any]:
    pages = "" if item.docs is None else json.dumps(
        [[d.page_content, scalar_metadata(d.metadata)] for d in item.docs], ensure_ascii=False)
    return {"n": n, "key": item.key, "display": item.display, "doc_id": item.doc_id,
            "path": "" if item.path is None else str(item.path), "pages": pages,
            "existing": json.dumps(sorted(existing))}


class EmbedChunks:
    """Ray actor: embeds the chunks a store lacks; writes them to a server store itself, or returns the vectors.

    Every returned batch carries the actor's `WorkerClock` totals in its first row (`worker`)."""

    def __init__(self, embedding: Any, spec: dict[str, Any] | None) -> None:
        self.clock = WorkerClock()
        with self.clock.timed("load"):
            self.embedding = embedding()
        self.clock.device = embedding_device(self.embedding)
        self.spec = spec
        self.chunks: Any = None   # its own connection to the server store, opened on the first write

    def __call__(self, batch: Any) -> Any:
        import pandas as pd

        with self.clock.timed("busy"):
            rows = self._embed(batch.to_dict("records"))
        for k, row in enumerate(rows):
            row["worker"] = self.clock.totals() if k == 0 else ""
        return pd.DataFrame(rows)

    def _embed(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        import numpy as np

        todo = [k for k, r in enumerate(rows) if r["todo"] and r["id"]]
        with self.clock.timed("embed"):
            vectors, _ = embed_texts(self.embedding, [rows[k]["text"] for k in todo]) if todo else ([], 0)
        self.clock.batches, self.clock.embedded = self.clock.batches + 1, self.clock.embedded + len(todo)
        packed = [b""] * len(rows)
        for k, vector in zip(todo, vectors, strict=True):   # float64 bytes: exact, and one column type
            packed[k] = np.asarray(vector, dtype=np.float64).tobytes()
        if self.spec is not None and todo:
            if self.chunks is None:
                self.chunks = open_connection(self.spec, self.embedding)
            with self.clock.timed("write"), index_span("rag.index.write", chunks=len(todo)):
                upsert_chunks(self.chunks, [rows[k]["id"] for k in todo], vectors, [rows[k]["content"] for k in todo],
                              [json.loads(rows[k]["metadata"]) for k in todo])
        for row, vector in zip(rows, packed, strict=True):
            del row["text"]
            row["dim"] = len(vectors[0]) if vectors else 0
            if self.spec is None:
                row["vector"] = vector
            else:   # written: only the acknowledgement goes back
                row["content"] = row["metadata"] = ""
        return rows


@dataclass
class _Doc:
    acked: set[str] = field(default_factory=set)
    info: dict[str, Any] | None = None


class _Results:
    """The driver's side: writes (embedded stores), acknowledgements, commits, progress."""

    def __init__(self, target: IndexTarget, plan: Plan, items: list[Item], existing: dict[str, set[str]],
                 report: IndexReport, emit: Any, *, driver_writes: bool) -> None:
        self.target, self.plan, self.items, self.existing = target, plan, items, existing
        self.report, self.emit, self.driver_writes = report, emit, driver_writes
        self.docs: dict[int, _Doc] = {}
        self.buffer: list[dict[str, Any]] = []
        self.closed: set[int] = set()
        self.workers: dict[int, dict[str, Any]] = {}   # each embedding actor's latest clock totals

    def take(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            if row.get("worker"):
                totals = json.loads(row["worker"])   # (the latest: batches may arrive out of order)
                if totals["batches"] > self.workers.get(totals["pid"], {}).get("batches", 0):
                    self.workers[totals["pid"]] = totals
            n = int(row["n"])
            if n in self.closed:
                continue   # (a retried task's rows for a document already committed)
            if row["error"]:
                self._failed(n, row["error"])
                continue
            doc = self.docs.setdefault(n, _Doc())
            if row["info"] and doc.info is None:
                doc.info = json.loads(row["info"])
                self.items[n].notes = doc.info["notes"]
                self.plan.noted(self.items[n])   # (what hit a load limit, as a local run reports it)
                self.emit("pages", doc.info["pages"])
                self.emit("chunks", len(doc.info["chunk_ids"]))
            if int(row.get("dim") or 0):
                self.target.record_dimension(int(row["dim"]))
            if row["id"]:
                self.buffer.append(row)
        if not self.driver_writes or sum(1 for r in self.buffer if r["todo"]) >= _WRITE_BATCH:
            self._flush()

    def _flush(self) -> None:
        import numpy as np

        rows, self.buffer = self.buffer, []
        fresh = [r for r in rows if r["todo"] and r["id"] not in self.docs[int(r["n"])].acked]
        fresh = list({r["id"]: r for r in fresh}.values())   # (a retried task's rows come again)
        if self.driver_writes and fresh:
            with index_span("rag.index.write", chunks=len(fresh)):
                vectors = [np.frombuffer(r["vector"], dtype=np.float64).tolist() for r in fresh]
                self.target.chunks.add([r["id"] for r in fresh], vectors, [r["content"] for r in fresh],
                                       [json.loads(r["metadata"]) for r in fresh])
        self.report.chunks_added += len(fresh)
        self.report.embedded += len(fresh)
        self.emit("embeddings", len(fresh))
        for r in rows:
            self.docs[int(r["n"])].acked.add(r["id"])
        self._commit()

    def _commit(self) -> None:
        """Commit every document whose chunk ids are all acknowledged."""
        done = []
        for n, doc in list(self.docs.items()):
            if doc.info is None or not doc.acked.issuperset(doc.info["chunk_ids"]):
                continue
            item = self.items[n]
            stale = sorted(self.existing.get(item.doc_id, set()) - set(doc.info["chunk_ids"]))
            self.target.chunks.delete(stale)
            self.report.chunks_deleted += len(stale)
            done.append(Done(item, doc.info["chunk_ids"], doc.info["title"], doc.info["summary"], doc.info["pages"]))
            del self.docs[n]
            self.closed.add(n)
        if done:
            finish_items(self.target.records, done, self.report)
            self.emit("file", len(done))

    def _failed(self, n: int, reason: str) -> None:
        """A file that could not be loaded: its record as it was before this run, then as a local run does."""
        item = self.items[n]
        self.closed.add(n)
        self.docs.pop(n, None)
        before = self.plan.records.get(item.key)
        if before is None:
            self.target.records.delete(item.key)
        else:
            self.target.records.put_many([replace(before)])
        self.plan.failed(item, reason, quiesce=lambda: None)
        self.emit("file", 1)

    def finish(self) -> None:
        """Write what is buffered; every document must be committed or reported as skipped."""
        self._flush()
        log_workers(self.workers)
        self.report.device = ", ".join(sorted({str(t.get("device") or "") for t in self.workers.values()} - {""}))
        missing = [self.items[n].display for n in range(len(self.items)) if n not in self.closed]
        if missing:
            raise ConfigError(f"the Ray pipeline returned no result for {len(missing)} document(s), e.g. "
                              f"{missing[0]!r}; they stay pending and the next sync indexes them again")
