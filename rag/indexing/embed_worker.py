"""An embedding worker of a Ray sync: its model (`worker_embedding`) and what it spent its time on (`WorkerClock`).

`worker_embedding` turns the knowledge base's embedding model into a factory the worker calls in its
constructor: the default MiniLM is rebuilt from its settings and loaded there (so the load overlaps
the loading and chunking of the files, not the first batch), any other model is sent as it is.

Each embedding actor (`rag.indexing.ray_executor.EmbedChunks`) keeps one clock and sends its totals
back with every batch it returns; the driver keeps the latest totals per worker and logs one line per
worker at the end of the run (logger `rag.indexing.embed_worker`, level INFO, the totals also in the
record's `rag_worker` attribute, which `bench/scale_out.py` reads). Wall time is `time.perf_counter`,
CPU time is `time.process_time` of the worker's process (all its threads: the model's and Ray's).

Example:
    >>> clock = WorkerClock()
    >>> with clock.timed("embed"):
    ...     _ = sum(range(1000))
    >>> totals = json.loads(clock.totals())
    >>> totals["embed_s"] >= totals["load_s"] == 0.0, sorted(totals)[:3]
    (True, ['batches', 'busy_cpu_s', 'busy_s'])
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["WorkerClock", "log_workers", "worker_embedding"]

logger = logging.getLogger(__name__)

_PARTS = ("load", "busy", "embed", "write")


@dataclass(frozen=True)
class _SameEmbedding:
    """Gives a worker the driver's embedding object (sent as it is)."""

    embedding: Any

    def __call__(self) -> Any:
        return self.embedding


@dataclass(frozen=True)
class _MiniLM:
    """Rebuilds the default MiniLM on a worker from its settings and loads it there (once per actor)."""

    precision: str
    batch_size: int

    def __call__(self) -> Any:
        from rag.models.embeddings import MiniLMEmbeddings

        model = MiniLMEmbeddings(precision=self.precision, batch_size=self.batch_size)
        model.embed_documents(["load the model now"])   # (MiniLM loads lazily; here it loads in the constructor)
        return model


def worker_embedding(embedding: Any) -> Any:
    """A factory a worker calls to get the knowledge base's embedding model."""
    from rag.models.embeddings import MiniLMEmbeddings

    if isinstance(embedding, MiniLMEmbeddings):
        return _MiniLM(embedding.precision, embedding.batch_size)
    return _SameEmbedding(embedding)


class WorkerClock:
    """Wall and CPU seconds of one worker process, per part: `load` (the model), `busy` (inside a batch call),
    `embed` (the model's forward passes, within busy) and `write` (its own store writes, within busy)."""

    def __init__(self) -> None:
        self.seconds = {f"{part}_{kind}": 0.0 for part in _PARTS for kind in ("s", "cpu_s")}
        #: when each part first began and last ended (seconds since the epoch: comparable across the processes
        #: of one machine, so a benchmark can place the worker's load, first batch and last batch in its run)
        self.stamps: dict[str, float] = {}
        self.batches = self.embedded = 0

    @contextlib.contextmanager
    def timed(self, part: str) -> Iterator[None]:
        """Add the block's wall and CPU time to `part`."""
        self.stamps.setdefault(f"{part}_first", time.time())
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.seconds[f"{part}_s"] += time.perf_counter() - wall
            self.seconds[f"{part}_cpu_s"] += time.process_time() - cpu
            self.stamps[f"{part}_last"] = time.time()

    def totals(self) -> str:
        """The totals so far as JSON, with the process id and the threads its model computes with."""
        torch = sys.modules.get("torch")
        return json.dumps({"pid": os.getpid(), "batches": self.batches, "embedded": self.embedded,
                           "torch_threads": torch.get_num_threads() if torch is not None else None,
                           **{k: round(v, 4) for k, v in self.seconds.items()}, **self.stamps}, sort_keys=True)


def log_workers(workers: dict[int, dict[str, Any]]) -> None:
    """One INFO line per worker with its totals (also in the log record's `rag_worker` attribute)."""
    for totals in workers.values():
        embed_cpu = totals["embed_cpu_s"]
        rate = f"{totals['embedded'] / embed_cpu:.1f}" if embed_cpu > 0 else "-"
        logger.info("embedding worker %s: model load %.2f s (%.2f CPU-s); %d chunks embedded in %.2f CPU-s (%s per "
                    "CPU-s), %.2f s busy in %d batches; torch threads %s", totals["pid"], totals["load_s"],
                    totals["load_cpu_s"], totals["embedded"], embed_cpu, rate, totals["busy_s"], totals["batches"],
                    totals["torch_threads"], extra={"rag_worker": totals})
