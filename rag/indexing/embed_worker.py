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

__all__ = ["ActorShape", "WorkerClock", "actor_shape", "embeds_on_gpu", "log_workers", "worker_embedding"]

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
    """Rebuilds the default MiniLM on a worker from its settings and loads it there (once per actor).

    The device is the worker's own (`auto`: the GPU Ray gave the actor, else its CPU) unless the
    driver's model was pinned to one; the precision is the driver's (the knowledge base's id)."""

    precision: str
    batch_size: int | None
    device: str = "auto"

    def __call__(self) -> Any:
        from rag.models.embeddings import MiniLMEmbeddings

        model = MiniLMEmbeddings(precision=self.precision, batch_size=self.batch_size, device=self.device)
        model.embed_documents(["load the model now"])   # (MiniLM loads lazily; here it loads in the constructor)
        return model


def worker_embedding(embedding: Any, *, gpu: bool = False) -> Any:
    """A factory a worker calls to get the knowledge base's embedding model (`gpu`: the actor has one)."""
    from rag.models.embeddings import MiniLMEmbeddings

    if isinstance(embedding, MiniLMEmbeddings):
        device = "auto" if gpu or embedding.device_setting == "auto" else embedding.device_setting
        # the driver's batch size fits the driver's device; a GPU actor takes the GPU's
        return _MiniLM(embedding.precision, None if gpu else embedding.batch_size, device)
    return _SameEmbedding(embedding)


def embeds_on_gpu(embedding: Any) -> bool:
    """Whether `embedding` can use a GPU a Ray actor is given: the default MiniLM, unless pinned to the CPU or
    in int8 (a CPU-only precision). Any other model is the user's: it runs where it was built to."""
    from rag.models.embeddings import MiniLMEmbeddings

    return (isinstance(embedding, MiniLMEmbeddings) and embedding.device_setting != "cpu"
            and embedding.precision != "int8")


@dataclass(frozen=True)
class ActorShape:
    """How a Ray sync places its work: embedding actors (with `gpus` each) and load-and-chunk tasks."""

    actors: int
    gpus: int
    chunk_cpus: int
    chunk_tasks: int
    batch_size: int | None


def actor_shape(cpus: int, gpus: int, concurrency: int | None, *, gpu_model: bool) -> ActorShape:
    """The shape of a Ray sync on a cluster of `cpus` CPUs and `gpus` GPUs.

    Without GPUs (or a model that cannot use one): `concurrency` (default: one per CPU) embedding actors of
    one CPU each; load-and-chunk tasks ask for no CPU (the actors hold them, and a task waiting for one would
    never start; Ray Data bounds how many run). With GPUs: one actor per GPU (or `concurrency`, at most one
    per GPU) with `num_gpus=1`, fed 512-chunk batches, and one load-and-chunk task per CPU left.

    Example:
        >>> actor_shape(16, 0, None, gpu_model=True)
        ActorShape(actors=16, gpus=0, chunk_cpus=0, chunk_tasks=16, batch_size=None)
        >>> actor_shape(16, 1, None, gpu_model=True)
        ActorShape(actors=1, gpus=1, chunk_cpus=1, chunk_tasks=15, batch_size=512)
    """
    if gpus < 1 or not gpu_model:
        return ActorShape(concurrency or cpus, 0, 0, cpus, None)
    actors = min(concurrency or gpus, gpus)
    from rag.models.devices import batch_size_for

    return ActorShape(actors, 1, 1, max(1, cpus - actors), batch_size_for("cuda"))


class WorkerClock:
    """Wall and CPU seconds of one worker process, per part: `load` (the model), `busy` (inside a batch call),
    `embed` (the model's forward passes, within busy) and `write` (its own store writes, within busy)."""

    def __init__(self) -> None:
        self.seconds = {f"{part}_{kind}": 0.0 for part in _PARTS for kind in ("s", "cpu_s")}
        #: when each part first began and last ended (seconds since the epoch: comparable across the processes
        #: of one machine, so a benchmark can place the worker's load, first batch and last batch in its run)
        self.stamps: dict[str, float] = {}
        self.batches = self.embedded = 0
        self.device = ""   # where the worker's model embeds (`rag.models.devices.embedding_device`)

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
                           "device": self.device,
                           "torch_threads": torch.get_num_threads() if torch is not None else None,
                           **{k: round(v, 4) for k, v in self.seconds.items()}, **self.stamps}, sort_keys=True)


def log_workers(workers: dict[int, dict[str, Any]]) -> None:
    """One INFO line per worker with its totals (also in the log record's `rag_worker` attribute)."""
    for totals in workers.values():
        embed_cpu = totals["embed_cpu_s"]
        rate = f"{totals['embedded'] / embed_cpu:.1f}" if embed_cpu > 0 else "-"
        logger.info("embedding worker %s on %s: model load %.2f s (%.2f CPU-s); %d chunks embedded in %.2f CPU-s (%s "
                    "per CPU-s), %.2f s busy in %d batches; torch threads %s", totals["pid"],
                    totals.get("device") or "-", totals["load_s"],
                    totals["load_cpu_s"], totals["embedded"], embed_cpu, rate, totals["busy_s"], totals["batches"],
                    totals["torch_threads"], extra={"rag_worker": totals})
