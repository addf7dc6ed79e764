"""Routing on against off on a corpus of `bench/answers.py`: does the default routing lose a question off finds?

Asks every answerable question of `bench/answer_corpora/NAME.json` through `RAG(...).chain()` over the knowledge
base `bench/answers.py` built (DIR/store, collection NAME), once with the knowledge base's default routing
(`as_resource(routing="auto")`) and once without (`routing="off"`), and prints the context hit of each (a gold
source page in the context, `bench/answers.py`'s rule) and the questions routing on loses or wins.

    python bench/answers.py --corpora jinja --cache DIR      # builds DIR/store once
    python bench/routing_onoff.py --corpus jinja --store DIR/store
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from answers import context_hit  # noqa: E402

from rag import RAG, KnowledgeBase  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="a name in bench/answer_corpora")
    parser.add_argument("--store", required=True, help="the store bench/answers.py built for it (DIR/store)")
    args = parser.parse_args()
    spec = json.loads((ROOT / "bench/answer_corpora" / f"{args.corpus}.json").read_text(encoding="utf-8"))
    questions = [q for q in spec["questions"] if q.get("answers")]
    hits = {}
    for routing in ("auto", "off"):
        chain = RAG(resources=[KnowledgeBase.open(args.corpus, args.store).as_resource(routing=routing)]).chain()
        hits[routing] = [context_hit(q, [{"metadata": d.metadata} for d in chain.invoke(q["question"])["context"]])
                         for q in questions]
        print(f"routing {routing}: context hit {sum(hits[routing])}/{len(questions)}", flush=True)
    for label, a, b in (("lost", "off", "auto"), ("won", "auto", "off")):
        moved = [q["question"] for q, x, y in zip(questions, hits[a], hits[b]) if x and not y]
        print(f"routing on {label} {len(moved)}:", *(f"  {m}" for m in moved), sep="\n")


if __name__ == "__main__":
    main()
