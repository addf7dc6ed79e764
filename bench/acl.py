"""What do document permissions cost per request? `rag.retrieve` with a principal vs the same call without.

A knowledge base of `--chunks` chunks (10 per document) whose documents carry 1-3 of `--groups`
groups (2% are public, 1% name a user), written as the flattened `acl_*` keys every chunk gets at
indexing (`rag.base.acl`). Each request is `rag.retrieve(question, resource, k=8)` through the
default pipeline (100 candidates, fusion, packing, budget); calls alternate between a principal
(in `--principal-groups` groups) and no principal, on the same question, so machine noise hits both
alike. Fake embeddings (64 dimensions, drawn at random; `DeterministicFakeEmbedding` for the
questions): the store's filtered search, not the model, is what the permissions change.

Three stores in one run (`--stores`): the in-memory exact store; Chroma (a knowledge base's default
store) searched through its chunk store as a knowledge base searches it, its vectors written
directly; and the knowledge base's lexical index (SQLite FTS5, `rag.stores.fts_index`) searched
alone. Chroma and FTS5 answer a principal with the permission plan (`rag.stores.permission_plan`):
each row counts which path its requests took (post-filter, deepened, native).

    python bench/acl.py [--chunks 100000] [--groups 1000] [--requests 25] [--stores memory chroma fts]
                        [--principal-groups 0 5 50 1000] [--case-seconds 60] [--compare-native 50]
    python bench/acl.py --paths [--paths-k 100 20 8] --dim 384 --store-dir DIR > rows.txt   # Chroma's two paths
    python bench/acl.py --fit rows.txt [more.txt ...]   # the cost model's coefficients fitted to those rows

Prints, per store and principal size, the median time per request with and without the principal,
the median of the paired differences (the added time; the target is < 1 ms) in wall-clock and in CPU
time of the process (every thread; robust on a shared machine: time spent waiting for a core is not
counted), what building the permission filter and resolving the request's settings cost alone, and
the machine's load average. `--compare-native N` also times, in the same run, the store's own filter
without the plan for principals of at most N groups (rows marked "native filter"). A case stops after `--case-seconds` (at least one pair after one warm-up
pair): the row says how many pairs it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: E402

from rag import Resource, retrieve  # noqa: E402
from rag.base.acl import Permissions, Principal  # noqa: E402
from rag.compose.request import request_settings  # noqa: E402
from rag.compose.retrieval_settings import RetrievalSettings  # noqa: E402
from rag.stores import permission_plan  # noqa: E402


def corpus(chunks: int, groups: int, seed: int = 7) -> tuple[list[str], list[dict]]:
    rng = random.Random(seed)
    texts, metas = [], []
    for doc in range(chunks // 10):
        roll = rng.random()
        if roll < 0.02:
            perm = Permissions(public=True)
        elif roll < 0.03:
            perm = Permissions(users=frozenset({f"user{rng.randrange(500)}"}))
        else:
            perm = Permissions(groups=frozenset(f"g{rng.randrange(groups)}" for _ in range(rng.randint(1, 3))))
        for i in range(10):
            texts.append(f"document {doc} part {i} about topic {rng.randrange(97)} and {rng.randrange(97)}")
            metas.append(perm.stamp({"doc_id": f"d{doc}", "chunk_index": i, "source": f"doc{doc}.md"}))
    return texts, metas


class BulkFakeEmbedding(DeterministicFakeEmbedding):
    """`DeterministicFakeEmbedding`'s queries; documents drawn in one batch from a seeded generator (building
    100,000 vectors one seeded draw at a time costs minutes; the search is what is measured, not the model)."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        rng = np.random.default_rng(len(texts))
        return rng.standard_normal((len(texts), self.size), dtype=np.float32).tolist()


