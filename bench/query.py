"""Query latency of every retrieval path (p50 / p99), and dense search at 1M chunks.

Two benchmarks:

``paths``: synthetic chunks (default 100,000: 100 documents x 1,000 chunks of ~40 words drawn
from a 5,000-word vocabulary) in a persistent cosine Chroma plus a BM25 index. The index is built
with `DeterministicFakeEmbedding` vectors (384-d) so building does not take hours; query-time
MiniLM costs (query embedding, embedding reranker) are measured with the real model and reported
in their own rows. Paths: BM25, dense, hybrid (RRF), + rerank, + neighbour expansion, + RSE,
+ routing, each unfiltered and filtered to one document (1%).

``dense``: the store written by ``bench/_dense_build.py`` (random unit vectors, 1,000 documents x
1,000 chunks, a `PartitionedChroma` keyed on ``doc_name`` with a global collection): unfiltered
search in the global collection, the same collection with a ``where`` selecting one document
(0.1%), and the partitioned pre-filter path for the same filter.

Usage:
    python bench/query.py paths --n 100000 --dir /tmp/rag-bench-100k
    nohup python bench/_dense_build.py --dir /tmp/rag-bench-1m &     # 15-80 minutes
    python bench/query.py dense --dir /tmp/rag-bench-1m
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DIM = 384


def percentiles(fn: Callable[[int], object], n: int, warmup: int = 2) -> tuple[float, float]:
    """p50 and p99 latency of fn(i) over n calls, in milliseconds."""
    for i in range(warmup):
        fn(i)
    times = []
    for i in range(n):
        start = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - start) * 1000)
    return float(np.percentile(times, 50)), float(np.percentile(times, 99))


def row(name: str, p: tuple[float, float], n: int) -> dict:
    print(f"| {name:<52} | {p[0]:9.1f} | {p[1]:9.1f} | {n:5d} |", flush=True)
    return {"path": name, "p50_ms": round(p[0], 2), "p99_ms": round(p[1], 2), "queries": n}


def header() -> None:
    print(f"| {'path':<52} | {'p50 (ms)':>9} | {'p99 (ms)':>9} | {'n':>5} |")
    print(f"|{'-' * 54}|{'-' * 11}|{'-' * 11}|{'-' * 7}|", flush=True)


# --------------------------------------------------------------------------- paths at 100k
def synthetic_chunks(n: int, docs: int, seed: int = 0) -> list:
    from langchain_core.documents import Document

    rng = np.random.default_rng(seed)
    vocab = np.array([f"term{i}" for i in range(5000)])
    # Zipf-like word frequencies, as in real text
    probs = 1.0 / np.arange(1, len(vocab) + 1)
    probs /= probs.sum()
    per_doc = n // docs
    out = []
    for i in range(n):
        d = i // per_doc
        words = rng.choice(vocab, size=40, p=probs)
        out.append(Document(page_content=" ".join(words), id=f"c{i}",
                            metadata={"doc_id": f"doc-{d:04d}", "doc_name": f"doc-{d:04d}", "chunk_index": i % per_doc,
                                      "title": f"Company{d} annual report {2000 + d % 20}"}))
    return out


def build_paths_store(directory: Path, n: int, docs: int):
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from rag.core.resource import new_chroma
    from rag.retrieval.lexical import BM25Index

    emb = DeterministicFakeEmbedding(size=DIM)
    store = new_chroma("paths", emb, persist_directory=directory)
    if (directory / "bm25" / "index.json").exists() and store._collection.count() >= n:
        return store, BM25Index.load(directory / "bm25")
    chunks = synthetic_chunks(n, docs)
    start = time.perf_counter()
    batch = 5000
    for i in range(store._collection.count(), n, batch):
        part = chunks[i:i + batch]
        store.add_documents(part, ids=[c.id for c in part])
        print(f"  chroma: {min(i + batch, n)} chunks, {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    start = time.perf_counter()
    bm25 = BM25Index.from_documents(chunks, metadata_fields=["title"])
    bm25.save(directory / "bm25")
    print(f"  bm25: built in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    return store, bm25


def bench_paths(args: argparse.Namespace) -> list[dict]:
    from rag.core.resource import Resource
    from rag.models.embeddings import default_embeddings
    from rag.retrieval.hybrid import HybridRetriever, dense_search
    from rag.retrieval.lexical import BM25Retriever
    from rag.retrieval.rerank import EmbeddingReranker
    from rag.retrieval.retrieve import retrieve
    from rag.retrieval.routing import DocumentRouter

    args.dir.mkdir(parents=True, exist_ok=True)
    store, bm25 = build_paths_store(args.dir, args.n, args.docs)
    rng = np.random.default_rng(1)
    queries = [" ".join(f"term{int(w)}" for w in rng.integers(0, 300, size=5)) for _ in range(args.queries + 5)]
    one_doc = {"doc_name": f"doc-{args.docs // 2:04d}"}
    hybrid = HybridRetriever(vectorstore=store, bm25=bm25, k=8, fetch_k=40)
    resource = Resource.from_retriever("bench", hybrid)
    router = DocumentRouter.from_documents([bm25.document(i) for i in range(0, len(bm25), args.n // args.docs)],
                                           fields=["title", "doc_name"])
    minilm = default_embeddings()
    reranker = EmbeddingReranker(embedding=minilm)
    q = args.queries
    results = []
    header()
    results.append(row("MiniLM query embedding (added to dense paths)", percentiles(
        lambda i: minilm.embed_query(queries[i]), q), q))
    for label, flt in (("", None), (f" [1 doc of {args.docs}]", one_doc)):
        results.append(row(f"bm25{label}", percentiles(lambda i, f=flt: bm25.search(queries[i], k=8, filter=f), q), q))
        results.append(row(f"dense (Chroma){label}", percentiles(
            lambda i, f=flt: dense_search(store, queries[i], k=8, filter=f), q), q))
        results.append(row(f"hybrid rrf{label}", percentiles(
            lambda i, f=flt: hybrid.invoke(queries[i], filter=f), q), q))
        results.append(row(f"retrieve: hybrid + expand 2{label}", percentiles(
            lambda i, f=flt: retrieve(queries[i], resource, filter=f, k=8, expand=2, token_counter="approx"), q), q))
        results.append(row(f"retrieve: hybrid + RSE{label}", percentiles(
            lambda i, f=flt: retrieve(queries[i], resource, filter=f, rse="balanced", token_counter="approx"), q), q))
    company = [f"What did Company{int(d)} report? {queries[i]}" for i, d in enumerate(rng.integers(0, args.docs, q + 5))]
    results.append(row("retrieve: routing (filter) + hybrid + RSE", percentiles(
        lambda i: retrieve(company[i], resource, router=router, rse="balanced", token_counter="approx"), q), q))
    results.append(row("retrieve: hybrid + MiniLM rerank of 40 + RSE", percentiles(
        lambda i: retrieve(queries[i], resource, reranker=reranker, rse="balanced", token_counter="approx"),
        max(5, q // 4)), max(5, q // 4)))
    return results


# --------------------------------------------------------------------------- dense at 1M
def bench_dense(args: argparse.Namespace) -> list[dict]:
    from bench._dense_build import open_store, unit_vectors

    store = open_store(args.dir)
    total = store.count()
    progress = json.loads((args.dir / "progress.json").read_text()) if (args.dir / "progress.json").exists() else {}
    docs = progress.get("docs", 1000)
    print(f"store: {total} chunks in {docs} documents of {total // max(docs, 1)} chunks", flush=True)
    rng = np.random.default_rng(7)
    vectors = unit_vectors(rng, args.queries + 10).tolist()
    names = [f"doc-{int(d):04d}" for d in rng.integers(0, docs, size=args.queries + 10)]
    glob = store._collection(store.global_name, create=False)
    results = []
    header()
    results.append(row(f"dense unfiltered (global HNSW) @{total}", percentiles(
        lambda i: glob.query(query_embeddings=[vectors[i]], n_results=10), args.queries), args.queries))
    slow = max(5, args.queries // 20)
    results.append(row(f"dense filtered, raw Chroma where (1 doc) @{total}", percentiles(
        lambda i: glob.query(query_embeddings=[vectors[i]], n_results=10, where={"doc_name": names[i]}),
        slow, warmup=1), slow))
    results.append(row(f"dense filtered, PartitionedChroma (1 doc) @{total}", percentiles(
        lambda i: store.search_by_vector(vectors[i], k=10, filter={"doc_name": names[i]}), args.queries),
        args.queries))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("paths", help="every retrieval path at --n synthetic chunks")
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--docs", type=int, default=100)
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--dir", type=Path, default=Path("/tmp/rag-bench-100k"))
    d = sub.add_parser("dense", help="dense search in the 1M store written by bench/_dense_build.py")
    d.add_argument("--dir", type=Path, default=Path("/tmp/rag-bench-1m"))
    d.add_argument("--queries", type=int, default=200)
    for s in (p, d):
        s.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    args = parser.parse_args()
    results = bench_paths(args) if args.command == "paths" else bench_dense(args)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
