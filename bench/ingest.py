"""Ingest benchmarks for rag's indexing: printed figures, not timed tests.

1. Write throughput: chunks/s into Chroma with precomputed (fake) 384-d embeddings, through
   `KnowledgeBase.add_documents` and through plain `langchain_chroma.Chroma.add_documents` on
   the same chunks in the same run (target: ratio >= 0.9).
2. Unchanged re-index: a second `add_documents` over 1,000 files (target <= 1 s), and the
   re-index after one file changed.
3. PDF parsing: `load_file` pages/s next to a bare pypdfium2 loop.
4. Embedding throughput of all-MiniLM-L6-v2 on real text (FinanceBench filings): word
   pieces/s for several batch sizes, the CPU time per token, and agreement with the baseline.

Usage:
    python bench/ingest.py                       # everything (10k and 100k chunks, 3 filings)
    python bench/ingest.py --sizes 10000 --filings 1 --skip-embedding
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FINANCEBENCH = Path(__file__).resolve().parents[2] / "shared" / "data" / "financebench" / "pdfs"
WORDS = ("revenue margin growth bank rates inflation cloud segment dividend cash flow guidance risk market "
         "share customer supplier tariff currency debt equity operating income quarter fiscal year").split()


class PrecomputedEmbedding(Embeddings):
    """Returns vectors computed before the timed section (a dict lookup per text)."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors
        self.size = len(next(iter(vectors.values())))
        self.model_name = "precomputed-384"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.vectors.get(text) or [0.0] * self.size


