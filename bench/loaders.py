"""What the loaders cost and what they keep: web-page boilerplate, cost bounds, PDF pages/s with and without tables.

Three parts, each run on its own (`python bench/loaders.py PART ...`):

- `html SET_NAME=DIR[:GLOB,...] ...`: for each documentation set, every page read by `load_file` and
  chunked by the default `TokenChunker`; printed: chunks, the share of boilerplate chunks (half or
  more of their lines are lines found on 20% or more of the set's pages: navigation, sidebars,
  footers repeat on every page), chunks and section names holding a permalink mark "¶", sections
  named after a `#` comment of a code block; then with `--questions FILE` each set is indexed in a
  `KnowledgeBase` (its defaults: MiniLM, AutoContext, hybrid search) and every question retrieved
  as `rag ask` does (`--budget` tokens of context); a hit when the context holds a chunk of the
  gold page containing the evidence phrase.
- `limits DIR`: time (imports excluded) and peak memory (a child process each) of the inflating PDF
  (`rag.testing.hostile_files.inflating_pdf`, 40,000 rows, ~3.6 KB) read by `load_file`, and of a
  5 MB and a 50 MB text file (distinct paragraphs) indexed by `rag index --embedding fake`.
- `chroma DIR [--chunks N] [--vectors CACHE] [--hnsw JSON]`: CPU seconds of each 5,000-chunk write into one
  growing Chroma collection created as the library creates one (`rag.stores.chroma.NEW_COLLECTION`; `--hnsw`
  overrides its settings, e.g. Chroma's own defaults: '{"hnsw:construction_ef": 100, "hnsw:search_ef": 100}');
  why the writes of a large file grow faster than the file: see docs/indexing.md and docs/stores.md.
- `tables --files N [--modes none,pdfium,pdfplumber]`: `load_file` time (wall and CPU) on a sample
  of FinanceBench filings without tables (`tables=False`), with the default pypdfium2 table finder
  and with pdfplumber, in one process; the tables each finds, and the share of pdfplumber's table
  rows the pypdfium2 finder prints the same (see `bench/pdf_tables.py` for the full run).

Usage:
    python bench/loaders.py html sphinx=/usr/share/doc/sphinx-doc/html \
        postgresql=/usr/share/doc/postgresql-doc-15/html:ddl*.html,datatype*.html --questions bench/loaders_questions.json
    python bench/loaders.py limits /tmp/loaders-bench
    python bench/loaders.py chroma /tmp/loaders-bench --chunks 45000 --vectors .rag/embeddings.sqlite
    python bench/loaders.py tables --files 4
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag.indexing.chunking import TokenChunker  # noqa: E402
from rag.indexing.loaders import load_file  # noqa: E402

_SKIP = re.compile(r"(^|/)(_modules|_static|_sources|_images|_downloads)/|(^|/)(genindex|search|py-modindex|changes)"
                   r"[^/]*\.html$")


def _pages(spec: str) -> tuple[str, Path, list[Path]]:
    name, _, rest = spec.partition("=")
    folder, _, globs = rest.partition(":")
    root = Path(folder)
    files = sorted({f for g in (globs.split(",") if globs else ["**/*.html"]) for f in root.glob(g)})
    return name, root, [f for f in files if not _SKIP.search(f.relative_to(root).as_posix())]


def _code_comments(raw: bytes) -> set[str]:
    from lxml import html

    tree = html.fromstring(raw)
    out = set()
    for pre in tree.iter("pre"):
        for line in pre.text_content().splitlines():
            if line.strip().startswith("#"):
                out.add(" ".join(line.strip().lstrip("#").split()))
    return out - {""}


def html_set(spec: str) -> dict:
    name, _, files = _pages(spec)
    chunker = TokenChunker()
    docs = {f: load_file(f) for f in files}
    lines_on = Counter()
    for doc in docs.values():
        lines_on.update({" ".join(line.split()) for line in doc[0].page_content.splitlines() if line.strip()})
    common = {line for line, n in lines_on.items() if n >= max(2, 0.2 * len(files))}
    chunks = chunker.split_documents([d for doc in docs.values() for d in doc])
    boiler = 0
    for chunk in chunks:
        lines = [" ".join(line.split()) for line in chunk.page_content.splitlines() if line.strip()]
        boiler += bool(lines) and sum(line in common for line in lines) >= len(lines) / 2
    comments = set().union(*(_code_comments(f.read_bytes()) for f in files))
    sections = [str(c.metadata.get("section") or "") for c in chunks]
    out = {"set": name, "pages": len(files), "chunks": len(chunks), "boilerplate_chunks": boiler,
           "boilerplate_share": round(boiler / max(len(chunks), 1), 4),
           "chunks_with_pilcrow": sum("¶" in c.page_content for c in chunks),
           "sections_with_pilcrow": sum("¶" in s for s in sections),
           "sections_from_code_comments": sum(s.split(" / ")[-1] in comments for s in sections if s)}
    print(json.dumps(out), flush=True)
    return out


def html_hits(spec: str, questions: list[list[str]], budget: int, store: Path) -> dict:
    from rag.compose.defaults import RECOMMENDED
    from rag.compose.knowledge_base import KnowledgeBase
    from rag.compose.retrieve import retrieve
    from rag.retrieval.budget import CharTokenCounter

    name, root, files = _pages(spec)
    kb = KnowledgeBase(name, store)
    start = time.perf_counter()
    kb.add_documents([str(f) for f in files])
    seconds = time.perf_counter() - start
    resource = kb.as_resource()
    hits = []
    for question, page, evidence in questions:
        result = retrieve(question, resource, **{**RECOMMENDED, "max_tokens": budget,
                                                 "token_counter": CharTokenCounter()})
        gold = str((root / page).resolve())
        want = " ".join(evidence.split()).lower()
        hits.append(any(str(Path(str(d.metadata.get("source", ""))).resolve()) == gold
                        and want in " ".join(d.page_content.split()).lower() for d in result.context))
    out = {"set": name, "questions": len(hits), "hits": sum(hits), "budget": budget, "index_seconds": round(seconds, 1)}
    print(json.dumps(out), flush=True)
    return out


def _child(setup: str, code: str, extra: str = "") -> tuple[float, float, float, dict]:
    """Wall and CPU seconds of `code` (after `setup`: imports) and peak resident memory (MB) of a child process,
    and the JSON object the expression `extra` gives after it (if any).

    CPU seconds (all threads of the process) are the steadier figure on a shared machine.
    """
    script = (f"import json, resource, sys, time\n{setup}\nstart, cpu = time.perf_counter(), time.process_time()\n"
              f"{code}\nseconds, cpu = time.perf_counter() - start, time.process_time() - cpu\n"
              f"print('EXTRA', json.dumps({extra or '{}'}))\n"
              "print(seconds, cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    lines = run.stdout.splitlines()
    seconds, cpu, peak = lines[-1].split()
    more = next((json.loads(line[6:]) for line in lines if line.startswith("EXTRA ")), {})
    return float(seconds), float(cpu), int(peak) / 1024, more


#: counts the wall time spent in Chroma's `Collection.add` (its work runs in chromadb's own Rust threads)
_TIME_ADDS = """
import chromadb.api.models.Collection as _c
_ADDS = {"add_calls": 0, "add_seconds": 0.0}
_add = _c.Collection.add
def _timed_add(self, *args, **kwargs):
    t = time.perf_counter()
    try:
        return _add(self, *args, **kwargs)
    finally:
        _ADDS["add_calls"] += 1
        _ADDS["add_seconds"] += time.perf_counter() - t
