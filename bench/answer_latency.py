"""What the answerer adds to `rag ask`: retrieval vs answering, wall and CPU seconds, medians over the questions.

Opens a knowledge base made by `rag index` the way `rag ask` does (`rag.cli.store.store_rag`), and for
every question of a corpus of `bench/answer_corpora/` (as indexed by `python bench/answers.py`): the
chain's retrieval (`RAG.chain()` with the retrieval only: `rag.retrieve` on the same resource and
settings) and the default answerer on its context (`default_llm().invoke`), each timed in wall and
CPU seconds (CPU: this process, all threads; the machine may be shared, so CPU is what the code costs),
after one warm-up question (the models loaded). Prints the medians and the load average.

    python bench/answer_latency.py --store /work/cache/answers/store --corpus git
    python bench/answer_latency.py --store /work/cache/answers/store --corpus git --comparisons
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="the store `python bench/answers.py` indexed into")
    parser.add_argument("--corpus", default="git", help="a corpus of bench/answer_corpora (its collection name)")
    parser.add_argument("--comparisons", action="store_true",
                        help="time the corpus' comparison questions (each side is asked: two scorings)")
    args = parser.parse_args(argv)
    from rag import retrieve
    from rag.cli.store import store_rag
    from rag.generation.answerer import default_llm

    spec = json.loads((ROOT / "bench/answer_corpora" / f"{args.corpus}.json").read_text(encoding="utf-8"))
    questions = [q["question"] for q in spec["comparisons" if args.comparisons else "questions"]]
    rag = store_rag(argparse.Namespace(store=args.store, collection=args.corpus, search="hybrid",
                                       backend=None))
    resource, answerer = rag.resources[0], default_llm()
    rows = []
    for i, question in enumerate([questions[0], *questions]):
        wall, cpu = time.perf_counter(), time.process_time()
        context = retrieve(question, resource).context
        retrieved = (time.perf_counter() - wall, time.process_time() - cpu)
        wall, cpu = time.perf_counter(), time.process_time()
        answerer.invoke({"question": question, "context": context})
        answered = (time.perf_counter() - wall, time.process_time() - cpu)
        if i:   # the first run is the warm-up
            rows.append((*retrieved, *answered))
    med = [statistics.median(col) for col in zip(*rows)]
    print(f"{args.corpus}: {len(rows)} questions, load average {os.getloadavg()[0]:.1f} (2 cores)")
    print("| step | wall (median) | CPU (median) |\n|---|---|---|")
    print(f"| retrieval | {med[0]:.3f} s | {med[1]:.3f} s |\n| answerer (added) | {med[2]:.3f} s | {med[3]:.3f} s |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