def build(store: str, texts: list[str], metas: list[dict], folder: Path | None = None, dim: int = 64) -> Resource:
    """The store of `texts`, in `folder` when given (kept: a later run with the same folder and corpus reuses it;
    Chroma's and FTS5's permission indexes are built beside them on first use when missing)."""
    embedding = BulkFakeEmbedding(size=dim)
    if store == "memory":
        from rag.stores.memory import ExactVectorStore

        vectorstore = ExactVectorStore(embedding)
        vectorstore.add_texts(texts, metadatas=metas)
        return Resource.from_retriever("kb", vectorstore.as_retriever())
    if store == "fts":
        from rag.retrieval.lexical import BM25Retriever
        from rag.stores.fts_index import FTSIndex

        index = FTSIndex((folder or Path(tempfile.mkdtemp(prefix="acl-bench-"))) / "lexical.sqlite")
        for start in range(0, len(texts) if index.count() != len(texts) else 0, 5000):
            index.add([f"{i:032x}" for i in range(start, min(start + 5000, len(texts)))], texts[start:start + 5000],
                      metas[start:start + 5000])
        return Resource.from_retriever("kb", BM25Retriever(index=index))
    from rag.stores.chroma import new_chroma
    from rag.stores.chroma_chunks import ChromaChunkStore

    # a knowledge base's store (`new_chroma`, cosine), searched through its chunk store (`NativeFilterRetriever`)
    vectorstore = new_chroma("acl-bench", embedding, persist_directory=folder and folder / "chroma")
    chunks = ChromaChunkStore.of(vectorstore)
    vectors = np.random.default_rng(5).standard_normal((len(texts), dim), dtype=np.float32)
    for start in range(0, len(texts) if chunks.count() != len(texts) else 0, 5000):
        part = slice(start, start + 5000)
        chunks.add([f"{i:032x}" for i in range(start, min(start + 5000, len(texts)))], vectors[part],
                   texts[part], metas[part])
    return Resource.from_vectorstore("kb", vectorstore)


def pipeline_k(resource: Resource) -> int:
    """The hits the default pipeline asks `resource`'s Chroma store for, read off one `rag.retrieve(..., k=8)` (the
    bench's request: 8 is the context's cap; the store is asked for the pipeline's candidates, `RetrievalSettings`'
    `fetch_k`, see `rag.compose.branch`; a knowledge base's hybrid search asks its dense half for as many)."""
    from rag.stores.chroma_chunks import ChromaChunkStore

    asked: list[int] = []
    search = ChromaChunkStore.search

    def spy(self, vector, *, k, filter=None):
        asked.append(k)
        return search(self, vector, k=k, filter=filter)
    ChromaChunkStore.search = spy
    try:
        retrieve("topic 3 part 1", resource, k=8)
    finally:
        ChromaChunkStore.search = search
    if not asked:
        raise SystemExit("the pipeline did not search the Chroma store: give --paths-k")
    return max(asked)


def readable(principal: Principal, metas: list[dict]) -> float:
    """The share of the chunks `principal` may read."""
    keys = [key for clause in principal.filter()["$or"] for key in clause]
    return sum(any(md.get(key) is True for key in keys) for md in metas) / max(len(metas), 1)


def timed(fn) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one call (CPU of the whole process, every thread: what the call costs,
    whatever else loads the machine)."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def run(resource: Resource, principal: Principal, requests: int, budget: float, seed: int = 11) -> dict:
    rng = random.Random(seed)
    with_p, without, diffs, cpu_diffs, paths = [], [], [], [], Counter()
    start = time.perf_counter()
    for n in range(requests + 1):
        question = f"topic {rng.randrange(97)} part {rng.randrange(10)}"
        first = n % 2 == 0   # alternate which call goes first
        answers = []
        calls = [lambda: answers.append(retrieve(question, resource, k=8, principal=principal)),
                 lambda: retrieve(question, resource, k=8)]
        times = {}
        for which in ((0, 1) if first else (1, 0)):
            times[which] = timed(calls[which])
        if n < 1:
            continue   # warm-up (the first request of a principal builds its index entries)
        paths.update(key.removeprefix("permission_plan.") for key in answers[0].timings
                     if key.startswith("permission_plan."))
        with_p.append(times[0][0])
        without.append(times[1][0])
        diffs.append(times[0][0] - times[1][0])
        cpu_diffs.append(times[0][1] - times[1][1])
        if time.perf_counter() - start > budget:
            break
    found = len(retrieve("topic 3 part 1", resource, k=8, principal=principal).context)
    settings = RetrievalSettings()
    config = {"configurable": {"principal": principal}}
    fresh = {"configurable": {"principal": Principal(principal.id, principal.groups)}}   # a server's per request
    resolve = statistics.median(timed(lambda: request_settings(settings, config))[0] for _ in range(500))
    resolve_new = statistics.median(timed(lambda: request_settings(settings, fresh))[0] for _ in range(200))
    plain = statistics.median(timed(lambda: request_settings(settings, {"configurable": {}}))[0] for _ in range(500))
    return {"groups": len(principal.groups), "pairs": len(diffs), "ms_with_principal": 1000 * statistics.median(with_p),
            "ms_without": 1000 * statistics.median(without), "ms_added_median_paired": 1000 * statistics.median(diffs),
            "cpu_ms_added_median_paired": 1000 * statistics.median(cpu_diffs),
            "ms_resolve_settings_with_principal": 1000 * resolve,
            "ms_resolve_settings_equal_new_principal": 1000 * resolve_new, "ms_resolve_settings_without": 1000 * plain,
            "context_chunks_with_principal": found, "plan_paths": dict(paths)}


