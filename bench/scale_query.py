"""A knowledge base's lexical search in its engine vs in process, side by side, at one size (default 100,000 chunks).

Builds one knowledge base of N synthetic chunks (documents of 1,000 chunks of 120 words drawn from a
5,000-word vocabulary with a Zipf-like law; `DeterministicFakeEmbedding` 384-d vectors, so the
write path is measured, not MiniLM; the chunks stored as given, no AutoContext) through the library's
write path, then measures both lexical indexes on it:

- **engine**: SQLite FTS5 written with the chunks (`rag.stores.fts_index`), what a knowledge base on
  the embedded default searches now;
- **in process**: the `BM25Index` rebuilt from every chunk after a change and saved next to the
  knowledge base (`rag.retrieval.bm25_cache`), what it searched before and what backends without an
  engine index still get (selected by making the knowledge base report no engine index).

Rows: the cold `rag ask` (a fresh process, `--json`, the default chain: median of `--runs`) and its
peak memory (the child's max RSS); one new three-line document indexed, then the next `rag ask`; a
hybrid query's p50 / p99 in a warm process (the retriever `rag ask` builds, 50 questions, k = 8), and
the disk each index takes. Prints a Markdown table and the load average.

    python bench/scale_query.py --n 100000 --dir /tmp/scale-100k [--runs 3] [--json out.json]

`--backend JSON` keeps the chunks in another store, as `rag index --backend` (e.g. `{"kind": "pgvector",
"url_env": "RAG_PG_URL"}`): the writes, every `rag ask` and the warm queries go to it, so "engine" is that
store's own lexical search (PostgreSQL full-text search for pgvector) and "in process" the `BM25Index`
beside it; the lexical index's disk is then the engine's and is not reported.

`--lexical-only`: the two lexical indexes alone over the same N chunks (no vectors, no `rag ask`), for
sizes whose knowledge base takes too long to build here: building each, one new document then the
next query (FTS5: its rows written; in process: the index built again, as the cache does after a
change), a query's p50 (the lexical side of hybrid: fetch_k = 20), the memory a process adds to
open each and query it once (the saved `BM25Index` loaded whole; FTS5 opened), and the disk. FTS5's
queries are timed in a fresh process (p50 / p99, and the p50 of the process's CPU time, which a loaded
machine inflates less; unfiltered, filtered to one document and to 1% of the chunks) with that
process's memory. `--engine-only` leaves out `BM25Index` (at 1M chunks it needs about
10 GB to build); `--sizes` measures several sizes in one run; `--reuse` keeps an FTS5 file already built.

    python bench/scale_query.py --lexical-only --n 100000 --dir /tmp/lexical-100k
    nice -n 10 python bench/scale_query.py --lexical-only --engine-only --reuse --sizes 100000,1000000 --dir /tmp/lex
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NAME = "scale"
QUESTION = "What did the report say about term17 and term233?"
IN_PROCESS = "import rag.retrieval.kb_search as s; s.engine_lexical = lambda kb: None; "


@functools.cache
def _cumulative(vocabulary: int) -> list[float]:
    """The Zipf-like law's cumulative weights (what `random.choices` makes of ``weights`` on every call)."""
    return list(itertools.accumulate(1 / (i + 1) for i in range(vocabulary)))


def _words(seed: int, vocabulary: int = 5000) -> list[str]:
    rng = random.Random(seed)
    return [f"term{i}" for i in rng.choices(range(vocabulary), cum_weights=_cumulative(vocabulary), k=120)]


def _store(backend: str | None, *, create: bool = False) -> dict:
    """`KnowledgeBase`'s `store=` for `--backend` (opened with the fake embedding), or nothing (the default)."""
    if not backend:
        return {}
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from rag.config.knowledge_base import store_config

    return {"store": store_config({**json.loads(backend), "create": create}, NAME).open(
        DeterministicFakeEmbedding(size=384))}