def _chunks(n: int, seed: int = 0) -> tuple[list[Document], PrecomputedEmbedding]:
    rng = np.random.default_rng(seed)
    words = np.array(WORDS)
    docs = []
    for i in range(n):
        body = " ".join(words[rng.integers(0, len(words), 60)])
        docs.append(Document(page_content=f"Chunk {i}: {body}.", metadata={"source": f"doc{i}", "page": i % 50,
                                                                           "title": f"Doc {i // 10}"}))
    vectors = rng.normal(size=(n, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return docs, PrecomputedEmbedding({d.page_content: v.tolist() for d, v in zip(docs, vectors, strict=True)})


def bench_write(n: int) -> None:
    from langchain_chroma import Chroma

    from rag.indexing.autocontext import AutoContext
    from rag.indexing.chunking import PassthroughChunker, TokenChunker
    from rag.indexing.knowledge_base import KnowledgeBase

    docs, emb = _chunks(n)

    def raw() -> float:
        with tempfile.TemporaryDirectory() as tmp:
            store = Chroma(collection_name="raw", embedding_function=emb, persist_directory=tmp,
                           collection_metadata={"hnsw:space": "cosine"})
            start = time.perf_counter()
            for i in range(0, n, 5000):  # Chroma 1.5 refuses batches above ~5.4k
                part = docs[i:i + 5000]
                store.add_documents(part, ids=[d.metadata["source"] for d in part])
            return n / (time.perf_counter() - start)

    def ours(chunker: object) -> float:
        with tempfile.TemporaryDirectory() as tmp:
            kb = KnowledgeBase("bench", tmp, embedding=emb, cache=False, autocontext=AutoContext(enabled=False),
                               chunker=chunker)
            if isinstance(chunker, TokenChunker):
                chunker.tokenizer  # loaded once per process, outside the timed section
            start = time.perf_counter()
            report = kb.add_documents(docs)
            rate = n / (time.perf_counter() - start)
            assert report.chunks_added == n == kb.count(), (report.chunks_added, kb.count())
            return rate

    # Interleaved, so load from other processes on this machine hits both sides alike.
    base1 = raw()
    passthrough = ours(PassthroughChunker())
    base2 = raw()
    token = ours(TokenChunker(chunk_size=254, chunk_overlap=0))
    base = (base1 + base2) / 2
    print(f"write {n:>7,} chunks: raw Chroma.add_documents {base:8,.0f} chunks/s ({base1:,.0f} / {base2:,.0f}) | "
          f"KnowledgeBase pre-chunked {passthrough:8,.0f} chunks/s, ratio {passthrough / base:.2f} | "
          f"with token chunking {token:8,.0f} chunks/s, ratio {token / base:.2f}")


def bench_unchanged(files: int = 1000) -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from rag.indexing.knowledge_base import KnowledgeBase

    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus"
        corpus.mkdir()
        for i in range(files):
            (corpus / f"doc{i:04d}.md").write_text(f"# Doc {i}\n\n" + " ".join(rng.choice(WORDS, 300)) + ".\n")
        kb = KnowledgeBase("unchanged", Path(tmp) / "store", embedding=DeterministicFakeEmbedding(size=384))
        start = time.perf_counter()
        kb.add_documents(corpus)
        first = time.perf_counter() - start
        start = time.perf_counter()
        report = kb.add_documents(corpus, cleanup="incremental")
        again = time.perf_counter() - start
        assert not report.changed and len(report.unchanged) == files
        (corpus / "doc0007.md").write_text("# Doc 7\n\nRewritten.\n")
        start = time.perf_counter()
        report = kb.add_documents(corpus, cleanup="incremental")
        one = time.perf_counter() - start
        assert len(report.updated) == 1
        print(f"re-index {files:,} files: first {first:.2f} s, unchanged {again:.3f} s, one file changed {one:.3f} s")


def bench_pdf(filings: int) -> None:
    import pypdfium2 as pdfium

    from rag.indexing.loaders import load_file

    files = sorted(FINANCEBENCH.glob("*.pdf"))[:filings]

    def raw() -> tuple[int, float]:
        start, pages = time.perf_counter(), 0
        for path in files:
            pdf = pdfium.PdfDocument(str(path))
            for i in range(len(pdf)):
                page = pdf[i]
                textpage = page.get_textpage()
                textpage.get_text_range()
                textpage.close()
                page.close()
                pages += 1
            pdf.close()
        return pages, pages / (time.perf_counter() - start)

    def ours() -> tuple[int, float]:
        start = time.perf_counter()
        loaded = sum(len(load_file(path)) for path in files)
        return loaded, pages / (time.perf_counter() - start)

    pages, raw1 = raw()  # also warms the page cache
    loaded, ours1 = ours()
    _, raw2 = raw()
    _, ours2 = ours()
    base, mine = (raw1 + raw2) / 2, (ours1 + ours2) / 2
    print(f"pdf {len(files)} filings, {pages:,} pages ({loaded:,} with text): raw pypdfium2 {base:,.0f} pages/s | "
          f"load_file {mine:,.0f} pages/s | ratio {mine / base:.2f}")


def _real_texts(filings: int) -> list[str]:
    from rag.indexing.autocontext import AutoContext
    from rag.indexing.chunking import TokenChunker
    from rag.indexing.loaders import load_file

    files = sorted(FINANCEBENCH.glob("*.pdf"))[::max(1, 54 // max(filings, 1))][:filings]
    docs = [d for f in files for d in load_file(f)]
    chunks = TokenChunker().split_documents(docs)
    print(f"embedding texts: {len(chunks):,} AutoContext chunks from {', '.join(f.stem for f in files)}")
    return AutoContext().embedding_texts(chunks)


def bench_embedding(filings: int, limit: int) -> None:
    import torch
    from sentence_transformers import SentenceTransformer

    from rag.models.embeddings import minilm_model_path

    texts = _real_texts(filings)[:limit]
    model = SentenceTransformer(str(minilm_model_path()), device="cpu")
    lengths = [min(len(ids), 256) for ids in model.tokenizer(texts)["input_ids"]]
    tokens = sum(lengths)
    print(f"  {len(texts):,} texts, {tokens:,} word pieces (mean {tokens / len(texts):.0f}), "
          f"torch {torch.__version__} threads={torch.get_num_threads()}, cpus={os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    model.encode(texts[:64])  # warm-up
    baseline = None
    for batch in (32, 64, 128):
        cpu, wall = time.process_time(), time.perf_counter()
        vectors = model.encode(texts, batch_size=batch, normalize_embeddings=True)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if baseline is None:
            baseline = vectors
        agreement = float(np.min(np.sum(vectors * baseline, axis=1)))
        print(f"  batch {batch:>3}: {tokens / wall:7,.0f} tokens/s wall, {tokens / cpu * torch.get_num_threads():7,.0f} "
              f"tokens/s per {torch.get_num_threads()} dedicated cores (from CPU time); min cosine vs batch 32 "
              f"{agreement:.6f}")
    # bf16 autocast (AMX / AVX-512 BF16 kernels): the same model, lower-precision matmuls.
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model.encode(texts[:64], batch_size=64)  # warm-up: oneDNN picks its kernels
        cpu, wall = time.process_time(), time.perf_counter()
        vectors = model.encode(texts, batch_size=64, normalize_embeddings=True)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    cosine = np.sum(vectors * baseline, axis=1)
    top = lambda e: np.argsort(-(e @ e.T), axis=1)[:, 1:6]  # noqa: E731
    overlap = np.mean([len(set(a) & set(b)) / 5 for a, b in zip(top(baseline), top(vectors), strict=True)])
    print(f"  bf16 autocast, batch 64: {tokens / wall:7,.0f} tokens/s wall, "
          f"{tokens / cpu * torch.get_num_threads():7,.0f} per {torch.get_num_threads()} dedicated cores; cosine vs "
          f"fp32 min {cosine.min():.5f}, top-5 neighbour overlap {overlap:.3f}")
    padded = sum(max(lengths[i:i + 64]) * len(lengths[i:i + 64]) for i in range(0, len(lengths), 64))
    ordered = sorted(lengths)
    sorted_padded = sum(max(ordered[i:i + 64]) * len(ordered[i:i + 64]) for i in range(0, len(ordered), 64))
    print(f"  padding waste at batch 64: {padded / tokens - 1:.1%} in file order, "
          f"{sorted_padded / tokens - 1:.1%} length-sorted (sentence-transformers sorts)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--filings", type=int, default=3)
    parser.add_argument("--limit", type=int, default=2000, help="most texts to embed")
    parser.add_argument("--skip-embedding", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for n in args.sizes:
        bench_write(n)
    if args.files:
        bench_unchanged(args.files)
    if args.filings:
        bench_pdf(args.filings)
    if not args.skip_embedding:
        bench_embedding(args.filings, args.limit)


if __name__ == "__main__":
    main()
