"""Scale-out benchmark: the local executor against Ray with 1 and 2 embedding workers, in one run.

Indexes the same folder (default: this project's docs/, real all-MiniLM-L6-v2, AutoContext) into a
fresh knowledge base per configuration and prints, for each: wall seconds, chunks/s,
embeddings/s, embeddings/s per worker, embeddings per CPU-second of the embedding actors (what one
worker does with a core, whatever else shares the machine), and the peak resident memory of each Ray
worker process (sampled every 0.2 s with psutil). Then the fixed and per-file cost of Ray: many tiny files with
fake embeddings (where nothing but the framework's work is left), local against Ray.

Ray is started once, before the timed runs (its start-up is printed apart): a sync on a running
cluster still pays for starting the embedding actors (new processes importing the model), which
is part of every Ray figure here.

Usage:
    python bench/scale_out.py                                   # docs/, MiniLM, 200 tiny files
    python bench/scale_out.py --folder ../shared/data/financebench/pdfs --limit 3 --json out.json
    python bench/scale_out.py --rounds 2                          # alternate the configurations twice
    python bench/scale_out.py --store pgvector --fake             # the store's ingest: driver vs 2 workers writing
"""

from __future__ import annotations

import argparse
import json
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


class WorkerMemory:
    """Peak RSS of every Ray worker process (`ray::...` in its command line) while the block runs."""

    def __init__(self) -> None:
        self.peaks: dict[int, tuple[str, int]] = {}
        #: CPU seconds (user + system) last seen per embedding actor process
        self.actor_cpu: dict[int, float] = {}
        self._cpu_start: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> WorkerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        import psutil

        while not self._stop.is_set():
            for proc in psutil.process_iter(["pid", "name", "cmdline"]):
                try:
                    title = " ".join(proc.info["cmdline"] or []) or proc.info["name"] or ""
                    if title.startswith("ray::") and "IDLE" not in title:
                        rss = proc.memory_info().rss
                        name, peak = self.peaks.get(proc.pid, (title.split()[0], 0))
                        self.peaks[proc.pid] = (name if "MapWorker" in name else title.split()[0], max(peak, rss))
                        if "EmbedChunks" in self.peaks[proc.pid][0]:
                            # from the first sight of the process as an actor: Ray may reuse a pooled worker
                            times = proc.cpu_times()
                            self._cpu_start.setdefault(proc.pid, times.user + times.system)
                            self.actor_cpu[proc.pid] = times.user + times.system - self._cpu_start[proc.pid]
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            self._stop.wait(0.2)

    def actor_cpu_seconds(self) -> float:
        """CPU seconds the embedding actors used (sampled every 0.2 s: the last 0.2 s of each may be missed)."""
        return sum(self.actor_cpu.values())

    def summary(self) -> dict[str, float]:
        """Peak MiB by kind of worker (the largest process of each kind)."""
        out: dict[str, float] = {}
        for name, rss in self.peaks.values():
            kind = "embedding actor" if "EmbedChunks" in name else "load/chunk task"
            out[kind] = max(out.get(kind, 0.0), rss / 2**20)
        return out


_TABLES = iter(range(1_000_000))


def _index(folder: Path, executor: Any, embedding: Any, limit: int | None, pg_url: str | None = None) -> dict[str, Any]:
    from rag.compose.knowledge_base import KnowledgeBase
    from rag.stores import pgvector

    files = sorted(p for p in folder.rglob("*") if p.is_file())[:limit] if limit else [str(folder)]
    with tempfile.TemporaryDirectory(prefix="rag-scale-") as store:
        chunks_in = pgvector.open_store(pg_url, f"scale_{os.getpid()}_{next(_TABLES)}", embedding,
                                        create=True) if pg_url else None
        kb = KnowledgeBase("bench", store, embedding=embedding, cache=False, store=chunks_in)
        with WorkerMemory() as memory:
            start = time.perf_counter()
            report = kb.add_documents([str(f) for f in files], executor=executor)
            seconds = time.perf_counter() - start
        chunks = kb.count()
        kb.close()
    return {"seconds": seconds, "files": len(report.added), "chunks": chunks, "embedded": report.embedded,
            "chunks_per_s": chunks / seconds, "embeddings_per_s": report.embedded / seconds,
            "memory_mib": memory.summary(), "actor_cpu_s": memory.actor_cpu_seconds()}


def _tiny_corpus(folder: Path, n: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"note{i:04d}.md").write_text(f"# Note {i}\n\nUnit {i} reported revenue of {i} million.\n")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=ROOT / "docs", help="what to index (default: docs/)")
    parser.add_argument("--limit", type=int, default=None, help="index only the first N files of the folder")
    parser.add_argument("--tiny-files", type=int, default=200, help="files for the per-file overhead (0: skip)")
    parser.add_argument("--rounds", type=int, default=1, help="alternate the three configurations this often")
    parser.add_argument("--batch-size", type=int, default=256, help="RayExecutor batch_size")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--store", choices=("chroma", "pgvector"), default="chroma",
                        help="chroma: Chroma on disk (the driver writes); pgvector: a throwaway PostgreSQL "
                             "(rag.testing.pg_server), written by the Ray workers themselves")
    parser.add_argument("--fake", action="store_true", help="fake embeddings: time everything but the model")
    args = parser.parse_args()
    if args.store == "pgvector":
        from rag.testing.pg_server import pg_server

        with tempfile.TemporaryDirectory(prefix="rag-scale-pg-") as data, pg_server(data) as url:
            _run(args, url)
    else:
        _run(args, None)


