"""What does the framework cost? `RAG.chain().invoke` vs a hand-written LCEL chain doing the same work.

Both run three Chroma resources (fake embeddings, k=4, one with a metadata filter), aggregate and
tag the documents, format the prompt, call a fake LLM and check the answer (`finalise`: citations,
support with the NumPy MiniLM, flags), then add one extra: the framework does
this work as `RAG(..., retrieval="plain")` (the seed's plain top-k), so the ratio is what the
framework itself costs. Calls alternate between the two chains in the same run, so machine noise
hits both alike. The default `RAG(...)` runs the recommended pipeline (100 candidates per resource,
fusion, page-diverse packing, a token budget): it does more work, and its time per call is printed
beside (timed after the paired loop).

    python bench/overhead.py [--calls 300] [--tracing]

Prints the median ratio (target <= 1.10) and the absolute overhead per call. Tracing is off in
that comparison, as it is by default. `--tracing` also times the framework chain with
OpenTelemetry spans on (`rag.base.tracing`, SDK tracer provider, spans kept in memory), in the same
alternating loop, and prints what switching it on costs per call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: E402
from langchain_core.language_models import FakeListChatModel  # noqa: E402
from langchain_core.output_parsers import StrOutputParser  # noqa: E402
from langchain_core.runnables import (  # noqa: E402
    RunnableLambda,
    RunnableParallel,
    RunnablePassthrough,
)

from rag import RAG, Resource, rag_chain_from_docs  # noqa: E402
from rag.checks.postprocess import finalise  # noqa: E402
from rag.compose.retrieval_settings import RetrievalSettings  # noqa: E402
from rag.generation.prompts import DEFAULT_PROMPT, format_docs  # noqa: E402


def build(n_docs: int = 200):
    emb = DeterministicFakeEmbedding(size=384)
    resources = [
        Resource.from_texts(name, [f"{name} document {i} about topic {i % 7}" for i in range(n_docs)],
                            metadatas=[{"year": 2000 + i % 25} for i in range(n_docs)], embedding=emb)
        for name in ("news", "editos", "reports")
    ]
    llm = FakeListChatModel(responses=["An answer citing [1]."])
    settings = {"news": {"search_kwargs": {"k": 4, "filter": {"year": {"$gt": 2010}}}},
                "editos": {"search_kwargs": {"k": 4}}, "reports": {"search_kwargs": {"k": 4}}}
    rag = RAG(resources=resources, generation_chain=rag_chain_from_docs(llm), retrieval="plain",
              extras={"count_docs": lambda x: len(x["context"])})
    framework = rag.chain(retrieval_chain=settings)
    pipeline = rag.model_copy(update={"retrieval": RetrievalSettings()}).chain(retrieval_chain=settings)

    stores = {r.name: r.retriever.vectorstore for r in resources}
    where = {"year": {"$gt": 2010}}

    def aggregate(results: dict) -> list[Document]:
        seen, out = set(), []
        for name, docs in results.items():
            for d in docs:
                key = json.dumps([d.page_content, d.metadata], sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    out.append(Document(page_content=d.page_content, metadata={**d.metadata, "resource": name}))
        return out

    retrieval = RunnableParallel({
        "news": RunnableLambda(lambda q: stores["news"].similarity_search(q, k=4, filter=where)),
        "editos": RunnableLambda(lambda q: stores["editos"].similarity_search(q, k=4)),
        "reports": RunnableLambda(lambda q: stores["reports"].similarity_search(q, k=4)),
    }) | RunnableLambda(aggregate)
    generation = (RunnablePassthrough.assign(context=lambda x: format_docs(x["context"]))
                  | DEFAULT_PROMPT | llm | StrOutputParser())
    # the same answer checks the chain runs once for every door (citations, support, flags: issue 35)
    checks = RunnableLambda(lambda x: finalise(x["answer"], x["question"], x["context"]))
    hand = (RunnablePassthrough.assign(context=(lambda x: x["question"]) | retrieval)
            | RunnablePassthrough.assign(answer=generation)
            | RunnablePassthrough.assign(answer=checks)
            | RunnablePassthrough.assign(count_docs=lambda x: len(x["context"])))
    return framework, hand, pipeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--tracing", action="store_true", help="also time the chain with OpenTelemetry spans on")
    args = parser.parse_args()
    framework, hand, pipeline = build()
    traced_config, spans_kept = _traced_config() if args.tracing else (None, None)
    t_traced: list[float] = []
    t_pipeline: list[float] = []
    question = "what about topic 3?"
    a, b = framework.invoke(question), hand.invoke({"question": question})
    assert a["answer"] == b["answer"] and len(a["context"]) == len(b["context"]), "the two chains must do the same work"
    for _ in range(20):  # warm-up
        framework.invoke(question)
        hand.invoke({"question": question})
    t_fw, t_hand, c_fw, c_hand = [], [], [], []
    for _ in range(args.calls):
        t0, c0 = time.perf_counter(), time.process_time()
        framework.invoke(question)
        t1, c1 = time.perf_counter(), time.process_time()
        hand.invoke({"question": question})
        t2, c2 = time.perf_counter(), time.process_time()
        t_fw.append(t1 - t0)
        t_hand.append(t2 - t1)
        if traced_config is not None:
            t3 = time.perf_counter()
            framework.invoke(question, traced_config)
            t_traced.append(time.perf_counter() - t3)
        c_fw.append(c1 - c0)
        c_hand.append(c2 - c1)
    for _ in range(args.calls):   # after the paired loop, so its allocations do not disturb the ratio
        t4 = time.perf_counter()
        pipeline.invoke(question)
        t_pipeline.append(time.perf_counter() - t4)
    med_fw, med_hand = statistics.median(t_fw), statistics.median(t_hand)
    ratios = [f / h for f, h in zip(t_fw, t_hand)]
    print(f"calls: {args.calls} each, 3 resources, fake embeddings (384-d), fake LLM")
    print(f"RAG.chain().invoke   median {med_fw * 1e3:.2f} ms (retrieval='plain': the hand chain's work)")
    print(f"hand-written LCEL    median {med_hand * 1e3:.2f} ms")
    print(f"ratio of medians     {med_fw / med_hand:.3f}  (target <= 1.10)")
    print(f"median paired ratio  {statistics.median(ratios):.3f}")
    print(f"overhead per call    {(med_fw - med_hand) * 1e3:+.2f} ms (wall)")
    print(f"default pipeline     median {statistics.median(t_pipeline) * 1e3:.2f} ms per call "
          "(RAG(...).chain(): 100 candidates per resource, fusion, packing, budget)")
    # CPU time of the process (all threads) is less disturbed by other load on a shared machine.
    cpu_fw, cpu_hand = sum(c_fw) / len(c_fw), sum(c_hand) / len(c_hand)
    print(f"CPU time per call    {cpu_fw * 1e3:.2f} ms vs {cpu_hand * 1e3:.2f} ms, ratio {cpu_fw / cpu_hand:.3f}")
    if t_traced:
        med_tr = statistics.median(t_traced)
        spans = len(spans_kept.get_finished_spans()) // args.calls
        print(f"tracing on           median {med_tr * 1e3:.2f} ms, {spans} spans per call, "
              f"{(med_tr - med_fw) * 1e3:+.2f} ms per call vs tracing off")


def _traced_config() -> tuple[dict, object]:
    """A run config with the OpenTelemetry handler on an SDK provider that keeps spans in memory."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        InMemorySpanExporter,
    )

    from rag.base.tracing import OpenTelemetryCallbackHandler

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return {"callbacks": [OpenTelemetryCallbackHandler(tracer_provider=provider)]}, exporter


if __name__ == "__main__":
    main()
