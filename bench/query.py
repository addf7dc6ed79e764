"""Query latency of every retrieval path (p50 / p99), and dense search at 1M chunks.

Three benchmarks:

``paths``: synthetic chunks (default 100,000: 100 documents x 1,000 chunks of ~40 words drawn
from a 5,000-word vocabulary) in a persistent cosine Chroma plus a BM25 index. The index is built
with `DeterministicFakeEmbedding` vectors (384-d) so building does not take hours; query-time
MiniLM costs (query embedding, embedding reranker) are measured with the real model and reported
in their own rows. Paths: BM25, dense, hybrid (RRF), + rerank, + neighbour expansion, + RSE,
+ routing, each unfiltered and filtered to one document (1%).

``dense``: the store written by ``bench/_dense_build.py`` (random 384-d unit vectors, 1,000
documents x 1,000 chunks, a `PartitionedChroma` keyed on ``doc_name``: one global collection plus
per-document exact-search arrays). Every row uses the same precomputed query vectors (the targets
are about the search; MiniLM query embedding is a separate row of ``paths``) and k=10: raw
chromadb ``collection.query`` next to our path (`dense_search`) on the same collection,
unfiltered and with a filter selecting one document (0.1%); ours filtered warm, on the first query
to a document, and with its partition evicted from the OS page cache. Prints the load average.

``fanout``: unfiltered search over many partitions, global collection vs the ``keep_global=False``
layout (one collection per partition, searched one by one).

Usage:
    python bench/query.py paths --n 100000 --dir /tmp/rag-bench-100k
    python bench/query.py paths --n 100000 --dir /tmp/rag-bench-100k --partitioned   # filtered, partitioned
    nohup nice -n 19 python bench/_dense_build.py --dir /work/bench-1m &     # 15-40 minutes
    flock /work/bench.lock python bench/query.py dense --dir /work/bench-1m --json bench/results/query_dense_1m.json
    python bench/query.py fanout --partitions 1000 --chunks 10
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
    print(f"| {name:<72} | {p[0]:9.1f} | {p[1]:9.1f} | {n:5d} |", flush=True)
    return {"path": name, "p50_ms": round(p[0], 2), "p99_ms": round(p[1], 2), "queries": n}


def header() -> None:
    print(f"| {'path':<72} | {'p50 (ms)':>9} | {'p99 (ms)':>9} | {'n':>5} |")
    print(f"|{'-' * 74}|{'-' * 11}|{'-' * 11}|{'-' * 7}|", flush=True)


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

    from rag.compose.resource import new_chroma
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


def build_partitioned(directory: Path, n: int, docs: int):
    """The same chunks in a PartitionedChroma keyed on doc_name (default layout: global collection + arrays)."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from rag.stores import PartitionedChroma

    emb = DeterministicFakeEmbedding(size=DIM)
    store = PartitionedChroma("paths", emb, partition_key="doc_name", persist_directory=directory)
    if len(store.partition_values()) >= docs:
        return store
    chunks = synthetic_chunks(n, docs)
    start = time.perf_counter()
    for i in range(0, n, 5000):
        part = chunks[i:i + 5000]
        store.add_embeddings(emb.embed_documents([c.page_content for c in part]), metadatas=[c.metadata for c in part],
                             documents=[c.page_content for c in part], ids=[c.id for c in part])
        print(f"  partitioned: {min(i + 5000, n)} chunks, {time.perf_counter() - start:.0f} s", file=sys.stderr,
              flush=True)
    return store


def bench_partitioned(args: argparse.Namespace) -> list[dict]:
    from rag.compose.resource import Resource
    from rag.compose.retrieve import retrieve
    from rag.retrieval.hybrid import HybridRetriever, dense_search
    from rag.retrieval.lexical import BM25Index

    store = build_partitioned(args.dir / "partitioned-global", args.n, args.docs)
    bm25 = BM25Index.load(args.dir / "bm25")
    hybrid = HybridRetriever(vectorstore=store, bm25=bm25, k=8, fetch_k=40)
    resource = Resource.from_retriever("bench", hybrid)
    rng = np.random.default_rng(1)
    queries = [" ".join(f"term{int(w)}" for w in rng.integers(0, 300, size=5)) for _ in range(args.queries + 5)]
    one_doc = {"doc_name": f"doc-{args.docs // 2:04d}"}
    label = f" [1 doc of {args.docs}, PartitionedChroma]"
    q = args.queries
    header()
    return [
        row(f"dense{label}", percentiles(lambda i: dense_search(store, queries[i], k=8, filter=one_doc), q), q),
        row(f"hybrid rrf{label}", percentiles(lambda i: hybrid.invoke(queries[i], filter=one_doc), q), q),
        row(f"retrieve: hybrid + expand 2{label}", percentiles(
            lambda i: retrieve(queries[i], resource, filter=one_doc, expand=2, token_counter="approx"), q), q),
        row(f"retrieve: hybrid + RSE{label}", percentiles(
            lambda i: retrieve(queries[i], resource, filter=one_doc, rse="balanced", token_counter="approx"), q), q),
    ]