def build(directory: Path, n: int, backend: str | None = None) -> float:
    """N chunks through the write path, 1,000 per document; seconds taken."""
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from rag.compose.knowledge_base import KnowledgeBase
    from rag.indexing.autocontext import AutoContext
    from rag.indexing.chunking import PassthroughChunker

    kb = KnowledgeBase(NAME, directory, embedding=DeterministicFakeEmbedding(size=384),
                       chunker=PassthroughChunker(), autocontext=AutoContext(enabled=False), cache=False,
                       **_store(backend, create=True))
    started = time.perf_counter()
    for d in range(0, n, 1000):
        docs = [Document(page_content=" ".join(_words(d + i)),
                         metadata={"source": f"doc{d // 1000}", "title": f"Report {d // 1000}"})
                for i in range(min(1000, n - d))]
        kb.add_documents(docs)
    kb.close()
    return time.perf_counter() - started


def ask(directory: Path, prefix: str = "", backend: str | None = None) -> tuple[float, float]:
    """A `rag ask --json` in a fresh process: (wall seconds, the child's peak RSS in MB)."""
    where = ["--backend", backend] if backend else []
    code = (f"{prefix}from rag.cli import main; raise SystemExit(main(['ask', {QUESTION!r}, '--store', "
            f"{str(directory)!r}, '--collection', {NAME!r}, '--json', *{where!r}]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    if status:
        raise SystemExit(f"rag ask failed: {child.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def query_p50(directory: Path, engine: bool, backend: str | None = None) -> tuple[float, float]:
    """p50 and p99 (ms) of the hybrid retriever's query, warm, 50 questions."""
    import rag.retrieval.kb_search as kb_search
    from rag.compose.knowledge_base import KnowledgeBase

    original = kb_search.engine_lexical
    if not engine:
        kb_search.engine_lexical = lambda kb: None
    try:
        retriever = KnowledgeBase(NAME, directory, **_store(backend)).as_resource(search="hybrid").retriever
    finally:
        kb_search.engine_lexical = original
    rng = random.Random(7)
    questions = [" ".join(f"term{rng.randrange(3000)}" for _ in range(5)) for _ in range(50)]
    retriever.invoke(questions[0], k=8)
    times = []
    for q in questions:
        started = time.perf_counter()
        retriever.invoke(q, k=8)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.99 * (len(times) - 1))]


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS")) / 1024


def _chunk(i: int) -> tuple[str, str, dict]:
    """The `--lexical-only` corpus' chunk number `i`: (id, text, metadata); documents of 1,000 chunks."""
    return f"c{i}", " ".join(_words(i)), {"doc_id": f"d{i // 1000}", "chunk_index": i % 1000,
                                          "title": f"Report {i // 1000}"}


def _questions() -> list[str]:
    rng = random.Random(7)
    return [" ".join(f"term{rng.randrange(3000)}" for _ in range(5)) for _ in range(50)]


