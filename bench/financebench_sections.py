"""How FinanceBench's `full` configuration moves with each named-section setting, one at a time.

    python bench/financebench_sections.py            # data: ../shared/data/financebench or $RAG_FINANCEBENCH_DIR

Runs the benchmark's `full` configuration (bench/financebench.py, through `rag.retrieve`) with the defaults, then with one
`SectionRouter` setting (min_score, top_n, prefix, detect) or the promotion position
(`section_at`) changed, in both settings, and prints the context hit of each run. Uses the
benchmark's caches (bench/results/cache), so nothing is parsed or embedded when the main benchmark
ran first. docs/benchmarks.md quotes its output.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

VARIANTS: list[tuple[str, dict, dict]] = [
    ("defaults", {}, {}),
    *[(f"min_score={v}", {"min_score": v}, {}) for v in (1.0, 1.5, 2.5, 3.0)],
    *[(f"top_n={v}", {"top_n": v}, {}) for v in (1, 3)],
    *[(f"section_at={v}", {}, {"section_at": v}) for v in (0, 1, 5, 8)],
    *[(f"prefix={v}", {"prefix": v}, {}) for v in (0, 4, 6)],
    ("detect=True", {"detect": True}, {}),
]


def main(argv: list[str] | None = None) -> int:
    """Print one line per variant: single-document and shared-store context hit."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=os.environ.get("RAG_FINANCEBENCH_DIR", str(ROOT / "../shared/data/financebench")))
    parser.add_argument("--cache-dir", default=str(ROOT / "bench/results/cache"))
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))

    from rag.evaluation.financebench import FinanceBenchData
    from rag.evaluation.financebench_corpus import BenchCorpus
    from rag.evaluation.financebench_pipelines import (
        CONFIGURATIONS,
        LibraryConfiguration,
    )
    from rag.evaluation.financebench_run import score_question

    started = time.perf_counter()
    data = FinanceBenchData.load(args.data)
    corpus = BenchCorpus.build(data, cache_dir=args.cache_dir)
    base = CONFIGURATIONS["full"][1]
    n = len(data.questions)
    print(f"{n} questions, {len(corpus.chunks)} chunks; full = {base.description}\n")
    print(f"| {'variant':16} | single-document | shared store |")
    print("|---|---|---|")
    for name, router_settings, spec_settings in VARIANTS:
        pipeline = LibraryConfiguration(corpus, replace(base, section_settings=tuple(router_settings.items()),
                                                        **spec_settings))
        hits = {}
        for setting in ("single", "shared"):
            hits[setting] = sum(score_question(q, pipeline.retrieve(
                q.question, doc_name=q.doc_name if setting == "single" else None))["context_hit"]
                for q in data.questions)
        print(f"| {name:16} | {hits['single'] / n:.1%} ({hits['single']:.0f}) | "
              f"{hits['shared'] / n:.1%} ({hits['shared']:.0f}) |", flush=True)
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
