"""Context hits of the default chain with the engine's lexical index vs the in-process BM25 index, side by side.

The embedded default searches its lexical side in SQLite FTS5 (`rag.stores.fts_index`, ``bm25()``
with k1 = 1.2); before, it searched an in-process `BM25Index` (k1 = 1.5) rebuilt after each change.
This script asks every answerable question of `bench/answers.py`'s corpora through the public door,
`rag ask QUESTION --json` (run in this process through `rag.cli.main`), once with each lexical index
(the in-process one by making the knowledge base report no engine index, the code path every backend
without one takes), and prints the context hits (a gold source or page in the context) of both, and
how many questions got a different context.

    python bench/lexical_ranking.py --corpora diffutils,git,requests,sqlite --cache /tmp/lexical
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from answers import _docs_corpus, _financebench_corpus, context_hit, rag_cli  # noqa: E402
from answer_questions import DEFAULT_DATA  # noqa: E402


def contexts(name: str, store: str, questions: list[dict]) -> list[list[dict]]:
    return [json.loads(rag_cli("ask", q["question"], "--store", store, "--collection", name, "--json"))["context"]
            for q in questions]


def compare(name: str, cache: Path, data: str) -> dict:
    import rag.retrieval.kb_search as kb_search

    files, questions = _financebench_corpus(data) if name == "financebench" else _docs_corpus(name, cache)
    questions = [q for q in questions if q["answers"]]
    store = str(cache / "store")
    started = time.perf_counter()
    rag_cli("index", *files, "--store", store, "--collection", name)
    indexed = time.perf_counter() - started
    engine = contexts(name, store, questions)
    original = kb_search.engine_lexical
    kb_search.engine_lexical = lambda kb: None   # the in-process BM25Index, as before
    try:
        in_process = contexts(name, store, questions)
    finally:
        kb_search.engine_lexical = original
    ids = [[(d["metadata"].get("doc_id"), d["metadata"].get("chunk_index")) for d in c] for c in (engine + in_process)]
    differ = sum(a != b for a, b in zip(ids[:len(questions)], ids[len(questions):]))
    return {"corpus": name, "answerable": len(questions), "indexed_s": round(indexed, 1),
            "hit_engine": sum(context_hit(q, c) for q, c in zip(questions, engine)),
            "hit_in_process": sum(context_hit(q, c) for q, c in zip(questions, in_process)),
            "contexts_differ": differ}   # (no timings: the first pass also loads the models)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpora", default="diffutils,git,requests,sqlite")
    parser.add_argument("--cache", default="/tmp/lexical-ranking", help="stores and copied pages, per corpus")
    parser.add_argument("--data", default=DEFAULT_DATA, help="FinanceBench data (default: %(default)s)")
    args = parser.parse_args(argv)
    rows = []
    for name in args.corpora.split(","):
        cache = Path(args.cache) / name
        cache.mkdir(parents=True, exist_ok=True)
        rows.append(compare(name, cache, args.data))
        print(json.dumps(rows[-1]), flush=True)
    print("| corpus | answerable | context hit, SQLite FTS5 | context hit, in-process BM25 | contexts that differ |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['corpus']} | {r['answerable']} | {r['hit_engine']} | {r['hit_in_process']} | {r['contexts_differ']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
