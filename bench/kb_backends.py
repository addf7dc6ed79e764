"""Knowledge bases on every backend: the same answers as on Chroma, and what syncing costs on each.

Two parts, both through the library's own `KnowledgeBase` and `rag.retrieve` (what users run):

1. **Same sources** (real all-MiniLM-L6-v2): `docs/` is indexed into a Chroma knowledge base and
   into one on each backend (one directory, so the embedding cache computes every vector once),
   then the 24 questions of `bench/routing_docs_questions.json` are asked through `rag.retrieve`
   with the recommended settings (`kb.as_resource()`: hybrid search, routing, 4,000 tokens). It
   prints, per backend, how many contexts list the same chunks in the same order as Chroma's, how
   many the same source files, and the context hit (a gold file in the context). Chroma is built
   twice: its HNSW graph has random levels, so "chroma built again" shows how far Chroma agrees
   with itself; the other backends search exactly.
2. **Sync cost** (a `DeterministicFakeEmbedding`, so the store's work is what is measured):
   `--docs` synthetic documents of ~8 chunks; per backend the first sync, a no-op re-sync, a
   re-sync after 10% of the documents changed, and p50 / p99 of `kb.as_resource()` retrieval.

Qdrant's local mode and Milvus Lite are Python re-implementations of their servers: read their
times as those of the embedded modes only.

    python bench/kb_backends.py [--docs 500] [--backends chroma,faiss,...] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings  # noqa: E402

from rag.compose.defaults import recommended_retrieval  # noqa: E402
from rag.compose.knowledge_base import KnowledgeBase  # noqa: E402
from rag.compose.retrieve import retrieve  # noqa: E402
from rag.testing.stores import KB_BACKENDS, empty_store  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ("chroma", *KB_BACKENDS)
EMBEDDED_REIMPLEMENTATIONS = {"qdrant": "Qdrant local mode (Python)", "milvus": "Milvus Lite (Python)"}


def open_store(backend: str, embedding: Embeddings, workdir: Path, name: str, pg_url: str | None) -> Any:
    """An empty store of `backend` for a knowledge base's chunks (None: Chroma, the default)."""
    return None if backend == "chroma" else empty_store(backend, embedding, workdir, name, pg_url)


def same_sources(backends: list[str], workdir: Path, pg_url: str | None) -> dict[str, Any]:
    """Part 1: the docs questions on every backend against Chroma (real MiniLM)."""
    from rag.models.embeddings import default_embeddings

    embedding = default_embeddings()
    questions = json.loads((ROOT / "bench/routing_docs_questions.json").read_text(encoding="utf-8"))
    settings = recommended_retrieval().model_dump()
    contexts: dict[str, list[list[str]]] = {}
    results: dict[str, Any] = {}
    # Chroma twice: its HNSW graph is built with random levels, so a second build of the same corpus
    # shows how far Chroma agrees with itself (the other backends search exactly)
    for backend in ["chroma", "chroma built again", *[b for b in backends if b != "chroma"]]:
        name = f"docs-{backend.replace(' ', '-')}"
        kb = KnowledgeBase(name, workdir / "kbs", embedding=embedding,
                           store=open_store(backend.split()[0], embedding, workdir, name.replace("-", "_"), pg_url))
        report = kb.add_documents([str(ROOT / "docs")], include="**/*.md")
        resource = kb.as_resource()
        got, hits = [], 0
        for question, gold in questions:
            context = retrieve(question, resource, **settings).context
            got.append([d.id for d in context])
            hits += any(Path(d.metadata["source"]).name in gold for d in context)
            got[-1].append("|" + ",".join(sorted({Path(d.metadata["source"]).name for d in context})))
        contexts[backend] = got
        results[backend] = {"chunks": kb.count(), "embedded": report.embedded, "context_hit": hits,
                            "questions": len(questions)}
    exact = contexts.get("inmemory")   # an exact search: the reference the approximate index is held to
    for backend, got in contexts.items():
        for label, ref in (("chroma", contexts["chroma"]), ("exact", exact)):
            if ref is not None:
                results[backend][f"same_chunks_in_order_as_{label}"] = sum(
                    a[:-1] == b[:-1] for a, b in zip(got, ref, strict=True))
                results[backend][f"same_files_as_{label}"] = sum(a[-1] == b[-1] for a, b in zip(got, ref, strict=True))
        print(f"  {backend}: {results[backend]}", file=sys.stderr)
    return results


