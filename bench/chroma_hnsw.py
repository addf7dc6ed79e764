"""Chroma's HNSW settings: build cost, recall against exact search and query time, on a knowledge base's vectors.

    python bench/chroma_hnsw.py STORE [--collection financebench] [--questions FILE] [--settings 100:16,50:16]
        [--search-ef 100,200,400,800] [--json OUT]

Reads (never writes) the chunk vectors and `source` of every chunk of the Chroma knowledge base
`--collection` in the store directory STORE (e.g. the FinanceBench `default` row's
`CACHE/default-kb`), and embeds the questions of `--questions` (FinanceBench's questions.jsonl:
`question`, `doc_name`) with that knowledge base's own embedding, as a search embeds them. Or
`--random N`: N i.i.d. random 384-d vectors and 200 random queries (what `--embedding fake` gives;
no store needed). For each `construction_ef:M` setting a scratch collection is written in batches
of 5,000 (CPU seconds of the writes), then for each search ef a new process (Chroma reads the
search ef when it loads the index) queries it with k=100: recall@10 and @100 against exact cosine
search, unfiltered and filtered by the question's filing (its `source`), and the median time of
one query (ids only). Results: docs/stores.md, "Chroma's vector index".

    python bench/chroma_hnsw.py --latency STORE [STORE ...] [--rounds 2]

The time of the dense leg's query (k=100 with texts, metadata and distances) on each knowledge base
store as it is (e.g. copies of one store with other settings), unfiltered and filtered by the
question's filing: wall and CPU time per query, the least of three passes over the questions, in a
new process per store, the stores in turn `--rounds` times.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def knowledge_base_vectors(store: str, collection: str, questions: str) -> dict[str, np.ndarray]:
    """The collection's vectors and sources, and the questions embedded by the knowledge base's embedding."""
    from rag import KnowledgeBase
    from rag.stores import chroma

    kb = KnowledgeBase.open(collection, store)
    ids = [d.id for d in kb.get_documents()]
    docs = {d.id: d for d in kb.get_documents()}
    vectors = chroma.get_vectors(kb.chunks.collection, ids)
    rows = [json.loads(line) for line in Path(questions).read_text().splitlines() if line.strip()]
    sources = sorted({str(d.metadata.get("source", "")) for d in docs.values()})
    keep = [r for r in rows if any(s.endswith(f"/{r['doc_name']}.pdf") for s in sources)]
    return {"X": np.asarray([vectors[i] for i in ids], dtype=np.float32),
            "src": np.asarray([str(docs[i].metadata.get("source", "")) for i in ids]),
            "Q": np.asarray([kb.embedding.embed_query(r["question"]) for r in keep], dtype=np.float32),
            "qsrc": np.asarray([next(s for s in sources if s.endswith(f"/{r['doc_name']}.pdf")) for r in keep])}


def random_vectors(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {"X": rng.standard_normal((n, 384)).astype(np.float32), "src": np.asarray([f"f{i % 50}" for i in range(n)]),
            "Q": rng.standard_normal((200, 384)).astype(np.float32), "qsrc": np.asarray([])}


def build(data: str, path: str, efc: int, m: int) -> dict:
    """Write the vectors into a new collection with these settings; CPU seconds per 5,000-vector write."""
    import chromadb

    z = np.load(data)
    X, src = z["X"], z["src"]
    coll = chromadb.PersistentClient(path).get_or_create_collection(
        "hnsw", metadata={"hnsw:space": "cosine", "hnsw:construction_ef": efc, "hnsw:M": m}, embedding_function=None)
    per, cpu = [], time.process_time()
    for s in range(0, len(X), 5000):
        c = time.process_time()
        coll.add(ids=[str(i) for i in range(s, min(len(X), s + 5000))], embeddings=X[s:s + 5000],
                 metadatas=[{"source": str(v)} for v in src[s:s + 5000]])
        per.append(round(time.process_time() - c, 2))
    return {"build_cpu": round(time.process_time() - cpu, 1), "cpu_per_write": per}


def query(data: str, path: str, ef: int) -> dict:
    """Recall@10/@100 of k=100 queries against exact search, unfiltered and filtered; median ms of one query."""
    import chromadb

    z = np.load(data)
    X, src, Q, qsrc = z["X"], z["src"], z["Q"], z["qsrc"]
    coll = chromadb.PersistentClient(path).get_collection("hnsw")
    coll.modify(configuration={"hnsw": {"ef_search": ef}})   # before this process loads the index
    S = (Q / np.linalg.norm(Q, axis=1, keepdims=True)) @ (X / np.linalg.norm(X, axis=1, keepdims=True)).T
    got = coll.query(query_embeddings=Q, n_results=100, include=[])["ids"]
    out = {}
    for k in (10, 100):
        exact = np.argsort(-S, axis=1)[:, :k]
        out[f"recall_at_{k}"] = round(float(np.mean([len({int(i) for i in g[:k]} & set(e.tolist())) / k
                                                     for g, e in zip(got, exact, strict=True)])), 4)
    if len(qsrc):
        recall = []
        for qi, source in enumerate(qsrc):
            mask = np.where(src == source)[0]
            exact = set(mask[np.argsort(-S[qi, mask])[:100]].tolist())
            hits = coll.query(query_embeddings=Q[qi:qi + 1], n_results=100, where={"source": str(source)}, include=[])
            recall.append(len({int(i) for i in hits["ids"][0]} & exact) / len(exact))
        out["filtered_recall_at_100"] = round(float(np.mean(recall)), 4)
    rounds = []
    for _ in range(3):
        seconds = []
        for qi in range(len(Q)):
            started = time.perf_counter()
            coll.query(query_embeddings=Q[qi:qi + 1], n_results=100, include=[])
            seconds.append(time.perf_counter() - started)
        rounds.append(float(np.median(seconds)))
    out["query_ms"] = round(1000 * min(rounds), 2)
    return out


def latency(store: str, collection: str, data: str) -> dict:
    """Median wall and mean CPU ms of one k=100 query with texts, unfiltered and filtered; the least of 3 passes."""
    import chromadb

    z = np.load(data)
    Q, qsrc = z["Q"], z["qsrc"]
    coll = chromadb.PersistentClient(store).get_collection(collection)
    include = ["documents", "metadatas", "distances"]
    coll.query(query_embeddings=Q[:1], n_results=100, include=include)   # load the index
    out = {"store": store, **{k: coll.configuration["hnsw"][k] for k in ("ef_construction", "ef_search")}}
    for name, filtered in (("unfiltered", False), ("filtered", True)):
        walls, cpus = [], []
        for _ in range(3):
            seconds, cpu = [], time.process_time()
            for qi in range(len(Q)):
                started = time.perf_counter()
                coll.query(query_embeddings=Q[qi:qi + 1], n_results=100, include=include,
                           where={"source": str(qsrc[qi])} if filtered else None)
                seconds.append(time.perf_counter() - started)
            cpus.append((time.process_time() - cpu) / len(Q))
            walls.append(float(np.median(seconds)))
        out[f"{name}_ms"], out[f"{name}_cpu_ms"] = round(1000 * min(walls), 2), round(1000 * min(cpus), 2)
    out["load_average"] = os.getloadavg()[0]
    return out


def child(step: str, *args: str) -> dict:
    run = subprocess.run([sys.executable, __file__, "--child", step, *args], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "ANONYMIZED_TELEMETRY": "False"})
    return json.loads(run.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        step, data, path, *rest = argv[1:]
        if step == "latency":
            result = latency(path, rest[0], data)
        else:
            result = build(data, path, *map(int, rest)) if step == "build" else query(data, path, int(rest[0]))
        print(json.dumps(result))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", nargs="*", help="a knowledge base's store directory (Chroma); several with --latency")
    parser.add_argument("--collection", default="financebench")
    parser.add_argument("--questions", default=str(ROOT.parent / "shared/data/financebench/questions.jsonl"))
    parser.add_argument("--random", type=int, default=0, help="N random vectors instead of a store")
    parser.add_argument("--settings", default="100:16,50:16", help="construction_ef:M, comma-separated")
    parser.add_argument("--search-ef", default="100,200,400,800")
    parser.add_argument("--latency", action="store_true", help="time the queries of each store as it is")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="chroma-hnsw-"))
    data = str(work / "vectors.npz")
    np.savez(data, **(random_vectors(args.random) if args.random else
                      knowledge_base_vectors(args.store[0], args.collection, args.questions)))
    results = []
    if args.latency:
        for _ in range(args.rounds):
            for store in args.store:
                results.append(child("latency", data, store, args.collection))
                print(json.dumps(results[-1]), flush=True)
        args.settings = ""
    for setting in filter(None, args.settings.split(",")):
        efc, m = setting.split(":")
        path = str(work / f"c-{efc}-{m}")
        row = {"construction_ef": int(efc), "M": int(m), **child("build", data, path, efc, m), "search": {}}
        for ef in args.search_ef.split(","):
            row["search"][ef] = child("query", data, path, ef)
        row["load_average"] = os.getloadavg()[0]
        print(json.dumps(row), flush=True)
        results.append(row)
        shutil.rmtree(path, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