_c.Collection.add = _timed_add
"""


def _text_file(path: Path, size: int, seed: int) -> None:
    rng = random.Random(seed)
    words = [f"{a}{b}" for a in ("re", "con", "pro", "tra", "de", "in", "ex", "sub") for b in (
        "venue", "tract", "cess", "nsfer", "mand", "come", "port", "stance", "sign", "ject")]
    with path.open("w") as out:
        written = 0
        while written < size:
            paragraph = " ".join(rng.choice(words) for _ in range(rng.randint(40, 120))) + f" {written}.\n\n"
            out.write(paragraph)
            written += len(paragraph)


#: a stand-in embedding with the geometry of real text vectors: each text gets a vector of an embedding cache
#: (picked by a hash of the text) plus a little noise of its own, so the vector index sees realistic data
_REPLAY = """
import hashlib, sqlite3
import numpy as np
from langchain_core.embeddings import Embeddings
_rows = sqlite3.connect(VECTORS).execute("SELECT vector FROM embeddings WHERE dim = 384").fetchall()
_V = np.stack([np.frombuffer(r[0], dtype=np.float32) for r in _rows])
class Replay(Embeddings):
    model = "replay-of-real-vectors"
    def embed_documents(self, texts):
        out = []
        for text in texts:
            h = int.from_bytes(hashlib.blake2b(text.encode('utf-8', 'surrogatepass'), digest_size=8).digest(), 'big')
            v = _V[h % len(_V)] + np.random.default_rng(h).normal(0, 0.003, 384)
            out.append((v / np.linalg.norm(v)).tolist())
        return out
    def embed_query(self, text):
        return self.embed_documents([text])[0]