def _run(args: argparse.Namespace, pg_url: str | None) -> None:
    import ray
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from rag.indexing.executors import RayExecutor
    from rag.models.embeddings import default_embeddings

    cpus = os.cpu_count() or 1
    load = os.getloadavg()
    start = time.perf_counter()
    ray.init(num_cpus=cpus, include_dashboard=False, logging_level="WARNING")
    ray_start = time.perf_counter() - start
    configs = {"local": None, "ray, 1 worker": RayExecutor(concurrency=1, batch_size=args.batch_size),
               "ray, 2 workers": RayExecutor(concurrency=2, batch_size=args.batch_size)}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    for _ in range(args.rounds):
        for name, executor in configs.items():
            embedding = DeterministicFakeEmbedding(size=384) if args.fake else default_embeddings()
            runs[name].append(_index(args.folder, executor, embedding, args.limit, pg_url))
            print(f"{name}: {json.dumps(runs[name][-1])}", flush=True)
    best = {name: min(rs, key=lambda r: r["seconds"]) for name, rs in runs.items()}
    overhead: dict[str, Any] = {}
    if args.tiny_files:
        with tempfile.TemporaryDirectory(prefix="rag-tiny-") as tmp:
            folder = _tiny_corpus(Path(tmp) / "notes", args.tiny_files)
            fake = DeterministicFakeEmbedding(size=384)
            one = _tiny_corpus(Path(tmp) / "one", 1)
            overhead = {"local": _index(folder, None, fake, None, pg_url),
                        "ray": _index(folder, configs["ray, 2 workers"], fake, None, pg_url),
                        "local_1": _index(one, None, fake, None, pg_url),
                        "ray_1": _index(one, configs["ray, 2 workers"], fake, None, pg_url)}
    ray.shutdown()
    _print(best, overhead, args, ray_start, load, cpus)
    if args.json:
        args.json.write_text(json.dumps({"store": args.store, "fake": args.fake, "folder": str(args.folder),
                                         "runs": runs, "overhead": overhead, "ray_start_s": ray_start,
                                         "load_before": load, "load_after": os.getloadavg(), "cpus": cpus},
                                        indent=2))


def _print(best: dict[str, dict[str, Any]], overhead: dict[str, Any], args: argparse.Namespace, ray_start: float,
           load: tuple[float, ...], cpus: int) -> None:
    local = best["local"]
    print(f"\n{args.folder} ({local['files']} files, {local['chunks']} chunks) into {args.store}"
          f"{' (fake embeddings)' if args.fake else ''}, {cpus} CPUs, load average "
          f"{load[0]:.1f} before and {os.getloadavg()[0]:.1f} after; ray.init {ray_start:.1f} s (not counted)")
    print("| executor | wall s | chunks/s | embeddings/s | embeddings/s per worker | embeddings per actor CPU-s "
          "| vs local | peak MiB per worker |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name, run in best.items():
        workers = 1 if name == "local" else int(name.split(", ")[1].split()[0])
        memory = ", ".join(f"{kind} {mib:.0f}" for kind, mib in sorted(run["memory_mib"].items())) or "-"
        memory = "-" if name == "local" else memory   # (Ray's idle workers, not the local run's)
        print(f"| {name} | {run['seconds']:.1f} | {run['chunks_per_s']:.1f} | {run['embeddings_per_s']:.1f} | "
              f"{run['embeddings_per_s'] / workers:.1f} | {_per_cpu(run)} | {local['seconds'] / run['seconds']:.2f}x | "
              f"{memory} |")
    if overhead:
        n = overhead["local"]["files"]
        fixed = overhead["ray_1"]["seconds"] - overhead["local_1"]["seconds"]
        per_file = (overhead["ray"]["seconds"] - overhead["local"]["seconds"] - fixed) / max(n - 1, 1)
        print(f"\nRay's cost (fake embeddings): {n} tiny files local {overhead['local']['seconds']:.2f} s, Ray "
              f"{overhead['ray']['seconds']:.2f} s ({per_file * 1000:.1f} ms more per file); one file local "
              f"{overhead['local_1']['seconds']:.2f} s, Ray {overhead['ray_1']['seconds']:.2f} s "
              f"({fixed:.1f} s fixed cost per sync)")


def _per_cpu(run: dict[str, Any]) -> str:
    """Embeddings per CPU-second of the embedding actors: what one worker does with a core, whatever else runs."""
    cpu = run.get("actor_cpu_s") or 0.0
    return f"{run['embedded'] / cpu:.1f}" if cpu > 0 else "-"


if __name__ == "__main__":
    main()
