"""The cost of PDF table detection: `load_file` pages/s with and without it, on FinanceBench's filings.

`load_file(path, tables=False)` reads every page with pypdfium2 only (and the bench counts the pages
`looks_tabular` would send on). `load_file(path, tables=FINDER)` (`--finder`, default "pdfium", the
default of `load_file`) also reads the tables of the pages whose text looks tabular
(`rag.indexing.tables.looks_tabular`): from pypdfium2's character boxes, or with pdfplumber, which
re-parses them with pdfminer.six; those pages are cut into text and table documents. Both runs are timed per file, in the same process; the figures printed are pages/s,
how many pages went to pdfplumber, and the tables found (and the table chunks `TokenChunker`
makes of them).

Usage:
    python bench/pdf_tables.py                          # all filings (about 6,800 pages; about an hour)
    python bench/pdf_tables.py --every 6                # pypdfium2 on all, table detection on every 6th filing
    python bench/pdf_tables.py --files 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag.evaluation.financebench import resolve_data_dir  # noqa: E402
from rag.indexing.chunking import TokenChunker  # noqa: E402
from rag.indexing.loaders import load_file  # noqa: E402
from rag.indexing.tables import looks_tabular  # noqa: E402


def _plain(path: Path) -> dict[str, float]:
    start, cpu = time.perf_counter(), time.process_time()
    docs = load_file(path, tables=False)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"pages": len(docs), "plain_seconds": seconds, "plain_cpu": cpu,
            "sent": sum(looks_tabular(d.page_content) for d in docs)}


def _with_tables(path: Path, chunker: TokenChunker, finder: str = "pdfium") -> dict[str, float]:
    start, cpu = time.perf_counter(), time.process_time()
    docs = load_file(path, tables=finder)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    tables = [d for d in docs if d.metadata.get("chunk_type") == "table"]
    chunks = chunker.split_documents(docs)
    return {"table_seconds": seconds, "table_cpu": cpu, "tables": len(tables),
            "pages_with_tables": len({d.metadata["page"] for d in tables}),
            "table_chunks": sum(c.metadata.get("chunk_type") == "table" for c in chunks), "chunks": len(chunks)}


def _total(rows: list[dict[str, float]]) -> dict[str, float]:
    """Sums of the figures every row has."""
    keys = set.intersection(*(set(r) for r in rows))
    return {key: sum(r[key] for r in rows) for key in sorted(keys)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="FinanceBench data directory (default: RAG_FINANCEBENCH_DIR "
                                                    "or ../shared/data/financebench)")
    parser.add_argument("--files", type=int, default=None, help="only the first N filings")
    parser.add_argument("--every", type=int, default=1,
                        help="time table detection on every N-th filing only (pypdfium2 and the page count run on all)")
    parser.add_argument("--json", default=None, help="also write the per-file figures here")
    parser.add_argument("--finder", default="pdfium", choices=["pdfium", "pdfplumber"], help="the table finder")
    args = parser.parse_args(argv)
    pdfs = sorted((resolve_data_dir(args.data) / "pdfs").glob("*.pdf"))[:args.files]
    if not pdfs:
        parser.error(f"no PDFs under {resolve_data_dir(args.data) / 'pdfs'}")
    chunker = TokenChunker()
    rows: dict[str, dict[str, float]] = {}
    for number, path in enumerate(pdfs):
        rows[path.name] = row = _plain(path)
        line = f"{path.name:45s} {row['pages']:4d} pages  sent {row['sent']:4d}  {row['pages'] / row['plain_seconds']:7.1f}"
        if number % args.every == 0:
            row.update(_with_tables(path, chunker, args.finder))
            line += f" -> {row['pages'] / row['table_seconds']:6.1f} pages/s  tables {row['tables']:4d}"
        print(line + " pages/s" * (number % args.every != 0), flush=True)
    every = _total(list(rows.values()))
    timed = [r for r in rows.values() if "table_seconds" in r]
    sample = _total(timed)
    print(f"\n{len(rows)} filings, {every['pages']:,} pages with text; wall-clock (CPU time) rates")
    print(f"without table detection: {every['pages'] / every['plain_seconds']:,.1f} pages/s "
          f"({every['pages'] / every['plain_cpu']:,.1f}); {every['plain_seconds']:,.0f} s")
    print(f"pages sent to the table finder ({args.finder}): {every['sent']:,} ({every['sent'] / every['pages']:.0%})")
    per_sent = {kind: (sample[f"table_{kind}"] - sample[f"plain_{kind}"]) / max(sample["sent"], 1)
                for kind in ("seconds", "cpu")}
    print(f"with table detection, measured on {len(timed)} filings ({sample['pages']:,} pages, {sample['sent']:,} sent): "
          f"{sample['pages'] / sample['table_seconds']:,.2f} pages/s ({sample['pages'] / sample['table_cpu']:,.2f}); "
          f"without: {sample['pages'] / sample['plain_seconds']:,.1f} ({sample['pages'] / sample['plain_cpu']:,.1f}); "
          f"{per_sent['seconds']:.2f} s ({per_sent['cpu']:.2f} s CPU) per page sent")
    if len(timed) < len(rows):
        wall = every["plain_seconds"] + per_sent["seconds"] * every["sent"]
        cpu = every["plain_cpu"] + per_sent["cpu"] * every["sent"]
        print(f"with table detection, estimated for all {every['pages']:,} pages: {every['pages'] / wall:,.2f} "
              f"pages/s, {wall / 60:,.0f} min ({every['pages'] / cpu:,.2f} pages/s, {cpu / 60:,.0f} min of CPU)")
    print(f"tables found: {sample['tables']:,} on {sample['pages_with_tables']:,} pages; "
          f"{sample['table_chunks']:,} table chunks of {sample['chunks']:,} chunks")
    if args.json:
        Path(args.json).write_text(json.dumps({"files": rows, "total": every, "timed": sample}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