def bench_paths(args: argparse.Namespace) -> list[dict]:
    from rag.compose.resource import Resource
    from rag.compose.retrieve import retrieve
    from rag.models.embeddings import default_embeddings
    from rag.retrieval.hybrid import HybridRetriever, dense_search
    from rag.retrieval.rerank import EmbeddingReranker
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
    stored_reranker = EmbeddingReranker(embedding=store.embeddings, store=store)
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
    results.append(row("retrieve: hybrid + embedding rerank (stored vectors) + RSE", percentiles(
        lambda i: retrieve(queries[i], resource, reranker=stored_reranker, rse="balanced", token_counter="approx"),
        q), q))
    texts = [bm25.texts[j] for j in range(40)]
    slow = max(3, q // 10)
    results.append(row("MiniLM embedding of 40 chunks (rerank without stored vectors)", percentiles(
        lambda i: minilm.embed_documents(texts), slow, warmup=1), slow))
    return results


# --------------------------------------------------------------------------- dense at 1M
def load_average() -> str:
    return "load average " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


def evict_from_page_cache(paths: list[Path]) -> None:
    """Ask the kernel to drop these files from the page cache, so the next read is from disk."""
    import os

    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def bench_dense(args: argparse.Namespace) -> list[dict]:
    """Raw chromadb next to our path on the same store, same precomputed query vectors, k=10."""
    from bench._dense_build import open_store, unit_vectors
    from rag.compose.resource import Resource
    from rag.retrieval.hybrid import dense_search

    store = open_store(args.dir)
    total = store.count()
    docs = len(store.partitions.values())
    print(f"store: {total} chunks, {docs} partition arrays; {load_average()}", flush=True)
    rng = np.random.default_rng(7)
    q = args.queries
    vectors = unit_vectors(rng, 3 * q + 20)
    as_lists = vectors.tolist()
    names = [f"doc-{int(d):04d}" for d in rng.permutation(docs)]  # distinct documents, for first queries
    glob = store._collection(store.global_name, create=False)
    resource = Resource.from_vectorstore("bench", store, {"k": 10})
    k = 10
    results = []
    header()
    results.append(row(f"raw chromadb collection.query, unfiltered @{total}", percentiles(
        lambda i: glob.query(query_embeddings=[as_lists[i]], n_results=k), q, warmup=20), q))
    results.append(row(f"ours dense_search(PartitionedChroma), unfiltered @{total}", percentiles(
        lambda i: dense_search(store, vectors[i], k=k), q, warmup=20), q))
    results.append(row(f"ours Resource.retrieve (text, fake embedding), unfiltered @{total}", percentiles(
        lambda i: resource.retrieve(f"question {i}"), q, warmup=5), q))
    slow = args.raw_filtered_queries
    raw_hits = []

    def raw_where(i: int) -> None:
        res = glob.query(query_embeddings=[as_lists[i]], n_results=k, where={"doc_name": names[i]})
        raw_hits.append((i, res["ids"][0]))

    results.append(row(f"raw chromadb collection.query where doc_name (0.1%) @{total}", percentiles(
        raw_where, slow, warmup=1), slow))
    # first query to a document: partition not loaded in this process; disk-cold: also evicted
    # from the OS page cache, so its arrays are read from disk
    offset = slow + 1

    def first_query(i: int, *, disk: bool) -> None:
        name = names[(offset + i + (q if disk else 0)) % len(names)]  # distinct when docs >= 2q + offset
        store.partitions.forget()
        if disk:
            evict_from_page_cache(store.partitions.files(store.partition_name(name)))
        dense_search(store, vectors[i], k=k, filter={"doc_name": name})

    results.append(row(f"ours filtered 0.1%, first query to a document @{total}", percentiles(
        lambda i: first_query(i, disk=False), q, warmup=0), q))
    results.append(row(f"ours filtered 0.1%, first query, partition evicted from page cache @{total}",
                       percentiles(lambda i: first_query(i, disk=True), q, warmup=0), q))
    results.append(row(f"ours filtered 0.1%, warm (20 documents repeated) @{total}", percentiles(
        lambda i: dense_search(store, vectors[i], k=k, filter={"doc_name": names[i % 20]}), q, warmup=20), q))
    results.append(row(f"ours filtered 0.1% + chunk_index >= 500 (rest of filter on candidates) @{total}", percentiles(
        lambda i: dense_search(store, vectors[i], k=k, filter={"doc_name": names[i % 20],
                                                               "chunk_index": {"$gte": 500}}), q, warmup=5), q))
    results.append(row(f"ours Resource.retrieve (text, fake embedding), filtered 0.1% @{total}", percentiles(
        lambda i: resource.retrieve(f"question {i}", search_kwargs={"filter": {"doc_name": names[i % 20]}}), q,
        warmup=5), q))
    # exact search over the partition vs Chroma's filtered HNSW: same top 10?
    overlap = [len(set(ids) & {d.id for d, _ in dense_search(store, vectors[i], k=k,
                                                               filter={"doc_name": names[i]})}) / k
               for i, ids in raw_hits]
    print(f"top-{k} overlap, raw chromadb where vs ours (exact): {np.mean(overlap):.3f}; {load_average()}")
    results.append({"path": "top-10 overlap raw where vs ours filtered", "value": round(float(np.mean(overlap)), 3)})
    return results


def bench_fanout(args: argparse.Namespace) -> list[dict]:
    """Unfiltered search over a store with many partitions: legacy per-partition collections vs global."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from bench._dense_build import unit_vectors
    from rag.retrieval.hybrid import dense_search
    from rag.stores import PartitionedChroma

    rng = np.random.default_rng(3)
    n = args.partitions * args.chunks
    stores = {}
    for keep_global in (True, False):
        store = PartitionedChroma(f"fanout-{keep_global}", DeterministicFakeEmbedding(size=DIM),
                                  partition_key="doc_name", persist_directory=args.dir, keep_global=keep_global)
        if store.count() < n:
            vecs = unit_vectors(np.random.default_rng(0), n)
            metas = [{"doc_name": f"doc-{i // args.chunks:04d}"} for i in range(n)]
            store.add_embeddings(vecs, metadatas=metas, ids=[f"c{i}" for i in range(n)])
        stores[keep_global] = store
    vectors = unit_vectors(rng, args.queries + 5)
    header()
    label = f"{args.partitions} partitions x {args.chunks} chunks"
    slow = max(3, args.queries // 10)
    return [
        row(f"unfiltered, global collection [{label}]", percentiles(
            lambda i: dense_search(stores[True], vectors[i], k=10), args.queries), args.queries),
        row(f"unfiltered, keep_global=False fan-out [{label}]", percentiles(
            lambda i: dense_search(stores[False], vectors[i], k=10), slow, warmup=1), slow),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("paths", help="every retrieval path at --n synthetic chunks")
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--docs", type=int, default=100)
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--dir", type=Path, default=Path("/tmp/rag-bench-100k"))
    p.add_argument("--partitioned", action="store_true",
                   help="only the filtered paths, on a PartitionedChroma copy of the chunks (built once)")
    d = sub.add_parser("dense", help="dense search in the 1M store written by bench/_dense_build.py")
    d.add_argument("--dir", type=Path, default=Path("/work/bench-1m"))
    d.add_argument("--queries", type=int, default=200)
    d.add_argument("--raw-filtered-queries", type=int, default=10,
                   help="queries for raw Chroma's where path (about a second each at 1M)")
    f = sub.add_parser("fanout", help="unfiltered search: global collection vs per-partition fan-out")
    f.add_argument("--dir", type=Path, default=Path("/tmp/rag-bench-fanout"))
    f.add_argument("--partitions", type=int, default=1000)
    f.add_argument("--chunks", type=int, default=10)
    f.add_argument("--queries", type=int, default=100)
    for s in (p, d, f):
        s.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    args = parser.parse_args()
    if args.command == "dense":
        results = bench_dense(args)
    elif args.command == "fanout":
        results = bench_fanout(args)
    else:
        results = bench_partitioned(args) if args.partitioned else bench_paths(args)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"command": " ".join(sys.argv), "load": load_average(),
                                         "rows": results}, indent=2))


if __name__ == "__main__":
    main()
