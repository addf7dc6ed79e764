"""Routing on a generic documentation set: does routing ever lose a question that no routing finds?

The corpus is every `git-*.html` page of Debian's `git-doc` package (160 man pages of one shape,
`apt-get install git-doc`): page names such as `git-show`, `git-http-fetch` or `git-patch-id` are
also ordinary words ("Show ...", "over HTTP", "object ID") of questions about other pages. The
questions (`bench/routing_generic_questions.json`, with the pages that answer them) are of three
kinds: `trap` (another word of the question is written as a name and matches other pages' names),
`named` (the question names the page that answers it), `plain` (no word written as a name).

Indexes the pages with `rag index`'s defaults (once; `--store` keeps the knowledge base), then asks
every question through `rag.retrieve` with the default settings, once without routing
(`kb.as_resource(routing="off")`) and once with the default (`kb.as_resource()`, routing "auto":
on for 8 documents or more), and prints the context hit (a gold page in the context), gold page
first, and every question routing on loses or wins against off.

    python bench/routing_generic.py [--store DIR] [--out bench/results/routing_generic]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag import KnowledgeBase, retrieve  # noqa: E402

GIT_DIR = Path("/usr/share/doc/git-doc")
QUESTIONS = ROOT / "bench/routing_generic_questions.json"


def knowledge_base(store: str) -> KnowledgeBase:
    """The git man pages' knowledge base in `store` (indexed on first use)."""
    pages = sorted(GIT_DIR.glob("git-*.html"))
    if not pages:
        raise SystemExit(f"no git-*.html in {GIT_DIR}: apt-get install git-doc")
    kb = KnowledgeBase("gitman", store)
    if len(kb.list_documents()) < len(pages):
        folder = Path(store) / "pages"
        folder.mkdir(parents=True, exist_ok=True)
        for page in pages:
            shutil.copyfile(page, folder / page.name)
        started = time.perf_counter()
        report = kb.add_documents([str(folder)], include="*.html")
        print(f"indexed: {report.summary()} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return kb


def ask(resource, questions: list[dict], names: dict) -> list[dict]:
    """Per question: the context's pages in order and the route taken (page names)."""
    out = []
    for q in questions:
        result = retrieve(q["question"], resource)
        pages = [Path(str(d.metadata.get("source", ""))).name for d in result.context]
        route = result.extras.get("route", {})
        out.append({"pages": pages, "route": [names.get(v, str(v)) for v in route.get("values", [])], "hit": any(p in q["sources"] for p in pages),
                    "first": bool(pages) and pages[0] in q["sources"]})
    return out


def table(questions: list[dict], runs: dict[str, list[dict]]) -> str:
    kinds = ["trap", "named", "plain"]
    lines = ["| routing | " + " | ".join(f"{k} hit" for k in kinds) + " | all: context hit | gold page first | "
             "routed | lost vs off | won vs off |", "|---" * (len(kinds) + 6) + "|"]
    off = runs["off"]
    for label, rows in runs.items():
        cells = []
        for kind in kinds:
            idx = [i for i, q in enumerate(questions) if q["kind"] == kind]
            cells.append(f"{sum(rows[i]['hit'] for i in idx)}/{len(idx)}")
        lost = sum(o["hit"] and not r["hit"] for o, r in zip(off, rows, strict=True))
        won = sum(r["hit"] and not o["hit"] for o, r in zip(off, rows, strict=True))
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {sum(r['hit'] for r in rows)}/{len(rows)} | "
                     f"{sum(r['first'] for r in rows)}/{len(rows)} | {sum(bool(r['route']) for r in rows)} | "
                     f"{lost} | {won} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=None, help="knowledge base directory (default: a temporary one)")
    parser.add_argument("--out", default=None, help="write OUT.md and OUT.json")
    args = parser.parse_args(argv)
    kb = knowledge_base(args.store or tempfile.mkdtemp(prefix="rag-routing-generic-"))
    questions = json.loads(QUESTIONS.read_text(encoding="utf-8"))["questions"]
    names = {r.doc_id: Path(str(r.source)).name for r in kb.list_documents()}
    runs = {"off": ask(kb.as_resource(routing="off"), questions, names),
            "default (auto: on)": ask(kb.as_resource(), questions, names)}
    report = [f"{len(questions)} questions, {len(kb.list_documents())} pages\n", table(questions, runs), ""]
    for i, q in enumerate(questions):
        off, on = runs["off"][i], runs["default (auto: on)"][i]
        if off["hit"] != on["hit"] or on["route"]:
            verdict = "LOST" if off["hit"] and not on["hit"] else "won" if on["hit"] and not off["hit"] else "same"
            report.append(f"- {verdict}: {q['question']!r} ({', '.join(q['sources'])}); route "
                          f"{on['route'] or 'none'}")
    text = "\n".join(report)
    print(text)
    if args.out:
        Path(args.out + ".md").write_text(text + "\n", encoding="utf-8")
        Path(args.out + ".json").write_text(json.dumps({"questions": questions, "runs": runs}, indent=1) + "\n",
                                            encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
