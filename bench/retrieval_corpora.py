"""Retrieval on every corpus of the report: does a retrieval setting hold up away from FinanceBench?

Runs `rag.retrieve` with the default pipeline (`RetrievalSettings()`), or with settings given as
`--set KEY=JSON` (any `RetrievalSettings` field), over knowledge bases that were built already
(nothing is indexed here) and scores the context against each question's gold places:

- `fb-single` / `fb-shared`: the 92 FinanceBench development questions over the 54 filings' knowledge
  base of the `default` row (`bench/financebench.py`; a `source` filter for single-document, none
  for the shared store), the budget counted as characters / 4 like the FinanceBench table; gold = an
  evidence page;
- `fb-answers`: the 17 quotable FinanceBench questions over the 11 filings' store of
  `bench/answers.py` (a second, smaller shared store); gold = an evidence page;
- `diffutils`, `git`: the answerable questions of `bench/answer_corpora/` over `bench/answers.py`'s
  stores (Debian's diffutils manual, 32 git man pages); gold = the source file;
- `gitman`: `bench/routing_generic_questions.json` over 160 git man pages (`bench/routing_generic.py`'s
  store); gold = the source file;
- `docs`: `bench/routing_docs_questions.json` over this project's docs (written by us: a weak check).

Per corpus: context hit (a gold place in the context), gold first (the context's first chunk is
gold), MRR of the first gold chunk in the ranking before the context is cut (its first 50), and
the median time of `retrieve` per question. `--dump FILE` writes every question's outcome, so two
runs can be compared question by question (`--compare OLD.json`).

    python bench/retrieval_corpora.py                                   # the default, every corpus
    python bench/retrieval_corpora.py --set 'rephrase=["feedback"]' --corpora fb-shared,gitman
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

CACHE = Path(os.environ.get("RAG_RETRIEVAL_CACHE", "/work/cache/s27-25ret"))
FB_DATA = Path(os.environ.get("RAG_FINANCEBENCH_DIR", "/work/shared/data/financebench"))
#: corpus -> (store directory, collection)
STORES = {
    "fb": (CACHE / "fb/default-kb", "financebench"),
    "fb-answers": (CACHE / "answers/store", "financebench"),
    "diffutils": (CACHE / "answers_main/store", "diffutils"),
    "git": (CACHE / "answers_main/store", "git"),
    "gitman": (CACHE / "r25r/store", "gitman"),
    "docs": (CACHE / "r25r/docs_store", "docs"),
}
CORPORA = ("fb-single", "fb-shared", "fb-answers", "diffutils", "git", "gitman", "docs")
BUDGET = 4000
ROUTER: dict = {}
RANKED = 50


def _questions(corpus: str) -> list[dict]:
    """Each question with its gold places: `pages` ((file stem, zero-based page)) or `files` (file names)."""
    if corpus in ("fb-single", "fb-shared"):
        from rag.evaluation.financebench import FinanceBenchData

        data = FinanceBenchData.load(FB_DATA)
        return [{"id": q.id, "question": q.question, "doc": q.doc_name, "pages": sorted(q.evidence_pages)}
                for q in data.questions]
    if corpus == "fb-answers":
        sys.path.insert(0, str(ROOT / "bench"))
        from answer_questions import selected_questions

        out = []
        for row, _ in selected_questions(str(FB_DATA)):
            pages = sorted({(e.get("doc_name", row["doc_name"]), int(e["evidence_page_num"])) for e in row["evidence"]})
            out.append({"id": row["financebench_id"], "question": row["question"], "pages": pages})
        return out
    if corpus in ("diffutils", "git"):
        spec = json.loads((ROOT / f"bench/answer_corpora/{corpus}.json").read_text(encoding="utf-8"))
        return [{"id": f"{corpus}-{i:02d}", "question": q["question"], "files": q["sources"]}
                for i, q in enumerate(spec["questions"], start=1) if q["answers"]]
    if corpus == "gitman":
        spec = json.loads((ROOT / "bench/routing_generic_questions.json").read_text(encoding="utf-8"))
        return [{"id": f"gitman-{i:02d}", "question": q["question"], "files": q["sources"]}
                for i, q in enumerate(spec["questions"], start=1)]
    spec = json.loads((ROOT / "bench/routing_docs_questions.json").read_text(encoding="utf-8"))
    return [{"id": f"docs-{i:02d}", "question": q, "files": files} for i, (q, files) in enumerate(spec, start=1)]


def _gold(question: dict, doc) -> bool:
    source = Path(str(doc.metadata.get("source", "")))
    if "files" in question:
        return source.name in question["files"]
    pages = doc.metadata.get("pages")
    pages = pages if pages is not None else [doc.metadata.get("page")]
    return any((source.stem, p) in {tuple(g) for g in question["pages"]} for p in pages if p is not None)


def _resource(corpus: str):
    from rag import KnowledgeBase

    store, collection = STORES["fb" if corpus.startswith("fb-") and corpus != "fb-answers" else corpus]
    if not (store / "kb" / collection).exists():
        raise SystemExit(f"{corpus}: no knowledge base {collection!r} under {store} (copy the built store there)")
    resource = KnowledgeBase(collection, str(store)).as_resource()
    for key, value in ROUTER.items():   # --router KEY=JSON: an attribute of the knowledge base's router
        if resource.router is not None:
            setattr(resource.router, key, value)
    return resource


def run_corpus(corpus: str, settings: dict) -> dict:
    """Retrieve every question of `corpus` with `settings` and score it."""
    from rag.compose.retrieve import retrieve
    from rag.evaluation.financebench_run import cap_context, ranked_documents
    from rag.indexing.loaders import path_text
    from rag.retrieval.budget import CharTokenCounter

    resource = _resource(corpus)
    questions = _questions(corpus)
    fb = corpus.startswith("fb-")
    rows, seconds, stage_ms = [], [], []
    for q in questions:
        extra = dict(settings)
        if fb:
            extra = {"max_tokens": BUDGET, "token_counter": CharTokenCounter(), **extra}
        if corpus == "fb-single":
            extra["filter"] = {"source": path_text(FB_DATA.resolve() / "pdfs" / f"{q['doc']}.pdf")}
        started = time.perf_counter()
        result = retrieve(q["question"], resource, **extra)
        seconds.append(time.perf_counter() - started)
        stage_ms.append(1000 * result.timings.get("evidence", 0.0))
        context = cap_context(result.context, budget=BUDGET) if fb else result.context
        ranked = [_gold(q, d) for d in ranked_documents(result, limit=RANKED)]
        first = next((i for i, g in enumerate(ranked) if g), None)
        rows.append({"id": q["id"], "question": q["question"], "hit": any(_gold(q, d) for d in context),
                     "first": bool(context) and _gold(q, context[0]),
                     "rank": None if first is None else first + 1,
                     "context": [f"{Path(str(d.metadata.get('source', ''))).stem}:{d.metadata.get('page')}"
                                 for d in context[:8]]})
    n = len(rows) or 1
    return {"corpus": corpus, "questions": len(rows), "context_hit": sum(r["hit"] for r in rows) / n,
            "gold_first": sum(r["first"] for r in rows) / n,
            "mrr": sum(1 / r["rank"] for r in rows if r["rank"]) / n,
            "median_ms": statistics.median(seconds) * 1000 if seconds else 0.0,
            "aggregate_ms": statistics.median(stage_ms) if stage_ms else 0.0, "rows": rows}


def _value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", default=",".join(CORPORA), help="comma-separated (default: %(default)s)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                        help="a RetrievalSettings field for every question (repeatable)")
    parser.add_argument("--router", action="append", default=[], metavar="KEY=JSON",
                        help="an attribute of the knowledge base's router (an experiment; repeatable)")
    parser.add_argument("--dump", default=None, help="write every question's outcome to this JSON file")
    parser.add_argument("--compare", default=None, help="a --dump of another run: list the questions that differ")
    args = parser.parse_args(argv)
    settings = {}
    for item in args.set:
        key, _, value = item.partition("=")
        settings[key] = _value(value)
    for item in args.router:
        key, _, value = item.partition("=")
        ROUTER[key] = _value(value)
    old = json.loads(Path(args.compare).read_text(encoding="utf-8")) if args.compare else {}
    results = []
    for corpus in args.corpora.split(","):
        res = run_corpus(corpus, settings)
        results.append(res)
        print(f"{corpus:10s} n={res['questions']:3d}  context hit {res['context_hit']:6.1%}  gold first "
              f"{res['gold_first']:6.1%}  MRR {res['mrr']:.3f}  {res['median_ms']:.0f} ms/q (evidence stage "
              f"{res['aggregate_ms']:.1f} ms)  (load "
              f"{os.getloadavg()[0]:.1f})", flush=True)
        before = {r["id"]: r for r in old.get(corpus, {}).get("rows", [])}
        for row in res["rows"]:
            was = before.get(row["id"])
            if was is not None and was["hit"] != row["hit"]:
                print(f"    {'WON ' if row['hit'] else 'LOST'} {row['id']}: {row['question'][:90]}", flush=True)
    if args.dump:
        Path(args.dump).write_text(json.dumps({"settings": settings, **{r["corpus"]: r for r in results}},
                                              indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
