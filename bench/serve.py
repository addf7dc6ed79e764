"""Load test of `rag serve`: concurrent requests against the real app under uvicorn on loopback.

The answer model is a fake chat model that waits `--llm-latency` seconds per answer (as a remote
LLM would), so the numbers show what the server adds: retrieval, validation, JSON and HTTP.
Embeddings are deterministic fakes by default (`--embedding minilm` uses the real model).

    python bench/serve.py --requests 100 --concurrency 100 --llm-latency 0.05
    python bench/serve.py --endpoint stream
    python bench/serve.py --endpoint chat          # POST /v1/chat/completions (OpenAI-compatible)
    python bench/serve.py --endpoint chat-stream   # the same with "stream": true

Prints throughput and p50/p99 latency; exits 1 if any request failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.language_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, AIMessageChunk  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult  # noqa: E402

TOPICS = ["revenue", "margins", "debt", "cash flow", "dividends", "guidance", "risks", "segments"]


class SlowFakeChatModel(GenericFakeChatModel):
    """Answers '<sentence> [1]' after `latency` seconds, without blocking the event loop."""

    latency: float = 0.05

    async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        await asyncio.sleep(self.latency)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="The report covers it [1]."))])

    async def _astream(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any):
        await asyncio.sleep(self.latency)
        for word in ["The ", "report ", "covers ", "it ", "[1]."]:
            yield ChatGenerationChunk(message=AIMessageChunk(content=word))


def build_app(*, embedding: str, latency: float, chunks: int) -> Any:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from rag.compose.generator import RAG
    from rag.compose.resource import Resource
    from rag.config.models import ServerConfig
    from rag.generation.rag_with_source import rag_chain_from_docs
    from rag.server.app import create_app

    if embedding == "minilm":
        from rag.models.embeddings import default_embeddings

        emb = default_embeddings()
    else:
        emb = DeterministicFakeEmbedding(size=384)
    texts = [f"Report {i} discusses {TOPICS[i % len(TOPICS)]} for company {i % 50} in {2015 + i % 10}."
             for i in range(chunks)]
    metas = [{"company": i % 50, "year": 2015 + i % 10, "source": f"report-{i}.pdf", "page": i % 30}
             for i in range(chunks)]
    resource = Resource.from_texts("reports", texts, metadatas=metas, embedding=emb, search_kwargs={"k": 4})
    llm = SlowFakeChatModel(messages=iter(()), latency=latency)
    rag = RAG(resources=[resource], generation_chain=rag_chain_from_docs(llm))
    return create_app(rag, settings=ServerConfig(max_batch=100, support_scoring="lexical"))


async def run_load(url: str, *, requests: int, concurrency: int, endpoint: str) -> tuple[list[float], int, float]:
    import httpx

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    sem = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    errors = 0

    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:
        async def one(i: int) -> None:
            nonlocal errors
            path, body = request_for(endpoint, i)
            async with sem:
                start = time.perf_counter()
                try:
                    r = await client.post(path, json=body)
                    ok = r.status_code == 200 and answered(endpoint, r.text)
                except httpx.HTTPError:
                    ok = False
                latencies.append(time.perf_counter() - start)
                errors += not ok

        await client.get("/health")
        wall = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(requests)))
        wall = time.perf_counter() - wall
    return latencies, errors, wall


def request_for(endpoint: str, i: int) -> tuple[str, dict[str, Any]]:
    """The path and body of request `i` (the same question and filter on every endpoint)."""
    question = f"What about {TOPICS[i % len(TOPICS)]} in {2015 + i % 10}?"
    flt = {"year": {"$gte": 2015 + i % 5}}
    if endpoint.startswith("chat"):
        return "/v1/chat/completions", {"model": "rag", "messages": [{"role": "user", "content": question}],
                                        "rag": {"filter": flt}, "stream": endpoint == "chat-stream"}
    return "/" + endpoint, {"question": question, "filter": flt}


def answered(endpoint: str, text: str) -> bool:
    """Whether a 200 response holds a whole answer with sources."""
    if endpoint == "stream":
        return '"type": "done"' in text
    if endpoint == "chat-stream":
        return text.rstrip().endswith("data: [DONE]") and '"error"' not in text and '"sources": [{' in text
    body = json.loads(text)
    return bool(body["choices"][0]["message"]["rag"]["sources"] if endpoint == "chat" else body["sources"])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--llm-latency", type=float, default=0.05, help="seconds the fake LLM takes per answer")
    parser.add_argument("--endpoint", choices=["invoke", "stream", "chat", "chat-stream"], default="invoke")
    parser.add_argument("--embedding", choices=["deterministic", "minilm"], default="deterministic")
    parser.add_argument("--chunks", type=int, default=2000, help="chunks in the in-memory Chroma store")
    args = parser.parse_args(argv)

    from rag.testing.live_server import live_server

    app = build_app(embedding=args.embedding, latency=args.llm_latency, chunks=args.chunks)
    with live_server(app) as url:
        asyncio.run(run_load(url, requests=min(10, args.requests), concurrency=10, endpoint=args.endpoint))  # warm-up
        latencies, errors, wall = asyncio.run(run_load(url, requests=args.requests, concurrency=args.concurrency,
                                                       endpoint=args.endpoint))
    print(f"rag serve load: POST {request_for(args.endpoint, 0)[0]}{' (stream)' if args.endpoint == 'chat-stream' else ''}, {args.requests} requests, concurrency {args.concurrency}, "
          f"fake LLM latency {args.llm_latency * 1000:.0f} ms, {args.embedding} embeddings, {args.chunks} chunks")
    print(f"  throughput  {args.requests / wall:8.1f} requests/s  (wall {wall:.2f} s)")
    print(f"  latency p50 {percentile(latencies, 50) * 1000:8.1f} ms")
    print(f"  latency p99 {percentile(latencies, 99) * 1000:8.1f} ms")
    print(f"  mean        {statistics.fmean(latencies) * 1000:8.1f} ms")
    print(f"  errors      {errors:8d}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
