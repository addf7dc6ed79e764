"""Answer accuracy of the offline answerer on FinanceBench questions with a number for an answer.

The questions are those of `bench/answer_questions.json` (see `bench/answer_questions.py`): the
gold answer holds a number (two or more digits, not a year) found verbatim in the evidence. An
answer is right when it contains that number verbatim. Two set-ups, on one knowledge base holding
only the filings these questions need (built with `rag index`, cached under --cache):

- `rag ask`: the library's default path, run through `rag.cli.main(["ask", ..., "--json"])`, so
  it is exactly what the command does (default retrieval and k, the default answerer);
- baseline: the knowledge base's dense retriever, top 16, answered by the answerer as it was
  before issue 12 (its source is taken from git, `git show BASELINE_COMMIT:rag/generation/extractive.py`;
  it is not part of the library).

Both answerers are also run on the other's context, which separates the answerer from retrieval.

    python bench/answers.py                    # RAG_FINANCEBENCH_DIR or ../shared/data/financebench
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from answer_questions import DEFAULT_DATA, contains_number, selected_questions

BASELINE_COMMIT = "b0ff682"   # main when issue 12 was filed: the answerer before it
COLLECTION = "fb_answers"
BASELINE_K = 16


def old_answerer(cache: Path):
    """The pre-issue-12 ExtractiveAnswerer, loaded from git into the cache (not the library)."""
    path = cache / f"extractive_{BASELINE_COMMIT}.py"
    if not path.exists():
        source = subprocess.run(["git", "show", f"{BASELINE_COMMIT}:rag/generation/extractive.py"], cwd=ROOT,
                                check=True, capture_output=True, text=True).stdout
        # the modules it imports from have moved since (rag.core.text is rag.base.text now)
        path.write_text(source.replace("from rag.core.text import", "from rag.base.text import"), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("_baseline_extractive", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ExtractiveAnswerer(embedding="default")   # as `default_llm()` built it


def rag_cli(*argv: str) -> str:
    """Run `rag ...` in this process (the same code as the command); its stdout."""
    from rag.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    if code:
        raise SystemExit(f"rag {' '.join(argv[:1])} failed with exit code {code}")
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--cache", default=os.environ.get("RAG_BENCH_CACHE", "/work/cache/answers"),
                        help="where the knowledge base and the baseline's source go (default: %(default)s)")
    parser.add_argument("--out", default=None, help="write the per-question results as JSON here")
    args = parser.parse_args(argv)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    store = str(cache / "store")
    questions = selected_questions(args.data)
    pdfs = sorted({str(Path(args.data) / "pdfs" / f"{q['doc_name']}.pdf") for q, _ in questions})

    started = time.perf_counter()
    rag_cli("index", *pdfs, "--store", store, "--collection", COLLECTION)
    print(f"indexed {len(pdfs)} filings in {time.perf_counter() - started:.0f} s (cached in {store})", file=sys.stderr)

    from langchain_core.documents import Document

    from rag.core.knowledge_base import KnowledgeBase
    from rag.generation.extractive import ExtractiveAnswerer


    baseline = old_answerer(cache)
    new = ExtractiveAnswerer(embedding="default")
    dense = KnowledgeBase.open(COLLECTION, store).as_retriever(k=BASELINE_K)
    rows = []
    for question, number in questions:
        text = question["question"]
        asked = json.loads(rag_cli("ask", text, "--store", store, "--collection", COLLECTION, "--json"))
        ask_context = [Document(**d) for d in asked["context"]]
        dense_context = dense.invoke(text)
        answers = {"rag ask": asked["answer"],
                   "rag ask context, old answerer": baseline.invoke({"question": text, "context": ask_context}),
                   f"dense top-{BASELINE_K}, old answerer": baseline.invoke({"question": text, "context": dense_context}),
                   f"dense top-{BASELINE_K}, new answerer": new.invoke({"question": text, "context": dense_context})}
        rows.append({"id": question["financebench_id"], "number": number, "question": text,
                     "right": {name: contains_number(a, number) for name, a in answers.items()}, "answers": answers})
        marks = " ".join("x" if ok else "." for ok in rows[-1]["right"].values())
        print(f"{marks}  {question['financebench_id']}  {number:>8}  {text[:60]}", file=sys.stderr)

    n = len(rows)
    print(f"\nanswer contains the gold number, {n} FinanceBench questions ({len(pdfs)} filings, one knowledge base):")
    for name in rows[0]["right"]:
        hits = sum(r["right"][name] for r in rows)
        print(f"  {name:36s} {hits:2d}/{n} = {hits / n:.0%}")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