"""


def limits(folder: Path, sizes: tuple[int, ...] = (5, 50), vectors: str | None = None) -> dict:
    """The inflating PDF, then text files of `sizes` MB indexed by `rag index --embedding fake`, each in a child
    process; the time Chroma's `add` took in each (see `chroma` for why it grows faster than the rest). With
    `vectors` (an embedding cache file) the files are indexed by `rag.indexing.write_path.index_sources` (what
    `rag index` calls) with `_REPLAY`'s vectors instead of the fake's i.i.d. random ones."""
    folder.mkdir(parents=True, exist_ok=True)
    out: dict = {"load_average": os.getloadavg()[0], "vectors": vectors or "fake (i.i.d. random)"}
    seconds, cpu, peak, _ = _child(f"from rag.testing.hostile_files import inflating_pdf\nfrom rag.indexing.loaders "
                                   f"import load_file\nsize = inflating_pdf({str(folder / 'bomb.pdf')!r}, rows=40_000)",
                                   f"load_file({str(folder / 'bomb.pdf')!r})")
    out["inflating_pdf"] = {"bytes": (folder / "bomb.pdf").stat().st_size, "seconds": round(seconds, 2),
                            "cpu_seconds": round(cpu, 2), "peak_mb": round(peak)}
    print(json.dumps(out["inflating_pdf"]), flush=True)
    for mb in sizes:
        path = folder / f"text{mb}.txt"
        _text_file(path, mb * 1_000_000, seed=mb)
        store = folder / f"store{mb}"
        shutil.rmtree(store, ignore_errors=True)
        if vectors:
            seconds, cpu, peak, adds = _child(
                f"VECTORS = {vectors!r}\n{_REPLAY}\nfrom rag.indexing.kb_parts import IndexTarget\n"
                f"from rag.indexing.write_path import index_sources\nimport chromadb\n{_TIME_ADDS}",
                f"index_sources(IndexTarget('t', {str(store)!r}, embedding=Replay()), [{str(path)!r}])", "_ADDS")
        else:
            seconds, cpu, peak, adds = _child(
                "from rag.cli import main\nimport rag.indexing.index_command, chromadb\n" + _TIME_ADDS +
                "sys.argv = ['rag', 'index', " + repr(str(path)) + ", '--store', " + repr(str(store)) +
                ", '--collection', 't', '--embedding', 'fake']", "try:\n    main()\nexcept SystemExit:\n    pass",
                "_ADDS")
        out[f"text_{mb}mb"] = {"seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1), "peak_mb": round(peak),
                               **{k: round(v, 1) for k, v in adds.items()},
                               "seconds_without_adds": round(seconds - adds.get("add_seconds", 0), 1),
                               "load_average": os.getloadavg()[0]}
        print(json.dumps({f"text_{mb}mb": out[f"text_{mb}mb"]}), flush=True)
    small, large = (f"text_{mb}mb" for mb in (min(sizes), max(sizes)))
    factor = max(sizes) / min(sizes)
    for key, label in (("seconds", "ratio"), ("cpu_seconds", "cpu_ratio"), ("seconds_without_adds", "ratio_without_adds"),
                       ("add_seconds", "ratio_of_adds")):
        if out[small].get(key):
            out[f"{label}_{max(sizes)}_to_{min(sizes)}"] = round(out[large][key] / out[small][key], 2)
    out["target_ratio"] = round(1.3 * factor, 1)
    out["load_average_after"] = os.getloadavg()[0]
    print(json.dumps({k: v for k, v in out.items() if "ratio" in k or "load" in k}), flush=True)
    return out


def chroma_growth(folder: Path, chunks: int, vectors: str | None, hnsw: dict, batch: int = 5000) -> dict:
    """CPU seconds of each `batch`-chunk write into one growing Chroma collection (the library's `add_chunks`, in a
    child process), with i.i.d. random 384-d vectors (what `--embedding fake` gives) or the vectors of an embedding
    cache file (`vectors`: real MiniLM vectors), 800-character texts and the metadata keys of a chunk; and with
    real vectors, the recall@10 of the collection's HNSW search of 1,000 held-out vectors against exact search."""
    store = folder / "chroma-growth"
    shutil.rmtree(store, ignore_errors=True)
    code = f"""
import json, sqlite3, time
import numpy as np
from rag.stores import chroma
rng = np.random.default_rng(0)
if {vectors!r}:
    rows = sqlite3.connect({vectors!r}).execute("SELECT vector FROM embeddings WHERE dim = 384").fetchall()
    real = np.stack([np.frombuffer(r[0], dtype=np.float32) for r in rows])[rng.permutation(len(rows))]
    held, real = real[:1000], real[1000:1000 + {chunks}]
collection = chroma.open_client({str(store)!r}).get_or_create_collection(
    "growth", metadata={{**chroma.NEW_COLLECTION, **{hnsw!r}}}, embedding_function=None)
per = []
n = min({chunks}, len(real)) if {vectors!r} else {chunks}
for start in range(0, n, {batch}):
    size = min({batch}, n - start)
    vecs = real[start:start + size] if {vectors!r} else rng.standard_normal((size, 384)).astype(np.float32)
    texts = [("revenue grew in the segment " * 30)[:790] + str(start + i) for i in range(size)]
    metas = [{{"doc_id": "d", "chunk_index": start + i, "source": "/x.txt", "title": "x", "token_count": 200,
               "start_index": 800 * (start + i)}} for i in range(size)]
    cpu = time.process_time()
    chroma.add_chunks(collection, [f"c{{start + i}}" for i in range(size)], vecs.tolist(), texts, metas)
    per.append(round(time.process_time() - cpu, 2))
recall = None
if {vectors!r}:
    exact = np.argsort(-(held @ real[:n].T), axis=1)[:, :10]
    got = collection.query(query_embeddings=held, n_results=10, include=[])["ids"]
    recall = float(np.mean([len({{int(i[1:]) for i in g}} & set(e.tolist())) / 10 for g, e in zip(got, exact)]))
settings = {{k: collection.configuration["hnsw"][k] for k in ("ef_construction", "ef_search", "max_neighbors")}}
print("EXTRA", json.dumps({{"chunks": n, "cpu_per_batch": per, "recall_at_10": recall, "settings": settings}}))
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    out = json.loads(next(line[6:] for line in run.stdout.splitlines() if line.startswith("EXTRA ")))
    per = out["cpu_per_batch"]
    out.update(vectors=vectors or "random", hnsw=hnsw, load_average=os.getloadavg()[0],
               last_to_first_batch=round(per[-1] / per[0], 2) if per else None)
    print(json.dumps(out), flush=True)
    return out


def _table_rows(docs: list) -> set[tuple[str, int, str]]:
    """(source, page, row) of every table row with cells (" | ") the loader made."""
    return {(str(d.metadata["source"]), int(d.metadata["page"]), line) for d in docs
            if d.metadata.get("chunk_type") == "table" for line in d.page_content.splitlines() if " | " in line}


def tables(files: int, data: str | None, modes: list[str], repeat: int = 3) -> dict:
    """Time (wall and CPU) of `load_file` on a sample of filings per table mode, in one process, one mode after another.

    Modes: "none" (`tables=False`), "pdfium" (the default), "pdfplumber". The files are read once
    untimed first; then the modes run in turn `repeat` times (pdfplumber once), and each mode's least
    wall time and least CPU time over the rounds are kept (the least disturbed by other work). Also printed: tables found, pages with tables, and how many of
    pdfplumber's table rows the pdfium finder prints the same.
    """
    from rag.evaluation.financebench import resolve_data_dir

    pdfs = sorted((resolve_data_dir(data) / "pdfs").glob("*.pdf"))
    sample = pdfs[::max(1, len(pdfs) // files)][:files]
    out: dict = {"filings": [p.stem for p in sample], "load_average": os.getloadavg()[0], "repeat": repeat}
    for p in sample:   # once untimed: the files in the page cache, the imports done
        load_file(p, tables=False)
    rows = {}
    settings = {"none": False, "pdfium": "pdfium", "pdfplumber": "pdfplumber"}
    times: dict[str, list[tuple[float, float]]] = {mode: [] for mode in modes}
    for round_ in range(repeat):   # modes interleaved; the least wall and CPU time of the rounds (pdfplumber: one)
        for mode in modes:
            if mode == "pdfplumber" and round_:
                continue
            start, cpu = time.perf_counter(), time.process_time()
            docs = [d for p in sample for d in load_file(p, tables=settings[mode])]
            times[mode].append((time.perf_counter() - start, time.process_time() - cpu))
            seconds, cpu = min(t[0] for t in times[mode]), min(t[1] for t in times[mode])
            pages = len({(d.metadata["source"], d.metadata["page"]) for d in docs})
            found = [d for d in docs if d.metadata.get("chunk_type") == "table"]
            rows[mode] = _table_rows(docs)
            out[mode] = {"pages": pages, "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2),
                         "pages_per_s": round(pages / seconds, 1), "tables": len(found),
                         "pages_with_tables": len({(d.metadata["source"], d.metadata["page"]) for d in found}),
                         "table_rows": len(rows[mode]), "rounds": [[round(w, 2), round(c, 2)] for w, c in times[mode]]}
            print(json.dumps({mode: out[mode]}), flush=True)
    if "none" in out:
        for mode in set(modes) - {"none"}:
            out[f"ratio_{mode}"] = round(out[mode]["seconds"] / out["none"]["seconds"], 2)
            out[f"cpu_ratio_{mode}"] = round(out[mode]["cpu_seconds"] / out["none"]["cpu_seconds"], 2)
    if "pdfium" in rows and "pdfplumber" in rows:
        same = len(rows["pdfium"] & rows["pdfplumber"])
        out["pdfplumber_rows_also_in_pdfium"] = round(same / max(len(rows["pdfplumber"]), 1), 3)
        out["pdfium_rows_also_in_pdfplumber"] = round(same / max(len(rows["pdfium"]), 1), 3)
    out["load_average_after"] = os.getloadavg()[0]
    print(json.dumps({k: v for k, v in out.items() if k not in modes and k != "filings"}), flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="part", required=True)
    html = sub.add_parser("html")
    html.add_argument("sets", nargs="+", help="NAME=DIR[:GLOB,GLOB]")
    html.add_argument("--questions", default=None)
    html.add_argument("--budget", type=int, default=1000, help="context tokens (characters / 4)")
    html.add_argument("--store", default=None)
    lim = sub.add_parser("limits")
    lim.add_argument("folder")
    lim.add_argument("--sizes", default="5,50", help="MB of the text files, comma-separated (the ratio: last / first)")
    lim.add_argument("--vectors", default=None, help="an embedding cache file: index with its real vectors replayed")
    growth = sub.add_parser("chroma", help="CPU per batch of writes into one growing Chroma collection")
    growth.add_argument("folder")
    growth.add_argument("--chunks", type=int, default=50_000)
    growth.add_argument("--vectors", default=None, help="an embedding cache file (embeddings.sqlite): real vectors")
    growth.add_argument("--hnsw", default="{}", help="HNSW settings over the library's (NEW_COLLECTION) as JSON, "
                        'e.g. Chroma\'s defaults: {"hnsw:construction_ef": 100, "hnsw:search_ef": 100}')
    tab = sub.add_parser("tables")
    tab.add_argument("--files", type=int, default=4)
    tab.add_argument("--data", default=None)
    tab.add_argument("--repeat", type=int, default=3, help="rounds of the fast modes (the least times are kept)")
    tab.add_argument("--modes", default="none,pdfium,pdfplumber",
                     help="comma-separated: none (tables=False), pdfium (the default), pdfplumber")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    results: dict = {}
    if args.part == "html":
        results["sets"] = [html_set(spec) for spec in args.sets]
        if args.questions:
            questions = json.loads(Path(args.questions).read_text())
            store = Path(args.store or tempfile.mkdtemp(prefix="bench-loaders-"))
            results["hits"] = [html_hits(spec, questions[spec.partition("=")[0]], args.budget, store)
                               for spec in args.sets]
    elif args.part == "chroma":
        results = chroma_growth(Path(args.folder), args.chunks, args.vectors, json.loads(args.hnsw))
    elif args.part == "limits":
        results = limits(Path(args.folder), tuple(int(x) for x in args.sizes.split(",")), args.vectors)
    else:
        results = tables(args.files, args.data, args.modes.split(","), args.repeat)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
