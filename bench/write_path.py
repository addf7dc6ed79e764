"""The embedded default's write path against Chroma alone on the same chunks, as the store grows.

Writes N synthetic chunks (bench/scale_query.py's corpus: documents of 1,000 chunks of 120 words,
`DeterministicFakeEmbedding` 384-d vectors computed before each timed call, no AutoContext) through
`KnowledgeBase.add_documents` (Chroma, the SQLite FTS5 lexical index, the records, the permission
file) and, document by document in the same process, the same texts, vectors and metadata into a
bare Chroma collection made with the knowledge base's settings (`rag.stores.chroma.NEW_COLLECTION`):
the floor, what Chroma itself costs. Alternating per document, load from other processes hits both
alike. Each step of `--every` chunks prints both rates in wall time and in this process' CPU time
(Chroma's own threads included), which a loaded machine inflates less.

    python bench/write_path.py --n 30000 [--every 5000] [--json out.json]
    python bench/write_path.py --n 5000 --code /path/to/another/checkout   # that checkout's rag, same bench
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _timed(call, *args) -> tuple[float, float]:   # noqa: ANN001 - a bench helper
    wall, cpu = time.perf_counter(), time.process_time()
    call(*args)
    return time.perf_counter() - wall, time.process_time() - cpu


class _Given:
    """An `Embeddings` answering with the vectors set before the timed call (a dict lookup per text), so that
    the write path's figure holds no embedding, as Chroma alone's does not."""

    def __init__(self, size: int) -> None:
        self.vectors: dict[str, list[float]] = {}
        self.size = size

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.vectors.get(text) or [0.0] * self.size


def run(n: int, every: int, directory: Path) -> dict:
    """Both writes of N chunks, per step of `every`: {"steps": [...], "total": {...}}."""
    import chromadb
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding

    import scale_query
    from rag.compose.knowledge_base import KnowledgeBase
    from rag.indexing.autocontext import AutoContext
    from rag.indexing.chunking import PassthroughChunker
    from rag.stores.chroma import NEW_COLLECTION

    embedding, given = DeterministicFakeEmbedding(size=384), _Given(384)
    given.vectors["warm up"] = embedding.embed_query("warm up")
    kb = KnowledgeBase(scale_query.NAME, directory / "kb", embedding=given, chunker=PassthroughChunker(),
                       autocontext=AutoContext(enabled=False), cache=False)
    kb.add_documents([Document(page_content="warm up", metadata={"source": "warm-up"})])  # (imports, files opened)
    floor = chromadb.PersistentClient(path=str(directory / "floor")).get_or_create_collection(
        "floor", metadata=NEW_COLLECTION, embedding_function=None)
    steps, step = [], {"kb_wall": 0.0, "kb_cpu": 0.0, "chroma_wall": 0.0, "chroma_cpu": 0.0}
    for start in range(0, n, 1000):
        texts = [" ".join(scale_query._words(start + i)) for i in range(min(1000, n - start))]
        source, title = f"doc{start // 1000}", f"Report {start // 1000}"
        docs = [Document(page_content=t, metadata={"source": source, "title": title}) for t in texts]
        vectors = embedding.embed_documents(texts)
        given.vectors = dict(zip(texts, vectors, strict=True))
        wall, cpu = _timed(kb.add_documents, docs)
        step["kb_wall"] += wall
        step["kb_cpu"] += cpu
        # ids and doc ids shaped as the knowledge base's (hex digests: the id index takes them in no order)
        ids = [hashlib.sha256(f"{source}/{i}".encode()).hexdigest()[:32] for i in range(len(texts))]
        doc_id = hashlib.sha256(source.encode()).hexdigest()[:16]
        metadatas = [{"source": source, "title": title, "doc_id": doc_id, "chunk_index": i} for i in range(len(texts))]
        wall, cpu = _timed(lambda: floor.add(ids=ids, embeddings=vectors, documents=texts, metadatas=metadatas))
        step["chroma_wall"] += wall
        step["chroma_cpu"] += cpu
        done = start + len(texts)
        if done % every == 0 or done == n:
            size = done - (steps[-1]["chunks"] if steps else 0)
            steps.append({"chunks": done, **{k: round(size / v, 1) for k, v in step.items()},
                          "load": round(os.getloadavg()[0], 1)})
            last = steps[-1]
            print(f"{done:>9,} chunks: write path {last['kb_wall']:7.0f}/s wall {last['kb_cpu']:7.0f}/s CPU | "
                  f"Chroma alone {last['chroma_wall']:7.0f}/s wall {last['chroma_cpu']:7.0f}/s CPU | "
                  f"write path CPU {last['chroma_cpu'] / last['kb_cpu']:.2f}x Chroma's | load {last['load']}",
                  flush=True)
            step = dict.fromkeys(step, 0.0)
    kb.close()
    return {"n": n, "steps": steps}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=30_000)
    parser.add_argument("--every", type=int, default=5_000, help="chunks per printed step (a multiple of 1,000)")
    parser.add_argument("--dir", default=None, help="where to build (default: a temporary folder, removed)")
    parser.add_argument("--code", default=None, help="import rag from this checkout instead of this one")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    sys.path[:0] = [args.code or str(ROOT), str(ROOT / "bench")]
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    directory = Path(args.dir or tempfile.mkdtemp(prefix="rag-write-path-"))
    shutil.rmtree(directory, ignore_errors=True)
    try:
        import rag

        print(f"rag from {Path(rag.__file__).parent}; load {os.getloadavg()[0]:.1f}", flush=True)
        result = run(args.n, args.every, directory)
    finally:
        if args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
