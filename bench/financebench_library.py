"""The FinanceBench full pipeline through the library's own components, on a subset of filings.

`bench/financebench.py` searches cached vectors with exact numpy dot products (fast enough to run
ten configurations over 27k chunks). This script runs the same full pipeline the way a user would:

    KnowledgeBase (PassthroughChunker: the benchmark's page-aware chunks, AutoContext on, Chroma)
    -> kb.as_hybrid_retriever (the knowledge base's Chroma collection + BM25 over title, section and
       text, convex fusion 0.9 / 0.1) in a Resource
    -> rag.retrieve(question, resource, router=DocumentRouter, reranker=EmbeddingReranker,
       rerank_weight=0.5, page_diversity=0.3, fetch_k=100,
       sections=SectionRouter(the knowledge base's chunks, key="doc_name"))

and scores it like the benchmark (context capped at 4,000 tokens counted as chars/4, hit = a gold
evidence page in the context), next to the harness's `full` configuration on the same filings
(`--no-sections`: `full-nosections`; `--no-rerank` too: `full-ac`). The reranker is blended 50/50 with the first stage
(`rerank_weight=0.5`) over all 100 candidates; the harness blends it over the top 50.
Vectors come from the benchmark's embedding cache (bench/results/cache), so nothing is re-embedded
when the main benchmark ran first.

    python bench/financebench_library.py --docs 12
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    """Build the subset knowledge base, run both paths in both settings, print the figures."""
    sys.path.insert(0, str(ROOT))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=os.environ.get("RAG_FINANCEBENCH_DIR", str(ROOT / "../shared/data/financebench")))
    parser.add_argument("--cache-dir", default=str(ROOT / "bench/results/cache"))
    parser.add_argument("--docs", type=int, default=12, help="the first N filings (by name) that have questions")
    parser.add_argument("--no-sections", dest="sections", action="store_false",
                        help="without named sections (compare with the harness's full-nosections)")
    parser.add_argument("--no-rerank", dest="rerank", action="store_false",
                        help="skip the EmbeddingReranker (the harness's full-ac instead of full)")
    args = parser.parse_args(argv)
    if not args.rerank and args.sections:
        parser.error("--no-rerank needs --no-sections (the harness has no configuration with sections and no reranker)")


    from rag.core.knowledge_base import KnowledgeBase
    from rag.core.resource import Resource
    from rag.core.retrieve import retrieve
    from rag.evaluation.financebench import FinanceBenchData
    from rag.evaluation.financebench_index import BenchIndex, benchmark_embeddings
    from rag.evaluation.financebench_pipelines import CONFIGURATIONS, Pipeline
    from rag.evaluation.financebench_run import Retrieval, score_question
    from rag.indexing.autocontext import AutoContext
    from rag.indexing.chunking import PassthroughChunker
    from rag.retrieval.rerank import EmbeddingReranker
    from rag.retrieval.routing import DocumentRouter
    from rag.retrieval.sections import SectionRouter

    data = FinanceBenchData.load(args.data)
    names = sorted({q.doc_name for q in data.questions})[: args.docs]
    sub = FinanceBenchData(root=data.root, questions=[q for q in data.questions if q.doc_name in names],
                           documents={n: data.documents[n] for n in names})
    chunks = sub.chunks(cache_dir=args.cache_dir)
    print(f"{len(names)} filings, {len(chunks)} chunks, {len(sub.questions)} questions", flush=True)

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        # the knowledge base's embedding cache is the benchmark's (same model id + text -> same vector)
        os.symlink(Path(args.cache_dir).resolve() / "embeddings.sqlite", Path(tmp) / "embeddings.sqlite")
        kb = KnowledgeBase("financebench", tmp, embedding=benchmark_embeddings(), chunker=PassthroughChunker(),
                           autocontext=AutoContext())
        report = kb.add_documents(chunks)
        print(f"knowledge base: {kb.count()} chunks in Chroma ({len(report.added)} filings) "
              f"in {time.perf_counter() - started:.0f} s", flush=True)
        stored = kb.get_documents()   # read once, for BM25 and the section router
        hybrid = kb.as_hybrid_retriever(fusion="convex", weights={"dense": 0.9, "bm25": 0.1}, fetch_k=100,
                                        chunks=stored)   # BM25 over title + section + text
        resource = Resource.from_retriever("filings", hybrid)
        titles = {n: chunks[[c.metadata["doc_name"] for c in chunks].index(n)].metadata["title"] for n in names}
        router = DocumentRouter({n: f"{t} | {n.replace('_', ' ')}" for n, t in titles.items()}, key="doc_name")

        reranker = EmbeddingReranker(embedding=kb.embedding) if args.rerank else None
        sections = SectionRouter(stored, key="doc_name") if args.sections else None
        index = BenchIndex.build(sub, cache_dir=args.cache_dir)
        reference = "full-ac" if not args.rerank and not args.sections else \
            ("full" if args.sections else "full-nosections")
        harness = Pipeline(index, CONFIGURATIONS[reference][1])
        hits = {"library": {"single": 0, "shared": 0}, "harness": {"single": 0, "shared": 0}}
        seconds = 0.0
        for q in sub.questions:
            for setting in ("single", "shared"):
                kwargs = {"filter": {"doc_name": q.doc_name}} if setting == "single" else {"router": router}
                t0 = time.perf_counter()
                result = retrieve(q.question, resource, k=60, fetch_k=100, fusion="convex", page_diversity=0.3,
                                  reranker=reranker, rerank_weight=0.5, sections=sections, max_tokens=None, **kwargs)
                seconds += time.perf_counter() - t0
                got = score_question(q, Retrieval(ranked=result.context, context=result.context))
                hits["library"][setting] += int(got["context_hit"])
                ref = harness.retrieve(q.question, doc_name=q.doc_name if setting == "single" else None)
                hits["harness"][setting] += int(score_question(q, ref)["context_hit"])
        kb.close()
    n = len(sub.questions)
    for path, by_setting in hits.items():
        print(f"{path if path == 'library' else f'harness {reference}':8} single-document {by_setting['single']}/{n} ({by_setting['single'] / n:.1%})   "
              f"shared store ({len(names)} filings) {by_setting['shared']}/{n} ({by_setting['shared'] / n:.1%})")
    print(f"library retrieve(): {1000 * seconds / (2 * n):.0f} ms per question (mean); "
          f"total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