def paths(folder: Path, dim: int, principals: list[Principal], metas: list[dict], ks: list[int], queries: int) -> None:
    """`--paths`: each way Chroma with its permission file can answer each principal, for each `k` of `ks` (the hits
    asked of the store): what it adds to the search without a principal (CPU and wall ms, median of pairs on the same
    questions), the over-fetch path's recall of the exact one (and the unrestricted search's of an exact one), what
    the cost model predicts and chooses, and the cost model's lines fitted to them (`rag.stores.permission_vectors`).
    Each row is also printed as one JSON line; `fit_cost_model` fits the model's coefficients to such lines."""
    from rag.stores import chroma, permission_index, permission_vectors
    from rag.stores.chroma_chunks import ChromaChunkStore

    client = chroma.open_client(folder)
    store = ChromaChunkStore(chroma.open_collection(client, "acl-bench"), client=client, directory=folder)
    side = store.permitted()
    if not side.current():
        side.rebuild(store._pages)
    embedding = DeterministicFakeEmbedding(size=dim)
    vectors = [embedding.embed_query(f"topic {i} part {i % 10}") for i in range(queries)]
    db = side._dbs()[0]   # (this thread's own connection)
    stored = store.count()

    def cpu_ms(fn) -> tuple[float, list]:
        times, out = [], []
        for vector in vectors:
            start = time.process_time()
            out.append(fn(vector))
            times.append(1000 * (time.process_time() - start))
        return statistics.median(times), out

    def paired(with_principal, without) -> tuple[float, float, list]:
        """Median CPU and wall ms `with_principal` adds to `without`, on the same questions, in alternating order."""
        cpu, wall, out = [], [], []
        for i, vector in enumerate(vectors):
            times = {}
            for which, fn in ((0, with_principal), (1, without)) if i % 2 else ((1, without), (0, with_principal)):
                start, start_cpu = time.perf_counter(), time.process_time()
                result = fn(vector)
                times[which] = (time.perf_counter() - start, time.process_time() - start_cpu)
                if which == 0:
                    out.append(result)
            cpu.append(1000 * (times[0][1] - times[1][1]))
            wall.append(1000 * (times[0][0] - times[1][0]))
        return statistics.median(cpu), statistics.median(wall), out

    fits = {"exact": [], "over-fetch": []}
    reranked: list[int] = []
    exact_of = permission_vectors._exact

    def counted(side_db, numbers, query):
        reranked.append(len(numbers))
        return exact_of(side_db, numbers, query)
    permission_vectors._exact = counted
    ids, matrix = zip(*db.execute("SELECT id, vector FROM chunks WHERE length(vector) > 0").fetchall())
    matrix = np.frombuffer(b"".join(matrix), dtype=np.float32).reshape(len(ids), dim)
    sims = [matrix @ (np.asarray(v, dtype=np.float32) / np.linalg.norm(v)) for v in vectors]
    del matrix
    for k in ks:
        base, unrestricted = cpu_ms(lambda v: [d.id for d, _ in store.search(v, k=k, filter=None)])
        exact_all = [[ids[i] for i in np.argsort(-s, kind="stable")[:k]] for s in sims]
        print(json.dumps({"dim": dim, "k": k, "stored": stored, "unrestricted_search_cpu_ms": round(base, 2),
                          "unrestricted_recall_of_exact": round(statistics.mean(
                              len(set(a) & set(b)) / k for a, b in zip(unrestricted, exact_all)), 4),
                          "load": os.getloadavg()}), flush=True)
        for principal in principals:
            keys = permission_index.granted_keys(principal.filter())
            most, _ = permission_index.share(db, keys)
            depth = permission_vectors.over_fetch_depth(k, most, stored)
            row = {"dim": dim, "k": k, "groups": len(principal.groups),
                   "readable_share": round(readable(principal, metas), 4), "load": round(os.getloadavg()[0], 1),
                   "key_count_sum": most, "stored": stored, "over_fetch_depth": depth,
                   "model_exact_ms": round(permission_vectors.exact_ms(most, dim), 2),
                   "model_over_fetch_ms": round(permission_vectors.over_fetch_ms(depth, dim), 2),
                   "model_choice": permission_vectors.choose(k=k, permitted=most, stored=stored, dim=dim)}
            found = {}
            for path in ("exact", "over-fetch", "lists") if k == ks[0] else ("exact", "over-fetch"):
                permission_vectors.FORCE = path   # (the plan without the file, "lists", at the first k only)
                reranked.clear()
                try:
                    cpu, wall, found[path] = paired(
                        lambda v: [d.id for d, _ in store.search(v, k=k, filter=principal.filter())],
                        lambda v: store.search(v, k=k, filter=None))
                finally:
                    permission_vectors.FORCE = None
                if path == "exact":   # (float32 vectors read to rank exactly, per search: the int8 bounds' candidates)
                    row["exact_float32_vectors_read"] = round(sum(reranked) / max(len(vectors), 1))
                row[f"{path}_added_cpu_ms"], row[f"{path}_added_wall_ms"] = round(cpu, 2), round(wall, 2)
                if path in fits:
                    fits[path].append((most if path == "exact" else depth, cpu))
            cheaper = "exact" if row["exact_added_cpu_ms"] <= row["over-fetch_added_cpu_ms"] else "over-fetch"
            row["measured_cheaper_cpu"] = cheaper
            mask = np.array([any(metas[int(id_, 16)].get(key) is True for key in keys) for id_ in ids])
            brute = [{ids[i] for i in np.flatnonzero(mask)[np.argsort(-s[mask], kind="stable")[:k]]} for s in sims]
            row["exact_recall_of_brute_force"] = round(statistics.mean(   # (float32 ties may order the kth apart)
                len(set(a) & b) / max(len(b), 1) for a, b in zip(found["exact"], brute)), 4)
            for path in ("over-fetch", "lists"):
                if "exact" in found and path in found:
                    row[f"{path}_recall_of_exact"] = round(statistics.mean(
                        len(set(a) & set(b)) / max(len(b), 1) for a, b in zip(found[path], found["exact"])), 4)
            print(json.dumps(row), flush=True)
    permission_vectors._exact = exact_of
    for path, points in fits.items():
        if len(points) >= 2:
            slope, fixed = np.polyfit([x for x, _ in points], [y for _, y in points], 1)
            print(f"{path}: added CPU {fixed:.3f} ms + {slope * 1000:.4f} ms per 1,000 "
                  f"{'permitted vectors' if path == 'exact' else 'candidates'} at {dim} dimensions", flush=True)


