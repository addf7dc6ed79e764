"""Indexing time with and without table detection: `python bench/index_tables.py MODE STORE [--data DIR]`.

Builds a fresh `KnowledgeBase` in STORE (its own embedding cache: nothing is shared between the two
modes) from the FinanceBench filings with the library defaults, and prints one JSON line: chunks,
wall and CPU seconds of the process (`getrusage`: loading, chunking, AutoContext, embedding and
writing), peak memory and the load average before and after. MODE `tables` indexes the PDFs as
`rag index` does (the default pypdfium2 table finder); `notables` indexes their pages loaded with
`load_file(path, tables=False)`. Run the two one after the other and compare; CPU time is the
figure that holds when the machine is shared (docs/indexing.md, "Tables in PDFs").

Example:
    python bench/index_tables.py notables /tmp/kb-notables && python bench/index_tables.py tables /tmp/kb-tables
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


def main() -> int:
    """Index the filings in one mode and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("tables", "notables"))
    parser.add_argument("store", type=Path, help="a new directory for the knowledge base")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared/data/financebench",
                        help="a FinanceBench data directory (its pdfs/ are indexed)")
    args = parser.parse_args()
    if args.store.exists() and any(args.store.iterdir()):
        parser.error(f"{args.store} is not empty: give a new directory, so both modes start from nothing")
    from rag.compose.knowledge_base import KnowledgeBase
    from rag.indexing.loaders import load_file

    pdfs = sorted((args.data / "pdfs").glob("*.pdf"))
    if not pdfs:
        parser.error(f"no PDF in {args.data / 'pdfs'}")
    kb = KnowledgeBase("filings", args.store)
    load_before = os.getloadavg()[0]
    started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    if args.mode == "tables":
        report = kb.add_documents([str(p) for p in pdfs])
    else:
        report = kb.add_documents([doc for p in pdfs for doc in load_file(p, tables=False)])
    after = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({
        "mode": args.mode, "files": len(pdfs), "chunks": kb.count(),
        "wall_s": round(time.perf_counter() - started, 1),
        "cpu_s": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 1),
        "peak_rss_mb": round(after.ru_maxrss / 1024), "load_before": load_before,
        "load_after": os.getloadavg()[0], "report": report.summary()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
