"""Answer quality of the default chain on the corpora below: right answers, refusals, and the trade-off curve.

Corpora (questions and gold answers committed in `bench/answer_corpora/`):

- `financebench`: the FinanceBench development questions whose gold number is quotable
  (`bench/answer_questions.json`, see `bench/answer_questions.py`) plus real FinanceBench questions
  about companies whose filings are not in the store (right answer: "I don't know"); one knowledge
  base holding the filings the answerable questions need;
- `diffutils`: the GNU diffutils manual from Debian's `diffutils-doc` package;
- `git`: 32 git manual pages from Debian's `git-doc` package (many documents of one shape);
- `requests`: the Requests documentation from Debian's `python-requests-doc` package (a Sphinx
  user guide and API reference), a check of the rules designed on diffutils and git;
- `sqlite` (held out): 46 pages of the SQLite documentation from Debian's `sqlite3-doc` package,
  questions written and committed before the answerer was first run on them and asked once: a figure
  no rule was designed on (its store builds in under a minute, so it is in the default list);
- `docutils` (a second held-out corpus; not in the default list, asked with `--corpora docutils`): 40 pages of the
  Docutils 0.19 documentation from Debian's `docutils-doc` package (pages made by Docutils' own HTML
  writer), questions written and committed before its store was built or any question asked
  (`--corpora docutils`);
- `werkzeug` (a third held-out corpus; not in the default list, asked with `--corpora werkzeug`): 34 pages of the
  Werkzeug 2.2 documentation from Debian's `python-werkzeug-doc` package (a Sphinx API reference,
  deployment and middleware pages), questions written and committed before its store was built or
  any question asked (`--corpora werkzeug`);
- `postgresql` (a fourth held-out corpus; not in the default list, asked with `--corpora postgresql`): 40 pages of the
  PostgreSQL 15 documentation from Debian's `postgresql-doc-15` package (DocBook pages: server
  configuration, client authentication, backup, SQL commands, indexes, functions), questions written and
  committed before its store was built or any question asked (`--corpora postgresql`);
- `bash` (a fifth held-out corpus; not in the default list, asked with `--corpora bash`): the Bash 5.2
  documentation from Debian's `bash-doc` package, its two HTML pages (the reference manual as one
  Texinfo page, the man page converted by man2html), questions written and committed before its store
  was built or any question asked (`--corpora bash`);
- `flask` (a sixth held-out corpus; not in the default list, asked with `--corpora flask`): 42 pages of the Flask
  2.2 documentation from Debian's `python-flask-doc` package (a Sphinx user guide: quickstart,
  tutorial, configuration, CLI, testing, errors, patterns), questions written and committed before its
  store was built or any question asked (`--corpora flask`);
- `sphinx` (a seventh held-out corpus; not in the default list, asked with `--corpora sphinx`): 44 pages of the
  Sphinx 5.3 documentation from Debian's `sphinx-doc` package (Sphinx's own user guide: configuration,
  builders, reStructuredText, extensions, the command-line tools, tutorial), questions written and
  committed before its store was built or any question asked (`--corpora sphinx`);
- `pytest` (an eighth held-out corpus; not in the default list, asked with `--corpora pytest`): 44 pages of the
  pytest 7.2 documentation from Debian's `python-pytest-doc` package (how-to guides: fixtures, parametrize,
  marks, skipping, monkeypatch, capture, logging, warnings; the reference of options, flags and
  environment variables), questions written and committed before its store was built or any question
  asked (`--corpora pytest`);
- `django` (a ninth held-out corpus; not in the default list, asked with `--corpora django`): 46 pages of the
  Django 3.2 documentation from Debian's `python-django-doc` package (settings and django-admin
  references, sessions, cache, auth, models, queries, forms, templates, i18n, deployment, security,
  testing, migrations, logging), questions written and committed before its store was built or any
  question asked (`--corpora django`);
- `jinja` (a tenth held-out corpus; not in the default list, asked with `--corpora jinja`): two projects in one
  knowledge base, 10 pages of the Jinja 3.1 documentation (Debian's `python-jinja2-doc`) and 20 of the
  Click 8.1 documentation (`python-click-doc`); the two api.html pages are copied under the names the
  spec's `copy_as` gives; questions written and committed before its store was built or any question
  asked (`--corpora jinja`);
- `apache` (an eleventh held-out corpus; not in the default list, asked with `--corpora apache`): 46 pages of the
  Apache HTTP Server 2.4 manual from Debian's `apache2-doc` package (module references: core, the MPMs,
  mod_rewrite, mod_ssl, mod_proxy, ...; guides: rewrite flags, virtual hosts, SSL, .htaccess, auth, CGI,
  SSI, logs, caching, security, performance), questions written and committed before its store was
  built or any question asked;
- `sqlalchemy` (a twelfth held-out corpus; not in the default list, asked with `--corpora sqlalchemy`): 44
  pages of the SQLAlchemy 1.4 documentation from Debian's `python-sqlalchemy-doc` package (engines, pooling,
  schema, types, sessions, relationships, loading, the postgresql / sqlite / mysql dialects, FAQ; the ORM's
  exceptions.html is copied as orm_exceptions.html), questions written and committed before its store was
  built or any question asked;
- `financebench_check` (not in the default list): 18 number questions about other pages of the
  development filings (`bench/answer_corpora/financebench_check.json`, written before the number
  answers were changed), asked against the 54 filings in one store, the knowledge base that
  `python bench/financebench.py --configs default` builds (`--corpus-cache financebench_check=DIR`,
  DIR/store being that knowledge base; it is read, never indexed here).

Every question is asked through the public door, `rag ask QUESTION --json` (run in this process
through `rag.cli.main`, the same code as the command): default retrieval, the answerer `RAG_LLM` chooses
(`RAG_LLM=extractive` for the offline fallback). The returned context is cached (`--reuse` answers the
cached contexts again: answerer work only), and the answerer is re-run on it, timed. Per corpus the
report gives the context hit (a gold source in the context), and what reaches the user:

- asserted right: the answer is not a refusal and states a gold string (a number as a whole number);
- asserted wrong: not a refusal, and no gold string stated (of all questions: a not-in-corpus question
  answered is wrong);
- gold in the passage shown: a refusal ("not sure") whose closest passage (`Answer.passage`) states a gold string;
- gold reaches the user: asserted right plus gold in the passage;
- not-in-corpus refused.

    apt-get install diffutils-doc git-doc python-requests-doc sqlite3-doc docutils-doc python-werkzeug-doc # doc corpora
    apt-get install postgresql-doc-15 bash-doc python-flask-doc sphinx-doc python-pytest-doc  # held out
    apt-get install python-django-doc                 # held out too (--corpora django)
    apt-get install python-jinja2-doc python-click-doc  # held out (--corpora jinja)
    apt-get install apache2-doc                       # held out (--corpora apache)
    apt-get install python-sqlalchemy-doc             # held out (--corpora sqlalchemy)
    python bench/answers.py                           # all corpora; --corpora git,diffutils for some
    python bench/answers.py --reuse                   # re-answer the cached contexts (answerer work only)
    python bench/answers.py --cache /work/cache/answers_main --corpus-cache financebench=/work/cache/answers
    python bench/answers.py --corpora financebench_check --corpus-cache financebench_check=DIR
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from answer_questions import DEFAULT_DATA, contains_number, selected_questions

CORPORA = ROOT / "bench/answer_corpora"
DIFFUTILS_DIR = Path("/usr/share/doc/diffutils")
GIT_DIR = Path("/usr/share/doc/git-doc")
# diffutils pages that only redirect ("The node you are looking for is at ..."), the index and the licence
_DIFFUTILS_SKIP = {"Index.html", "index.html", "Copying-This-Manual.html"}


def rag_cli(*argv: str) -> str:
    """Run `rag ...` in this process (the same code as the command); its stdout."""
    from rag.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    if code:
        raise SystemExit(f"rag {' '.join(argv[:1])} failed with exit code {code}")
    return out.getvalue()


# ---------------------------------------------------------------------------------------------- corpora
def _docs_corpus(name: str, cache: Path) -> tuple[list[str], list[dict]]:
    spec = json.loads((CORPORA / f"{name}.json").read_text(encoding="utf-8"))
    folder = cache / "corpora" / name
    folder.mkdir(parents=True, exist_ok=True)
    if name == "diffutils":
        pages = [p for p in sorted(DIFFUTILS_DIR.glob("*.html")) if p.name not in _DIFFUTILS_SKIP
                 and "The node you are looking for" not in p.read_text(encoding="utf-8", errors="replace")]
    elif "dir" in spec:   # pages under a folder ("user/quickstart.html"), copied under their file names
        pages = [Path(spec["dir"]) / f for f in spec["files"]]
    else:
        pages = [GIT_DIR / f"{stem}.html" for stem in spec["files"]]
    missing = [str(p) for p in pages if not p.exists()]
    if not pages or missing:
        package = spec.get("package") or {"requests": "python-requests-doc"}.get(name, f"{name}-doc")
        raise SystemExit(f"{name}: pages missing ({missing[:3] or 'none found'}); apt-get install {package}")
    # copied flat under their file names, or the name "copy_as" gives (two projects' api.html)
    renamed = {Path(spec.get("dir", "")) / f: copied for f, copied in spec.get("copy_as", {}).items()}
    targets = [folder / renamed.get(page, page.name) for page in pages]
    if len({t.name for t in targets}) < len(targets):
        raise SystemExit(f"{name}: two pages would be copied under one file name; name one in 'copy_as'")
    for page, target in zip(pages, targets):
        if not target.exists():
            shutil.copyfile(page, target)
    questions = [{**q, "id": f"{name}-{i:02d}"} for i, q in enumerate(spec["questions"], start=1)]
    # comparisons: right when a gold string of each side is stated; reported apart from the other questions
    questions += [{**q, "id": f"{name}-c{i:02d}", "comparison": True, "answers": [g for side in q["sides"] for g in side]}
                  for i, q in enumerate(spec.get("comparisons", []), start=1)]
    return [str(t) for t in targets], questions


def _check_corpus(data: str) -> tuple[list[str], list[dict]]:
    """The check set: number questions on other pages of the development filings (a prebuilt store)."""
    spec = json.loads((CORPORA / "financebench_check.json").read_text(encoding="utf-8"))
    questions = [{"id": f"check-{i:02d}", "question": q["question"], "answers": q["answers"], "number": True,
                  "pages": [(q["doc"], q["page"])], "kind": q.get("kind", "")}
                 for i, q in enumerate(spec["questions"], start=1)]
    return [], questions   # no files: the store is built by bench/financebench.py, not here


def _financebench_corpus(data: str) -> tuple[list[str], list[dict]]:
    spec = json.loads((CORPORA / "financebench.json").read_text(encoding="utf-8"))
    rows = {}
    with open(Path(data) / "questions.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            rows[row["financebench_id"]] = row
    questions = []
    for row, number in selected_questions(data):
        pages = sorted({(e.get("doc_name", row["doc_name"]), int(e["evidence_page_num"])) for e in row["evidence"]})
        questions.append({"id": row["financebench_id"], "question": row["question"], "answers": [number],
                          "number": True, "pages": pages})
    for fid in spec["not_in_corpus"]:
        questions.append({"id": fid, "question": rows[fid]["question"], "answers": [], "pages": [],
                          "company_filing": rows[fid]["doc_name"]})
    pdfs = sorted({str(Path(data) / "pdfs" / f"{d}.pdf") for q in questions for d, _ in q["pages"]})
    return pdfs, questions


# ---------------------------------------------------------------------------------------------- judging
def states(answer: str, gold: str, *, number: bool = False) -> bool:
    """Whether the answer states the gold string: a number as a whole number, an option as a whole word."""
    if number:
        return contains_number(answer, gold)
    left = "" if gold[:1] in ".~" else r"(?<![\w-])"   # an extension may follow a name: "f.rej"
    return re.search(left + re.escape(gold.lower()) + r"(?![\w-])", answer.lower()) is not None


def right(question: dict, answer: str) -> bool:
    if question.get("sides"):   # a comparison: both sides stated
        return all(any(states(answer, g) for g in side) for side in question["sides"])
    return any(states(answer, g, number=question.get("number", False)) for g in question["answers"])


def context_hit(question: dict, context: list[dict]) -> bool:
    if question.get("pages"):
        found = {(Path(str(d["metadata"].get("source", ""))).stem, d["metadata"].get("page")) for d in context}
        return any((doc, page) in found for doc, page in question["pages"])   # both zero-based
    names = {Path(str(d["metadata"].get("source", ""))).name for d in context}
    return any(s in names for s in question.get("sources", []))


# ---------------------------------------------------------------------------------------------- running
def ask_all(name: str, files: list[str], questions: list[dict], cache: Path, *, reuse: bool,
            backend: str | None = None) -> list[dict]:
    """Each question through `rag ask --json` (cached per corpus; `reuse` reads the cache); `backend`: the
    `--backend` block of `rag index` and `rag ask` (the chunks in another store)."""
    store = str(cache / "store")
    where = ("--backend", backend) if backend else ()
    collection = "financebench" if name == "financebench_check" else name
    cached_file = cache / f"asked_{name}.json"
    cached = json.loads(cached_file.read_text(encoding="utf-8")) if reuse and cached_file.exists() else {}
    if not files and not (cache / "store").exists():
        raise SystemExit(f"{name}: no store at {store}; build the 54 filings' knowledge base with "
                         "`python bench/financebench.py --configs default` and pass --corpus-cache "
                         f"{name}=DIR with DIR/store that knowledge base")
    if files and not all(q["question"] in cached for q in questions):
        started = time.perf_counter()
        rag_cli("index", *files, "--store", store, "--collection", name, *where)
        print(f"{name}: indexed {len(files)} files in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    out = []
    for q in questions:
        if q["question"] not in cached:
            started = time.perf_counter()
            asked = json.loads(rag_cli("ask", q["question"], "--store", store, "--collection", collection, "--json",
                                         *where))
            cached[q["question"]] = {"answer": asked["answer"], "refused": asked.get("refused"),
                                     "confidence": asked.get("confidence"), "passage": asked.get("passage"),
                                     "context": asked["context"], "seconds": time.perf_counter() - started}
        out.append(cached[q["question"]])
    # written whole, then renamed: a second run reading the same cache never sees half a file
    partial = cached_file.with_name(f"{cached_file.name}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(cached, ensure_ascii=False), encoding="utf-8")
    os.replace(partial, cached_file)
    return out


def judge(name: str, questions: list[dict], asked: list[dict], *, reuse: bool = False) -> dict:
    """Score what the user sees: the answer (asserted, or a refusal) and, beside a refusal, the closest passage.

    Scored from the fields `rag ask --json` printed (`answer`, `refused`, `confidence`, `passage`). The
    configured answerer (`RAG_LLM`) is also re-run on each returned context, for its time and as a check
    that it gives the door's answer (`rerun_differs` counts where it did not). With `reuse`, or for an
    entry cached before the door's fields were kept, the re-run answer is scored instead (answerer work
    only; `scored_from` says which)."""
    from langchain_core.documents import Document

    from rag.generation.factory import default_answerer

    answerer = default_answerer()
    rows, seconds, cpu = [], [], []
    from_door_count = differs = 0
    for q, a in zip(questions, asked):
        context = [Document(page_content=d["page_content"], metadata=d["metadata"]) for d in a["context"]]
        answerer.answer("warm-up", context[:1]) if not seconds else None
        started, cpu_started = time.perf_counter(), time.process_time()
        rerun = answerer.answer(q["question"], context)
        seconds.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
        from_door = not reuse and a.get("refused") is not None
        from_door_count += from_door
        differs += from_door and (str(rerun) != a["answer"] or bool(rerun.refused) != bool(a["refused"]))
        text, refused = (a["answer"], bool(a["refused"])) if from_door else (str(rerun), bool(rerun.refused))
        confidence = a.get("confidence") if from_door else rerun.confidence
        shown = ((a.get("passage") if from_door else rerun.passage) or {}).get("text", "")
        rows.append({"id": q["id"], "question": q["question"], "gold": q["answers"], "in_corpus": bool(q["answers"]),
                     "hit": context_hit(q, a["context"]) if q["answers"] else None, "answer": text,
                     "refused": refused, "confidence": round(confidence or 0.0, 4), "passage": shown,
                     "right": bool(q["answers"]) and not refused and right(q, text),
                     "gold_in_passage": bool(q["answers"]) and refused and bool(shown) and right(q, shown),
                     "comparison": bool(q.get("comparison")),
                     "sides_stated": sum(any(states(text, g) for g in side) for side in q.get("sides", []))})
    scored_from = ("rag ask --json" if from_door_count == len(rows) else
                   "re-answered cached contexts" if not from_door_count else
                   f"rag ask --json ({from_door_count}), re-answered ({len(rows) - from_door_count})")
    return {"corpus": name, "rows": rows, "answerer_seconds_median": statistics.median(seconds),
            "answerer_cpu_seconds_median": statistics.median(cpu), "load_average": os.getloadavg()[0],
            "ask_seconds_median": statistics.median(a["seconds"] for a in asked),
            "scored_from": scored_from, "rerun_differs": differs}


def summary(result: dict) -> dict:
    """Counts for one corpus: what the user is told (asserted right / wrong), the gold in the passage shown beside
    a refusal, and not-in-corpus questions refused."""
    rows = [r for r in result["rows"] if not r.get("comparison")]   # comparisons: `comparison_markdown`
    answerable = [r for r in rows if r["in_corpus"]]
    absent = [r for r in rows if not r["in_corpus"]]
    right_ = sum(r["right"] for r in answerable)
    in_passage = sum(r.get("gold_in_passage", False) for r in answerable)
    return {"questions": len(rows), "answerable": len(answerable), "not_in_corpus": len(absent),
            "context_hit": sum(bool(r["hit"]) for r in answerable), "asserted_right": right_,
            "asserted_wrong": sum(not r["refused"] and not r["right"] for r in rows),
            "gold_in_passage": in_passage, "gold_reaches_user": right_ + in_passage,
            "refused_absent": sum(r["refused"] for r in absent),
            "refused_answerable": sum(r["refused"] for r in answerable)}


def _pct(a: int, b: int) -> str:
    return f"{a}/{b} ({a / b:.0%})" if b else "-"


def markdown(results: list[dict]) -> str:
    lines = [("| corpus | questions (answerable + not in corpus) | context hit | asserted right | asserted wrong "
              "(of all) | gold in the passage shown | gold reaches the user | not-in-corpus refused "
              "| answerable refused | answerer time (median) | load | scored from |"),
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for res in results:
        s = summary(res)
        lines.append(f"| {res['corpus']} | {s['questions']} ({s['answerable']} + {s['not_in_corpus']}) "
                     f"| {_pct(s['context_hit'], s['answerable'])} | {_pct(s['asserted_right'], s['answerable'])} "
                     f"| {_pct(s['asserted_wrong'], s['questions'])} | {_pct(s['gold_in_passage'], s['answerable'])} "
                     f"| {_pct(s['gold_reaches_user'], s['answerable'])} "
                     f"| {_pct(s['refused_absent'], s['not_in_corpus'])} "
                     f"| {_pct(s['refused_answerable'], s['answerable'])} "
                     f"| {res['answerer_seconds_median'] * 1000:.0f} ms | {res.get('load_average', float('nan')):.1f} "
                     f"| {res.get('scored_from', '-')}"
                     + (f"; the re-run differs on {res['rerun_differs']}" if res.get("rerun_differs") else "") + " |")
    return "\n".join(lines + comparison_markdown(results))


def comparison_markdown(results: list[dict]) -> list[str]:
    """The comparison questions apart: both sides stated (right), one side only, refused."""
    lines = ["", "Comparisons (\"What is the difference between X and Y?\"; right = a gold string of each side stated):", "",
             "| corpus | comparisons | context hit | both sides stated | one side only | neither | refused |",
             "|---|---|---|---|---|---|---|"]
    for res in results:
        rows = [r for r in res["rows"] if r.get("comparison")]
        if not rows:
            continue
        n, both = len(rows), sum(not r["refused"] and r["right"] for r in rows)
        one = sum(not r["refused"] and r["sides_stated"] == 1 for r in rows)
        lines.append(f"| {res['corpus']} | {n} | {_pct(sum(bool(r['hit']) for r in rows), n)} | {_pct(both, n)} "
                     f"| {_pct(one, n)} | {_pct(sum(not r['refused'] and r['sides_stated'] == 0 for r in rows), n)} "
                     f"| {_pct(sum(r['refused'] for r in rows), n)} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=DEFAULT_DATA, help="FinanceBench data (default: %(default)s)")
    parser.add_argument("--corpora", default="financebench,diffutils,git,requests,sqlite")
    parser.add_argument("--cache", default=os.environ.get("RAG_BENCH_CACHE", "/work/cache/answers"),
                        help="where the stores, corpus copies and asked contexts go (default: %(default)s)")
    parser.add_argument("--corpus-cache", action="append", default=[], metavar="NAME=DIR",
                        help="another cache for one corpus (e.g. financebench=/work/cache/answers); repeatable")
    parser.add_argument("--backend", metavar="JSON", default=None,
                        help="keep the chunks in another store, as `rag index --backend` (e.g. "
                             "'{\"kind\": \"pgvector\", \"url_env\": \"RAG_PG_URL\"}'); default: the embedded one")
    parser.add_argument("--reuse", action="store_true", help="answer the cached contexts again (no retrieval)")
    parser.add_argument("--out", default=str(ROOT / "bench/results/answers"),
                        help="writes OUT.md and OUT.json (default: %(default)s)")
    args = parser.parse_args(argv)
    caches = {name: Path(folder) for name, _, folder in (c.partition("=") for c in args.corpus_cache)}
    results = []
    for name in args.corpora.split(","):
        cache = caches.get(name, Path(args.cache))
        cache.mkdir(parents=True, exist_ok=True)
        if name in ("financebench", "financebench_check"):
            files, questions = (_financebench_corpus if name == "financebench" else _check_corpus)(args.data)
        else:
            files, questions = _docs_corpus(name, cache)
        asked = ask_all(name, files, questions, cache, reuse=args.reuse, backend=args.backend)
        res = judge(name, questions, asked, reuse=args.reuse)
        results.append(res)
        for r in res["rows"]:
            mark = ("hit " if r["hit"] else "miss") if r["in_corpus"] else "none"
            mark += " cmp" if r.get("comparison") else ""
            verdict = ("refused+" if r["gold_in_passage"] else "refused") if r["refused"] else (
                "RIGHT" if r["right"] else "wrong")
            print(f"{name:12s} {mark} {verdict:8s} {r['confidence']:.2f} {r['question'][:60]}"
                  f"  ->  {r['answer'][:90]}", file=sys.stderr)
    table = markdown(results)
    print(table)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out + ".md").write_text(table + "\n", encoding="utf-8")
    Path(args.out + ".json").write_text(json.dumps(results, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
