"""Milvus' BM25 search (a knowledge base's lexical index on a collection rag created) on Milvus Lite.

Two measurements (docs/stores.md quotes them):

- ``latency``: a lexical search's time over `--chunks` synthetic chunks (60-140 words each), with and
  without a metadata filter, next to SQLite FTS5 over the same chunks and to the collection's dense
  search. The first run writes the chunks (its searches find them in Milvus Lite's memory table); a
  second run on the same `--dir` searches them after the writer closed the file (flushed to a segment).
- ``segments``: how far Milvus' scores are from Okapi BM25 computed over all chunks when the rows sit
  in several segments (Milvus Lite scores each row with its own segment's statistics). Each of
  `--parts` processes writes `--chunks` chunks (batches of 1,000) with a small memory table, so each
  batch becomes a segment; `--memtable 0` keeps Lite's 128 MB, so the rows stay in one.

    python bench/milvus_lexical.py latency --chunks 20000 --dir /tmp/mlat   # then again: after the flush
    python bench/milvus_lexical.py segments --parts 3 --chunks 700 --dir /tmp/mseg [--skew 0.7] [--memtable 0]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: E402

from rag.base.text import tokenize  # noqa: E402
from rag.stores.fts_index import FTSIndex  # noqa: E402
from rag.stores.in_store_lexical import B, K1, chunk_tokens  # noqa: E402
from rag.stores.milvus import MilvusChunks, open_store  # noqa: E402
from rag.stores.milvus_lexical import MilvusLexical  # noqa: E402

DIM = 32
WORDS = [f"{a}{b}" for a in "abcdefghijklmnopqrstuvwxyz" for b in ("ton", "ler", "mar", "ques", "vin", "dor", "pel")]


def _chunks(directory: Path) -> MilvusChunks:
    return MilvusChunks(open_store("bench", DeterministicFakeEmbedding(size=DIM), uri=str(directory / "m.db"),
                                   create=True))


def _write(chunks: MilvusChunks, texts: list[str], start: int) -> None:
    ids = [f"{start + i:032x}" for i in range(len(texts))]
    mds = [{"doc_id": f"d{(start + i) // 10}", "team": "ab"[(start + i) % 2]} for i in range(len(texts))]
    for s in range(0, len(ids), 1000):
        part = slice(s, s + 1000)
        chunks.add(ids[part], [[1.0] + [0.0] * (DIM - 1)] * len(ids[part]), texts[part], mds[part])


def _p50(search, queries: list) -> str:
    times = []
    for query in queries:
        t = time.perf_counter()
        search(query)
        times.append(time.perf_counter() - t)
    return f"p50 {statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms"


def latency(args: argparse.Namespace) -> None:
    rng = random.Random(0)
    args.dir.mkdir(parents=True, exist_ok=True)
    chunks, fts = _chunks(args.dir), FTSIndex(args.dir / "lexical.sqlite")
    if chunks.count() == 0:
        texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(60, 140))) for _ in range(args.chunks)]
        t = time.perf_counter()
        _write(chunks, texts, 0)
        print(f"written: {args.chunks:,} chunks, Milvus Lite (vectors and tokens) {time.perf_counter() - t:.1f} s")
        fts.add([f"{i:032x}" for i in range(args.chunks)], texts,
                [{"doc_id": f"d{i // 10}", "team": "ab"[i % 2]} for i in range(args.chunks)])
        print("searching the rows in Milvus Lite's memory table (run again for a flushed segment)")
    else:
        print(f"searching {chunks.count():,} chunks written by an earlier process")
    lexical = MilvusLexical(chunks)
    queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(20)]
    vectors = [[rng.random() for _ in range(DIM)] for _ in range(20)]
    for flt in (None, {"team": "a"}):
        print(f"filter {flt}:")
        print("  milvus bm25  ", _p50(lambda q: lexical.search(q, k=10, filter=flt), queries))
        print("  sqlite fts5  ", _p50(lambda q: fts.search(q, k=10, filter=flt), queries))
        print("  milvus dense ", _p50(lambda v: chunks.search(v, k=10, filter=flt), vectors))


def okapi(docs: dict[str, list[str]], query: str) -> dict[str, float]:
    """Okapi BM25 (rag's K1, B; idf ln(1 + (N - n + 0.5) / (n + 0.5)); the mean length) over all of `docs`."""
    n, avg = len(docs), sum(map(len, docs.values())) / len(docs)
    terms = set(tokenize(query))
    df = {t: sum(t in toks for toks in docs.values()) for t in terms}
    out = {}
    for id_, toks in docs.items():
        tf = Counter(toks)
        score = sum(math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) * tf[t] * (K1 + 1)
                    / (tf[t] + K1 * (1 - B + B * len(toks) / avg)) for t in terms if tf[t])
        if score:
            out[id_] = score
    return out


def segments(args: argparse.Namespace) -> None:
    args.dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)   # (a small memory table: each part's batches flushed, each a segment)
    if args.memtable:
        env["MILVUS_LITE_MEMTABLE_MEMORY_LIMIT_BYTES"] = str(args.memtable)
    for part in range(args.parts):
        subprocess.run([sys.executable, __file__, "write-part", "--dir", str(args.dir), "--chunks", str(args.chunks),
                        "--part", str(part), "--skew", str(args.skew)], env=env, check=True)
    chunks = _chunks(args.dir)
    lexical = MilvusLexical(chunks)
    stored = chunks.get_by_ids([f"{i:032x}" for i in range(chunks.count())])
    docs = {d.id: chunk_tokens(d.page_content, d.metadata) for d in stored}
    rng = random.Random(1)
    errors, overlap, same = [], [], 0
    queries = [" ".join(rng.sample(WORDS, rng.randint(1, 3))) for _ in range(50)]
    for query in queries:
        expected = okapi(docs, query)
        found = {d.id: s for d, s in lexical.search(query, k=len(docs))}
        errors += [abs(found[i] - s) / s for i, s in expected.items()]
        best = [i for i, _ in sorted(expected.items(), key=lambda kv: -kv[1])[:10]]
        top = [d.id for d, _ in lexical.search(query, k=10)]
        overlap.append(len(set(best) & set(top)) / 10)
        same += best == top
    print(f"{len(docs):,} chunks in {args.parts} part(s); score vs Okapi over all: relative error median "
          f"{statistics.median(errors):.2e}, max {max(errors):.2e}; top-10 overlap {statistics.mean(overlap):.3f}, "
          f"the same top 10 in order for {same}/{len(queries)} questions")


def write_part(args: argparse.Namespace) -> None:
    rng = random.Random(args.part)
    chunks = _chunks(args.dir)
    lo = rng.randrange(0, len(WORDS) - 60)   # (with --skew, each part favours 60 words of its own)
    texts = [" ".join(rng.choice(WORDS[lo:lo + 60] if rng.random() < args.skew else WORDS)
                      for _ in range(rng.randint(5, 60))) for _ in range(args.chunks)]
    _write(chunks, texts, chunks.count())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("latency", "segments", "write-part"))
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--parts", type=int, default=3)
    parser.add_argument("--part", type=int, default=0)
    parser.add_argument("--skew", type=float, default=0.0)
    parser.add_argument("--memtable", type=int, default=100_000,
                        help="Milvus Lite's memory table in bytes for the writers (0: its default, 128 MB)")
    args = parser.parse_args()
    {"latency": latency, "segments": segments, "write-part": write_part}[args.what](args)


if __name__ == "__main__":
    main()
