"""Build the 1M-chunk persistent store used by `bench/query.py dense` (resumable; run with nohup).

Writes ``--docs`` documents of ``--chunks`` chunks each (random 384-d unit vectors, a short
synthetic text, metadata ``doc_name`` and ``chunk_index``) into the global collection of a
`PartitionedChroma` keyed on ``doc_name``, in batches of Chroma's maximum size, and the same
vectors to each document's exact-search arrays (``rag-partitions/``), in one pass. Progress goes
to ``<dir>/progress.json`` so a partial build can still be measured, and a killed build resumes
where it stopped. ``--arrays-only`` regenerates the (seeded) vectors of the finished documents and
writes only the arrays; ``--from-chroma`` rebuilds them from the collection instead
(`PartitionedChroma.index_partitions`, the path for stores written by other tools).

Usage:
    nohup nice -n 19 python bench/_dense_build.py --dir /work/bench-1m > /work/bench-1m.log 2>&1 &
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DIM = 384
NAME = "bench"
KEY = "doc_name"


def open_store(directory: Path, **options):
    """The benchmark store (the embedding is never called: queries are precomputed vectors)."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from rag.stores import PartitionedChroma

    return PartitionedChroma(NAME, DeterministicFakeEmbedding(size=DIM), partition_key=KEY,
                             persist_directory=directory, **options)


def unit_vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def synthetic_texts(rng: np.random.Generator, doc: int, n: int) -> list[str]:
    words = rng.integers(0, 5000, size=(n, 12))
    return [f"doc-{doc:04d} chunk {i}: " + " ".join(f"term{w}" for w in row) for i, row in enumerate(words)]


def batch(first: int, docs: int, chunks: int, docs_per_batch: int):
    """The seeded vectors, texts, metadata and ids of documents first .. first + docs_per_batch."""
    batch_docs = range(first, min(first + docs_per_batch, docs))
    rng = np.random.default_rng(first)
    vecs = unit_vectors(rng, len(batch_docs) * chunks)
    texts = [t for d in batch_docs for t in synthetic_texts(rng, d, chunks)]
    metas = [{KEY: f"doc-{d:04d}", "chunk_index": i} for d in batch_docs for i in range(chunks)]
    ids = [f"{d}-{i}" for d in batch_docs for i in range(chunks)]
    return batch_docs, vecs, texts, metas, ids


def write_arrays(store, batch_docs: range, vecs: np.ndarray, ids: list[str], chunks: int) -> None:
    for j, d in enumerate(batch_docs):
        name = f"doc-{d:04d}"
        rows = slice(j * chunks, (j + 1) * chunks)
        store.partitions.write(store.partition_name(name), name, vecs[rows], ids[rows])


def build_global(directory: Path, docs: int, chunks: int, docs_per_batch: int) -> None:
    import chromadb

    progress_file = directory / "progress.json"
    done = json.loads(progress_file.read_text())["docs"] if progress_file.exists() else 0
    store = open_store(directory)
    client = chromadb.PersistentClient(path=str(directory))
    # the same name and space as PartitionedChroma(NAME, ...).global_name
    coll = client.get_or_create_collection(f"{NAME}.all", metadata={"hnsw:space": "cosine"})
    step = client.get_max_batch_size()
    start = time.perf_counter()
    for first in range(done, docs, docs_per_batch):
        batch_docs, vecs, texts, metas, ids = batch(first, docs, chunks, docs_per_batch)
        for s in range(0, len(ids), step):
            coll.add(ids=ids[s:s + step], embeddings=vecs[s:s + step], metadatas=metas[s:s + step],
                     documents=texts[s:s + step])
        write_arrays(store, batch_docs, vecs, ids, chunks)
        elapsed = time.perf_counter() - start
        added = (batch_docs[-1] + 1 - done) * chunks
        progress_file.write_text(json.dumps({"docs": batch_docs[-1] + 1, "chunks": (batch_docs[-1] + 1) * chunks,
                                             "seconds_this_run": round(elapsed, 1),
                                             "chunks_per_second": round(added / elapsed, 1)}))
        print(progress_file.read_text(), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--docs-per-batch", type=int, default=20)
    parser.add_argument("--arrays-only", action="store_true", help="only write the arrays of finished documents")
    parser.add_argument("--from-chroma", action="store_true", help="only rebuild the arrays from the collection")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if args.from_chroma:
        n = open_store(args.dir).index_partitions()
        print(json.dumps({"partitions_indexed": n, "seconds": round(time.perf_counter() - start, 1)}), flush=True)
    elif args.arrays_only:
        store = open_store(args.dir)
        done = json.loads((args.dir / "progress.json").read_text())["docs"]
        for first in range(0, done, args.docs_per_batch):
            batch_docs, vecs, _, _, ids = batch(first, done, args.chunks, args.docs_per_batch)
            write_arrays(store, batch_docs, vecs, ids, args.chunks)
        print(json.dumps({"partitions_written": done, "seconds": round(time.perf_counter() - start, 1)}), flush=True)
    else:
        build_global(args.dir, args.docs, args.chunks, args.docs_per_batch)


if __name__ == "__main__":
    main()