def _filters(n: int) -> dict[str, dict]:
    """The filters the probe times: one document (1,000 chunks), and 1% of the chunks (documents by `$in`)."""
    return {"one_document": {"doc_id": "d3"},
            "one_percent": {"doc_id": {"$in": [f"d{d}" for d in range(3, 3 + max(1, n // 100_000))]}}}


def fts_probe(path: Path, n: int) -> dict:
    """In a fresh process: open the FTS5 index, answer the questions (unfiltered and filtered), and say what it
    cost: p50 / p99 (ms) and the process's memory (MB: after the imports, after opening and one query, peak)."""
    import resource

    from rag.stores.fts_index import FTSIndex

    questions, out = _questions(), {"rss_after_imports_mb": round(_rss_mb())}
    opened = FTSIndex(path)
    opened.search(questions[0], k=20)
    out["rss_after_open_and_query_mb"] = round(_rss_mb())

    def timed(flt: dict | None) -> tuple[float, float, float]:
        opened.search(questions[0], k=20, filter=flt)
        times, cpu = [], []
        for q in questions:
            t, c = time.perf_counter(), time.process_time()
            opened.search(q, k=20, filter=flt)
            times.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
        times.sort()
        return (round(statistics.median(times), 1), round(times[int(0.99 * (len(times) - 1))], 1),
                round(statistics.median(cpu), 1))

    out["query_p50_ms"], out["query_p99_ms"], out["query_cpu_p50_ms"] = timed(None)
    for name, flt in _filters(n).items():
        out[f"query_{name}_p50_ms"], out[f"query_{name}_p99_ms"], out[f"query_{name}_cpu_p50_ms"] = timed(flt)
    out["rss_peak_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


def lexical_only(directory: Path, n: int, *, in_process: bool = True, reuse: bool = False) -> dict:
    """Both lexical indexes over the same N synthetic chunks, without vectors (see the module docstring)."""
    import gc

    from langchain_core.documents import Document

    from rag.retrieval.lexical import BM25Index
    from rag.stores.fts_index import FTSIndex

    directory.mkdir(parents=True, exist_ok=True)
    new = Document(page_content="A new note.\nIt names term17.\nThird line.", metadata={"doc_id": "new"}, id="new")
    out: dict = {"n": n}
    fts_path = directory / "lexical.sqlite"
    fts, started = FTSIndex(fts_path), time.perf_counter()
    if reuse and fts_path.exists() and fts.count() in (n, n + 1):
        out["fts_build_s"] = "reused"
        out["fts_first_open_s"] = round(time.perf_counter() - started, 1)   # a file of before: its side tables built
    else:
        fts.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{fts_path}{suffix}").unlink(missing_ok=True)
        started = time.perf_counter()
        fts = FTSIndex(fts_path)
        for start in range(0, n, 5000):
            part = [_chunk(i) for i in range(start, min(n, start + 5000))]
            fts.add([c[0] for c in part], [c[1] for c in part], [c[2] for c in part])
        out["fts_build_s"] = round(time.perf_counter() - started, 1)
    fts.delete([new.id])
    probe = subprocess.run([sys.executable, __file__, "--fts-probe", str(fts_path), "--n", str(n)],
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, check=False)
    if probe.returncode:
        raise SystemExit(f"the FTS5 probe failed: {probe.stderr[-2000:]}")
    out["fts_fresh_process"] = json.loads(probe.stdout)
    opened = FTSIndex(fts_path)
    opened.search("term17 note", k=20)
    started = time.perf_counter()
    fts.add([new.id], [new.page_content], [new.metadata])
    opened.search("term17 note", k=20)
    out["fts_new_document_then_query_s"] = round(time.perf_counter() - started, 3)
    out["fts_disk_mb"] = round(_size([fts_path]))
    if not in_process:
        return out
    docs = [Document(page_content=text, metadata=md, id=id_) for id_, text, md in map(_chunk, range(n))]
    questions = _questions()
    started = time.perf_counter()
    bm25 = BM25Index.from_documents(docs, metadata_fields=["title", "section"])
    bm25.save(directory / "bm25")
    out["bm25_build_s"] = round(time.perf_counter() - started, 1)
    del bm25
    gc.collect()

    def p50(search: Any) -> float:
        search(questions[0])
        times = []
        for q in questions:
            t = time.perf_counter()
            search(q)
            times.append((time.perf_counter() - t) * 1000)
        return round(statistics.median(times), 1)

    before, started = _rss_mb(), time.perf_counter()
    loaded = BM25Index.load(directory / "bm25")
    loaded.search(questions[0], k=20)
    out["bm25_load_and_query_mb"] = round(_rss_mb() - before)
    out["bm25_load_s"] = round(time.perf_counter() - started, 1)
    out["bm25_query_p50_ms"] = p50(lambda q: loaded.search_documents(q, k=20))
    out["bm25_query_filtered_p50_ms"] = p50(lambda q: loaded.search_documents(q, k=20, filter={"doc_id": "d3"}))
    del loaded
    gc.collect()
    started = time.perf_counter()
    BM25Index.from_documents([*docs, new], metadata_fields=["title", "section"]).search("term17 note", k=20)
    out["bm25_new_document_then_query_s"] = round(time.perf_counter() - started, 1)
    out["bm25_disk_mb"] = round(_size([directory / "bm25"]))
    return out


def _size(paths: list[Path]) -> float:
    return sum(f.stat().st_size for p in paths for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file()) / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dir", default="/tmp/rag-scale-query")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", default=None)
    parser.add_argument("--lexical-only", action="store_true", help="the two lexical indexes alone (no vectors)")
    parser.add_argument("--engine-only", action="store_true",
                        help="with --lexical-only: FTS5 alone (no BM25Index: at 1M chunks it needs ~10 GB to build)")
    parser.add_argument("--sizes", default=None,
                        help="with --lexical-only: comma-separated sizes, one folder each under --dir (n-<size>)")
    parser.add_argument("--reuse", action="store_true",
                        help="with --lexical-only: keep an FTS5 file of the right size in --dir instead of building it")
    parser.add_argument("--backend", metavar="JSON", default=None,
                        help='keep the chunks in another store, as `rag index --backend` (e.g. '
                             '\'{"kind": "pgvector", "url_env": "RAG_PG_URL"}\')')
    parser.add_argument("--fts-probe", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.fts_probe:
        print(json.dumps(fts_probe(Path(args.fts_probe), args.n)))
        return 0
    if args.lexical_only:
        sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else [args.n]
        result: dict = {"load_average_start": [round(x, 1) for x in os.getloadavg()]}
        for size in sizes:
            folder = Path(args.dir) / f"n-{size}" if args.sizes else Path(args.dir)
            result[str(size)] = lexical_only(folder, size, in_process=not args.engine_only, reuse=args.reuse)
            result[str(size)]["load_average"] = [round(x, 1) for x in os.getloadavg()]
        print(json.dumps(result, indent=1))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))
        return 0
    directory = Path(args.dir)
    home = directory / "kb" / NAME
    out: dict = {"n": args.n}
    built = (home / "manifest.json").exists()
    if args.backend:
        from rag.base.errors import StoreError
        from rag.compose.knowledge_base import KnowledgeBase

        try:
            built = KnowledgeBase(NAME, directory, **_store(args.backend)).exists
        except StoreError:   # no table yet
            built = False
    if not built:
        out["build_s"] = round(build(directory, args.n, args.backend), 1)
        print(f"built {args.n:,} chunks in {out['build_s']} s (vectors and lexical rows)", file=sys.stderr)
    for label, prefix in (("engine", ""), ("in_process", IN_PROCESS)):
        first = ask(directory, prefix, args.backend)   # in process: builds and saves the BM25 index when none is current
        runs = [ask(directory, prefix, args.backend) for _ in range(args.runs)]
        out[label] = {"first_ask_s": round(first[0], 2), "ask_s": round(statistics.median(r[0] for r in runs), 2),
                      "ask_rss_mb": round(max(r[1] for r in runs)), "first_ask_rss_mb": round(first[1])}
        print(label, out[label], file=sys.stderr)
    from langchain_core.documents import Document

    from rag.compose.knowledge_base import KnowledgeBase

    for label, prefix in (("engine", ""), ("in_process", IN_PROCESS)):
        kb = KnowledgeBase(NAME, directory, **_store(args.backend))
        kb.add_documents([Document(page_content=f"A new note.\nIt names term17 for {label}.\nThird line.",
                                   metadata={"source": f"new-{label}-{time.time_ns()}"})])
        kb.close()
        wall, rss = ask(directory, prefix, args.backend)
        out[label].update({"ask_after_new_document_s": round(wall, 2), "ask_after_new_document_rss_mb": round(rss)})
        print(label, "after a new document", wall, file=sys.stderr)
    for label in ("engine", "in_process"):
        p50, p99 = query_p50(directory, label == "engine", args.backend)
        out[label].update({"hybrid_p50_ms": round(p50, 1), "hybrid_p99_ms": round(p99, 1)})
    out["engine"]["disk_mb"] = "in the engine" if args.backend else round(_size([home / "lexical.sqlite"]))
    out["in_process"]["disk_mb"] = round(_size(list(home.glob("bm25-*"))))
    out["load_average"] = round(os.getloadavg()[0], 1)
    rows = [("`rag ask`, steady (s, median)", "ask_s"), ("`rag ask` peak memory (MB)", "ask_rss_mb"),
            ("one new document, then `rag ask` (s)", "ask_after_new_document_s"),
            ("hybrid query p50 (ms, warm)", "hybrid_p50_ms"), ("hybrid query p99 (ms, warm)", "hybrid_p99_ms"),
            ("lexical index on disk (MB)", "disk_mb")]
    engine = f"{json.loads(args.backend)['kind']} (engine)" if args.backend else "SQLite FTS5 (engine)"
    print(f"| {args.n:,} chunks | {engine} | BM25Index (in process) |\n|---|---|---|")
    for title, key in rows:
        print(f"| {title} | {out['engine'][key]} | {out['in_process'][key]} |")
    print(f"load average {out['load_average']}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
