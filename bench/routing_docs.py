"""Does document routing hurt a corpus of ordinary documents? The project's own docs, with and without it.

Indexes `docs/` with `rag index`'s defaults into a temporary knowledge base (or `--store`), then
asks the questions of `bench/routing_docs_questions.json` (24 questions written for this check,
each with the file(s) that answer it) through `rag.retrieve` with the recommended settings, and
prints, per routing variant, how many contexts (4,000 tokens) hold a gold file and how many
rank one first:

- `off`: no routing;
- `summary cards, any word`: cards of title, file name and AutoContext summary, routed on any
  distinctive word the question shares with a card (the knowledge-base router before it was
  made the default);
- `summary cards, names only`: the same cards, routed only on words written as names;
- `default`: `kb.as_resource()`: identity cards (title, file name), names only.

    python bench/routing_docs.py [--store DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag.compose.defaults import recommended_retrieval  # noqa: E402
from rag.compose.knowledge_base import KnowledgeBase  # noqa: E402
from rag.compose.resource import Resource  # noqa: E402
from rag.compose.retrieve import retrieve  # noqa: E402
from rag.retrieval.routing import DocumentRouter  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _summary_router(kb: KnowledgeBase, *, names_only: bool) -> DocumentRouter:
    cards = {}
    for record in kb.list_documents():
        parts = [record.title, Path(record.source).stem.replace("_", " "), record.summary]
        cards[record.doc_id] = " | ".join(dict.fromkeys(p for p in parts if p))
    return DocumentRouter(cards, key="doc_id", names_only=names_only)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=None, help="knowledge base directory (default: a temporary one)")
    args = parser.parse_args(argv)
    store = args.store or tempfile.mkdtemp(prefix="rag-routing-docs-")
    kb = KnowledgeBase("docs", store)
    report = kb.add_documents([str(ROOT / "docs")], include="**/*.md")
    print(f"docs/: {report.summary()}", file=sys.stderr)
    questions = json.loads((ROOT / "bench/routing_docs_questions.json").read_text(encoding="utf-8"))
    plain = kb.as_resource(routing="off").retriever
    variants = {
        "off": kb.as_resource(routing="off"),
        "summary cards, any word": Resource(name="docs", retriever=plain,
                                            router=_summary_router(kb, names_only=False)),
        "summary cards, names only": Resource(name="docs", retriever=plain,
                                              router=_summary_router(kb, names_only=True)),
        "default (identity cards, names only)": kb.as_resource(),
    }
    settings = recommended_retrieval().model_dump()
    print(f"{len(questions)} questions, {len(kb.list_documents())} files\n")
    print("| routing | context hit | gold file first |\n|---|---|---|")
    for label, resource in variants.items():
        hits = first = 0
        for question, gold in questions:
            files = [Path(d.metadata["source"]).name for d in retrieve(question, resource, **settings).context]
            hits += any(f in gold for f in files)
            first += bool(files) and files[0] in gold
        print(f"| {label} | {hits}/{len(questions)} | {first}/{len(questions)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