def fit_cost_model(files: list[Path]) -> None:
    """`--fit`: the cost model's coefficients (`rag.stores.permission_vectors`) fitted to the rows `--paths` printed
    into `files` (any dimensions, `k`s and runs together), by least squares on what decides the choice: the exact
    path's added CPU time minus the over-fetch path's (the search without a principal, measured beside each, cancels)
    = permitted vectors x (a + b x dim) - (c + e x dim) - candidates x (f + g x dim). Then each row whose cheaper
    path measured is not the one the fitted model chooses, with what the wrong choice costs there."""
    rows = [json.loads(line) for file in files for line in file.read_text().splitlines()
            if line.startswith("{") and '"exact_added_cpu_ms"' in line]
    if len(rows) < 6:
        raise SystemExit(f"--fit: {len(rows)} rows of --paths in {[str(f) for f in files]}; at least 6 are needed")
    features = np.array([[r["key_count_sum"], r["key_count_sum"] * r["dim"], -1.0, -r["dim"], -r["over_fetch_depth"],
                          -r["over_fetch_depth"] * r["dim"]] for r in rows], dtype=float)
    measured = np.array([r["exact_added_cpu_ms"] - r["over-fetch_added_cpu_ms"] for r in rows])
    scale = np.abs(features).max(axis=0)
    coefficients = np.linalg.lstsq(features / scale, measured, rcond=None)[0] / scale
    names = ["EXACT_PER_VECTOR_MS", "EXACT_PER_FLOAT_MS", "QUERY_FIXED_MS", "QUERY_FIXED_PER_FLOAT_MS",
             "QUERY_PER_CANDIDATE_MS", "QUERY_PER_CANDIDATE_FLOAT_MS"]
    print(json.dumps({name: float(f"{value:.3g}") for name, value in zip(names, coefficients)}), flush=True)
    predicted = features @ coefficients
    wrong = [(r, m) for r, m, p in zip(rows, measured, predicted) if (m <= 0) != (p <= 0)]
    print(f"{len(rows)} rows; residual (measured - fitted) median {np.median(np.abs(measured - predicted)):.2f} ms; "
          f"choices against the cheaper path measured: {len(wrong)}", flush=True)
    for r, m in wrong:
        print(f"  dim {r['dim']} k {r['k']} share {r['readable_share']}: exact - over-fetch measured {m:+.2f} ms CPU "
              f"(wall {r['exact_added_wall_ms'] - r['over-fetch_added_wall_ms']:+.2f})", flush=True)