def _corpus(n: int, version: int = 0, changed: int = 0) -> list[Document]:
    docs = []
    for i in range(n):
        v = version if i < changed else 0
        text = "\n\n".join(f"Document {i} section {s} revision {v}: " + " ".join(
            f"term{(i * 7 + s * 13 + w) % 997}" for w in range(60)) for s in range(8))
        docs.append(Document(page_content=text, metadata={"source": f"doc-{i:05d}", "group": i % 10}))
    return docs


def sync_cost(backends: list[str], n_docs: int, workdir: Path, pg_url: str | None,
              queries: int = 100) -> dict[str, Any]:
    """Part 2: sync and query times per backend (fake embeddings: the store's work)."""
    embedding = DeterministicFakeEmbedding(size=384)
    first, changed = _corpus(n_docs), _corpus(n_docs, version=1, changed=n_docs // 10)
    settings = recommended_retrieval().model_dump()
    results = {}
    for backend in backends:
        name = f"sync_{backend}"
        kb = KnowledgeBase(name, workdir / "sync", embedding=embedding, cache=False,
                           store=open_store(backend, embedding, workdir, name, pg_url))
        timings: dict[str, Any] = {}
        for label, docs in (("first_sync_s", first), ("noop_sync_s", first), ("changed_10pct_sync_s", changed)):
            start = time.perf_counter()
            report = kb.add_documents(docs, cleanup="full")
            timings[label] = round(time.perf_counter() - start, 3)
            timings[label[:-2] + "_chunks_written"] = report.chunks_added
        resource = kb.as_resource()
        samples = []
        for q in range(queries):
            start = time.perf_counter()
            retrieve(f"term{q * 31 % 997} section {q % 8}", resource, **settings)
            samples.append(time.perf_counter() - start)
        samples.sort()
        timings.update({"chunks": kb.count(), "query_p50_ms": round(1000 * statistics.median(samples), 1),
                        "query_p99_ms": round(1000 * samples[int(0.99 * (len(samples) - 1))], 1),
                        "note": EMBEDDED_REIMPLEMENTATIONS.get(backend, "")})
        results[backend] = timings
        print(f"  {backend}: {timings}", file=sys.stderr)
    return results


def _table(title: str, rows: dict[str, dict[str, Any]], columns: list[tuple[str, Callable[[dict], Any]]]) -> str:
    lines = [f"{title}\n", "| backend | " + " | ".join(c for c, _ in columns) + " |",
             "|---|" + "---|" * len(columns)]
    lines += [f"| {b} | " + " | ".join(str(f(r)) for _, f in columns) + " |" for b, r in rows.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=500, help="synthetic documents for the sync part")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--skip-sources", action="store_true", help="only the sync part (no MiniLM)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown:
        parser.error(f"unknown backend(s) {unknown}; valid: {', '.join(BACKENDS)}")
    workdir = Path(tempfile.mkdtemp(prefix="rag-kb-backends-"))
    try:
        with _postgres(workdir, "pgvector" in backends) as pg_url:
            out: dict[str, Any] = {}
            if not args.skip_sources:
                out["same_sources"] = same_sources(backends, workdir, pg_url)
            out["sync"] = sync_cost(backends, args.docs, workdir, pg_url)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if "same_sources" in out:
        print(_table("Docs questions through rag.retrieve (MiniLM), against the Chroma knowledge base and the "
                     "exact in-memory one:",
                     out["same_sources"], [
                         ("chunks", lambda r: r["chunks"]),
                         ("same chunks, same order as Chroma", lambda r: f"{r['same_chunks_in_order_as_chroma']}/{r['questions']}"),
                         ("same files as Chroma", lambda r: f"{r['same_files_as_chroma']}/{r['questions']}"),
                         ("same chunks, same order as in memory (exact)",
                          lambda r: f"{r.get('same_chunks_in_order_as_exact', '-')}/{r['questions']}"),
                         ("context hit", lambda r: f"{r['context_hit']}/{r['questions']}")]))
        print()
    print(_table(f"Sync of {args.docs} synthetic documents (fake 384-d embeddings) and retrieval:", out["sync"], [
        ("chunks", lambda r: r["chunks"]), ("first sync s", lambda r: r["first_sync_s"]),
        ("no-op s", lambda r: r["noop_sync_s"]), ("10% changed s", lambda r: r["changed_10pct_sync_s"]),
        ("query p50 / p99 ms", lambda r: f"{r['query_p50_ms']} / {r['query_p99_ms']}"),
        ("", lambda r: r["note"])]))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


def _postgres(workdir: Path, needed: bool):
    from contextlib import nullcontext

    from rag.testing.pg_server import pg_server
    return pg_server(workdir / "pgdata") if needed else nullcontext(None)


if __name__ == "__main__":
    raise SystemExit(main())
