"""OCR on "scanned" FinanceBench filings: throughput, character accuracy, and context hit against the text layer.

For each of the filings with the most development questions (`--files`, default 8), a sample of
its pages is taken: every evidence page of its questions, the pages next to them, and
`--spread` pages spread over the filing (distractors). Two PDFs are written of these pages: a
copy with the text layer (pypdfium2 `import_pages`) and a scanned copy (each page rendered to a
grey image at `--dpi` and placed in an image-only PDF, `rag.testing.scans.scanned_copy`).

Then, with the library's own code:

- OCR throughput: `load_file` on the scanned copies (pages/s, one Tesseract thread);
- character accuracy of each OCR page against the text layer of the same page (1 - Levenshtein
  distance / length, on text with whitespace runs collapsed to one space);
- context hit: both sets indexed with `KnowledgeBase` defaults (MiniLM, table detection,
  AutoContext) and every question about these filings retrieved as `rag ask` does (hybrid search,
  the recommended pipeline, 4,000-token budget counted as characters / 4), in the single-document
  setting (a `source` filter on the question's filing); a hit when the context holds a chunk of
  an evidence page.

Usage:
    python bench/ocr.py --files 8 --spread 6 --json bench/results/ocr.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag.compose.defaults import RECOMMENDED  # noqa: E402
from rag.compose.knowledge_base import KnowledgeBase  # noqa: E402
from rag.compose.retrieve import retrieve  # noqa: E402
from rag.evaluation.financebench import resolve_data_dir  # noqa: E402
from rag.indexing.loaders import load_file, path_text  # noqa: E402
from rag.retrieval.budget import CharTokenCounter  # noqa: E402
from rag.testing.scans import scanned_copy  # noqa: E402


def levenshtein(a: str, b: str) -> int:
    """Edit distance, one NumPy row at a time (insertions by a running minimum)."""
    if not a or not b:
        return max(len(a), len(b))
    codes_b = np.frombuffer(b.encode("utf-32-le"), dtype=np.uint32)
    index = np.arange(len(b) + 1)
    row = index.copy()
    codes_a = np.frombuffer(a.encode("utf-32-le"), dtype=np.uint32)
    for i, code in enumerate(codes_a, start=1):
        diag = row[:-1] + (codes_b != code)
        up = row[1:] + 1
        best = np.minimum(diag, up)
        new = np.empty_like(row)
        new[0] = i
        new[1:] = best
        row = np.minimum.accumulate(new - index) + index
    return int(row[-1])


def accuracy(ocr: str, truth: str) -> float:
    ocr, truth = " ".join(ocr.split()), " ".join(truth.split())
    return 1 - levenshtein(ocr, truth) / max(len(truth), 1)


def _sample(pages: int, evidence: set[int], spread: int) -> list[int]:
    chosen = {p + d for p in evidence for d in (-1, 0, 1) if 0 <= p + d < pages}
    chosen |= {round(i * (pages - 1) / max(spread - 1, 1)) for i in range(spread)}
    return sorted(chosen)


def _subset(src: Path, dst: Path, pages: list[int]) -> None:
    import pypdfium2 as pdfium

    source, out = pdfium.PdfDocument(str(src)), pdfium.PdfDocument.new()
    out.import_pages(source, pages)
    out.save(str(dst))
    out.close()
    source.close()


def _hits(kb: KnowledgeBase, questions: list[dict], folder: Path, maps: dict[str, dict[int, int]]) -> list[bool]:
    resource = kb.as_resource()
    hits = []
    for q in questions:
        gold = {maps[q["doc_name"]][e["evidence_page_num"]] for e in q["evidence"]}
        source = path_text((folder / f"{q['doc_name']}.pdf").resolve())
        result = retrieve(q["question"], resource, **{**RECOMMENDED, "max_tokens": 4000,
                                                      "token_counter": CharTokenCounter(), "filter": {"source": source}})
        hits.append(any(d.metadata.get("page") in gold for d in result.context))
    return hits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--spread", type=int, default=6, help="distractor pages spread over each filing")
    parser.add_argument("--dpi", type=int, default=200, help="resolution of the scanned copies")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    root = resolve_data_dir(args.data)
    questions = [json.loads(line) for line in (root / "questions.jsonl").read_text().splitlines() if line.strip()]
    counts = Counter(q["doc_name"] for q in questions)
    names = sorted(counts, key=lambda n: (-counts[n], n))[:args.files]
    questions = [q for q in questions if q["doc_name"] in names]
    work = Path(tempfile.mkdtemp(prefix="bench-ocr-"))
    (work / "text").mkdir()
    (work / "scan").mkdir()
    maps: dict[str, dict[int, int]] = {}
    import pypdfium2 as pdfium

    for name in names:
        src = root / "pdfs" / f"{name}.pdf"
        pages = len(pdfium.PdfDocument(str(src)))
        evidence = {e["evidence_page_num"] for q in questions if q["doc_name"] == name for e in q["evidence"]}
        sample = _sample(pages, evidence, args.spread)
        maps[name] = {p: n for n, p in enumerate(sample)}
        _subset(src, work / "text" / f"{name}.pdf", sample)
        scanned_copy(src, work / "scan" / f"{name}.pdf", pages=sample, dpi=args.dpi)
    total_pages = sum(len(m) for m in maps.values())
    print(f"{len(names)} filings, {total_pages} pages, {len(questions)} questions; work dir {work}", flush=True)
    start, cpu = time.perf_counter(), os.times()
    scanned = {name: load_file(work / "scan" / f"{name}.pdf") for name in names}
    seconds = time.perf_counter() - start
    child_cpu = os.times().children_user - cpu.children_user
    ocr_pages = sum(len({d.metadata["page"] for d in docs}) for docs in scanned.values())
    print(f"OCR: {ocr_pages} pages in {seconds:.1f} s = {ocr_pages / seconds:.2f} pages/s "
          f"(Tesseract CPU {child_cpu:.1f} s = {child_cpu / max(ocr_pages, 1):.2f} s/page)", flush=True)
    accs = []
    for name in names:
        text = {d.metadata["page"]: d.page_content for d in load_file(work / "text" / f"{name}.pdf", tables=False)}
        ocr: dict[int, str] = {}
        for d in scanned[name]:
            ocr[d.metadata["page"]] = ocr.get(d.metadata["page"], "") + d.page_content
        accs += [accuracy(ocr.get(p, ""), t) for p, t in text.items() if len(t.strip()) > 50]
    print(f"character accuracy: mean {np.mean(accs):.3f}, median {np.median(accs):.3f}, "
          f"min {np.min(accs):.3f} over {len(accs)} pages", flush=True)
    results = {"filings": names, "pages": total_pages, "questions": len(questions), "ocr_pages": ocr_pages,
               "ocr_seconds": round(seconds, 1), "ocr_pages_per_s": round(ocr_pages / seconds, 3),
               "char_accuracy_mean": round(float(np.mean(accs)), 4),
               "char_accuracy_median": round(float(np.median(accs)), 4)}
    for label in ("text", "scan"):
        kb = KnowledgeBase(label, work / "store")
        # the scans as already read above (OCR once); the text copies as `rag index` reads them
        report = kb.add_documents([d for docs in scanned.values() for d in docs] if label == "scan" else work / label)
        hits = _hits(kb, questions, work / label, maps)
        results[f"hit_{label}"] = sum(hits)
        print(f"{label}: {report.summary()}; context hit {sum(hits)}/{len(hits)} = {sum(hits) / len(hits):.1%}",
              flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