def writes(texts: list[str], metas: list[dict], dim: int, batch: int = 5000) -> None:
    """`--writes`: what Chroma's permission file (`rag.stores.chroma_permitted`) costs to write, per batch of `batch`
    chunks, as a fresh store grows to all of them (Chroma's own add left out: the file is written directly)."""
    from rag.stores import chroma
    from rag.stores.chroma_permitted import PermittedVectors

    folder = Path(tempfile.mkdtemp(prefix="acl-writes-"))
    collection = chroma.open_collection(chroma.open_client(folder), "acl-writes")
    side = PermittedVectors(folder, str(collection.id))
    side.start_empty()
    vectors = np.random.default_rng(5).standard_normal((len(texts), dim), dtype=np.float32)
    total_wall = total_cpu = 0.0
    for start in range(0, len(texts), batch):
        part = slice(start, start + batch)
        wall, cpu = timed(lambda: side.put(True, [f"{i:032x}" for i in range(start, min(start + batch, len(texts)))],
                                           vectors[part], metas[part]))
        total_wall, total_cpu = total_wall + wall, total_cpu + cpu
        print(json.dumps({"batch": start // batch + 1, "chunks": min(start + batch, len(texts)), "wall_s": round(wall, 2),
                          "cpu_s": round(cpu, 2), "load": round(os.getloadavg()[0], 1)}), flush=True)
    print(f"wrote {len(texts)} chunks at {dim} dimensions in {total_wall:.1f} s wall, {total_cpu:.1f} s CPU; file "
          f"{side.path.stat().st_size / 1e6:.0f} MB", flush=True)
    side.remove()
    shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=25)
    parser.add_argument("--stores", choices=["memory", "chroma", "fts"], nargs="+", default=["memory", "chroma", "fts"])
    parser.add_argument("--principal-groups", type=int, nargs="+", default=[0, 5, 50, 250, 1000],
                        help="principals' group counts (at 1,000 groups: 0 reads ~2%% of the chunks, 5 ~3%%, 50 ~11%%, "
                             "250 ~45%%, 1,000 all; each row prints its share)")
    parser.add_argument("--dim", type=int, default=64,
                        help="vector dimensions (MiniLM: 384; the exact search over a principal's chunks reads each "
                             "permitted vector, so its cost grows with them)")
    parser.add_argument("--case-seconds", type=float, default=60.0)
    parser.add_argument("--compare-native", type=int, default=0, metavar="GROUPS",
                        help="also time Chroma's / FTS5's own filter without the plan, for principals of at most "
                             "GROUPS groups (1,000 groups take minutes per request natively)")
    parser.add_argument("--store-dir", type=Path, default=None, metavar="DIR",
                        help="keep the Chroma and FTS5 stores in DIR and reuse them in later runs (same --chunks, "
                             "--groups: building 100,000 chunks takes minutes)")
    parser.add_argument("--paths", action="store_true",
                        help="Chroma with its permission file only (needs --store-dir): time the exact and the "
                             "over-fetch path for each principal, their recall, and fit the cost model")
    parser.add_argument("--queries", type=int, default=12, help="questions per path and principal with --paths")
    parser.add_argument("--paths-k", type=int, nargs="+", default=None, metavar="K",
                        help="with --paths: the hits asked of the store, one pass per K (default: what the default "
                             "pipeline asks a resource's store for, `pipeline_k()`)")
    parser.add_argument("--writes", action="store_true",
                        help="time writing Chroma's permission file alone, per 5,000-chunk batch, into a fresh folder")
    parser.add_argument("--fit", type=Path, nargs="+", default=None, metavar="FILE",
                        help="fit the cost model's coefficients to the rows --paths printed into FILEs (no store)")
    parser.add_argument("--force-path", choices=["exact", "over-fetch"], default=None,
                        help="Chroma with its permission file: take this path whatever the cost model says")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}, {os.cpu_count()} cores", flush=True)
    if args.fit:
        fit_cost_model(args.fit)
        return
    if args.force_path:
        from rag.stores import permission_vectors
        permission_vectors.FORCE = args.force_path
    texts, metas = corpus(args.chunks, args.groups)
    rng = random.Random(3)
    principals = [Principal("user1", frozenset(f"g{g}" for g in rng.sample(range(args.groups), size)))
                  for size in args.principal_groups]
    rows = []
    if args.writes:
        writes(texts, metas, args.dim)
        return
    if args.paths:
        suffix = f"-d{args.dim}" if args.dim != 64 else ""
        folder = args.store_dir / f"chroma-{args.chunks}-{args.groups}{suffix}"
        ks = args.paths_k or [pipeline_k(build("chroma", texts, metas, folder, args.dim))]
        paths(folder / "chroma", args.dim, principals, metas, ks, args.queries)
        return
    for store in args.stores:
        start = time.perf_counter()
        suffix = f"-d{args.dim}" if args.dim != 64 and store != "fts" else ""
        folder = args.store_dir and args.store_dir / f"{store}-{args.chunks}-{args.groups}{suffix}"
        resource = build(store, texts, metas, folder, args.dim)
        print(f"built {len(texts)} chunks, {args.groups} groups, store {store} in "
              f"{time.perf_counter() - start:.1f} s", flush=True)
        for principal in principals:
            row = {"store": store, "dim": args.dim, "readable_share": round(readable(principal, metas), 4),
                   **run(resource, principal, args.requests, args.case_seconds)}
            rows.append(row)
            print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
            if args.compare_native and store != "memory" and len(principal.groups) <= args.compare_native:
                permission_plan.ENABLED = False   # the store's own filter alone (as before the plan), same load
                try:
                    native = {"store": f"{store} (native filter)",
                              **run(resource, principal, args.requests, args.case_seconds)}
                finally:
                    permission_plan.ENABLED = True
                print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in native.items()}),
                      flush=True)
        del resource
    for store in args.stores:
        mine = [r for r in rows if r["store"] == store]
        worst = max(mine, key=lambda r: r["ms_added_median_paired"])
        print(f"{store}: added per request (median of paired differences, worst principal: {worst['groups']} groups): "
              f"{worst['ms_added_median_paired']:.3f} ms wall, {worst['cpu_ms_added_median_paired']:.3f} ms CPU "
              f"({'under' if worst['ms_added_median_paired'] < 1 else 'OVER'} the 1 ms target)")
    print(f"load average at end: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
