"""Build the 1M-chunk persistent store used by `bench/query.py dense` (resumable; run with nohup).

Writes random unit vectors for `--docs` documents of `--chunks` chunks each into a
`PartitionedChroma` (one collection per `doc_name` plus a global collection), logging progress
to `<dir>/progress.json` so a partial build can still be measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: E402

from rag.retrieval.partitioned import PartitionedChroma  # noqa: E402

DIM = 384


def open_store(directory: Path) -> PartitionedChroma:
    return PartitionedChroma("bench", DeterministicFakeEmbedding(size=DIM), partition_key="doc_name",
                             persist_directory=directory)


def unit_vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--docs-per-batch", type=int, default=5)
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    progress_file = args.dir / "progress.json"
    done = json.loads(progress_file.read_text())["docs"] if progress_file.exists() else 0
    store = open_store(args.dir)
    start = time.perf_counter()
    for first in range(done, args.docs, args.docs_per_batch):
        docs = range(first, min(first + args.docs_per_batch, args.docs))
        rng = np.random.default_rng(first)
        vecs = unit_vectors(rng, len(docs) * args.chunks)
        metas = [{"doc_name": f"doc-{d:04d}", "chunk_index": i} for d in docs for i in range(args.chunks)]
        ids = [f"{d}-{i}" for d in docs for i in range(args.chunks)]
        store.add_embeddings(vecs, metadatas=metas, ids=ids)
        elapsed = time.perf_counter() - start
        added = (docs[-1] + 1 - done) * args.chunks
        progress_file.write_text(json.dumps({"docs": docs[-1] + 1, "chunks": (docs[-1] + 1) * args.chunks,
                                             "seconds_this_run": round(elapsed, 1),
                                             "chunks_per_second": round(added / elapsed, 1)}))
        print(progress_file.read_text(), flush=True)


if __name__ == "__main__":
    main()
