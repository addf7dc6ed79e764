"""Embedding benchmark of the local all-MiniLM-L6-v2 per precision: speed and retrieval quality.

For each mode (sentence-transformers fp32 / bf16 / autocast, the NumPy encoder, ONNX Runtime fp32 /
int8, the default embedder) on real text (FinanceBench filings, pypdfium2 text, or this project's
docs/ with `--docs`: the indexing path's token chunks with their AutoContext headers), prints:

- chunks per second per round and its ratio to the first mode (the modes alternate within a round);
- word pieces per second, wall clock and per CPU-second (x2 = "per 2 dedicated cores"), the modes
  interleaved in one process so load from other processes hits them alike, with the load average;
- agreement with fp32: min / mean cosine and top-5 nearest-neighbour overlap among the chunks;
- FinanceBench dense retrieval on the questions of the chosen filings: context hit@5 (a top-5 chunk
  is on a gold evidence page) within the question's own filing and in the pooled store, and MRR@10.

Usage:
    python bench/embedding.py --speed-texts 600                  # speed + agreement (a few minutes)
    python bench/embedding.py --retrieval --modes fp32 bf16      # + FinanceBench subset (slow)
    python bench/embedding.py --modes fp32 numpy numpy1          # torch against the NumPy encoder
    python bench/embedding.py --docs --modes fp32 numpy onnx int8 default --index /work/main
        # issue 38: every CPU path against plain sentence-transformers fp32 on docs/ chunks, per round, then
        # `rag index` of docs/ with the code at /work/main against this checkout, alternating
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATA = Path(os.environ.get("RAG_FINANCEBENCH_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data" / "financebench")
#: Filings with several questions and few pages: 40 questions on 686 pages.
RETRIEVAL_FILINGS = ("BOEING_2022_10K", "ULTABEAUTY_2023Q4_EARNINGS", "AMCOR_2023_10K",
                     "JOHNSON_JOHNSON_2023_8K_dated-2023-08-30", "BESTBUY_2024Q2_10Q", "Pfizer_2023Q2_10Q",
                     "BESTBUY_2023_10K", "AMCOR_2023Q4_EARNINGS", "PEPSICO_2023Q1_EARNINGS",
                     "JOHNSON_JOHNSON_2022Q4_EARNINGS", "FOOTLOCKER_2022_8K_dated-2022-05-20",
                     "PEPSICO_2023_8K_dated-2023-05-05", "AMCOR_2022_8K_dated-2022-07-01",
                     "JOHNSON_JOHNSON_2023Q2_EARNINGS", "FOOTLOCKER_2022_8K_dated_2022-08-19")
Encoder = Callable[[Sequence[str]], np.ndarray]


def chunks_of(filings: Sequence[str]) -> list:
    """The indexing path's chunks (TokenChunker, zero-based `page`) of the named filings."""
    from rag.indexing.chunking import TokenChunker
    from rag.indexing.loaders import load_file

    docs = [d for name in filings for d in load_file(DATA / "pdfs" / f"{name}.pdf", tables=False)]
    return TokenChunker().split_documents(docs)


def torch_encoders(modes: Sequence[str], *, batch_size: int) -> dict[str, Encoder]:
    """fp32 / bf16 (the `precision="bf16"` option) / autocast (fp32 weights, bf16 matmuls) / numpy / numpy1 /
    onnx / int8 / default.

    `fp32` is plain sentence-transformers fp32 on the CPU; `numpy` is the NumPy forward pass
    (`rag.models.minilm_numpy`) on every CPU, `numpy1` on one thread; `onnx` and `int8` ONNX Runtime
    (`rag.models.minilm_onnx`); `default` the default embedder's document path on this machine.
    """
    import torch

    from rag.models.embeddings import minilm_embeddings

    out: dict[str, Encoder] = {}
    for mode in modes:
        if mode in ("fp32", "bf16"):
            emb = minilm_embeddings(precision=mode, batch_size=batch_size, device="cpu")
            out[mode] = lambda texts, emb=emb: np.asarray(emb.embed_documents(list(texts)), dtype=np.float32)
        elif mode == "autocast":
            emb = minilm_embeddings(precision="fp32", batch_size=batch_size, device="cpu")

            def autocast(texts: Sequence[str], emb: object = emb) -> np.ndarray:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    return np.asarray(emb.embed_documents(list(texts)), dtype=np.float32)

            out[mode] = autocast
        elif mode == "default":   # what `rag index` embeds documents with on this machine now
            from rag.models.embeddings import default_embeddings

            emb = default_embeddings()
            print(f"default embedder: {emb!r}, id {getattr(emb, 'model_id', '?')}")
            out[mode] = lambda texts, emb=emb: np.asarray(emb.embed_documents(list(texts)), dtype=np.float32)
        elif mode in ("onnx", "int8"):   # rag.models.minilm_onnx, as MiniLMEmbeddings runs it
            from rag.models.embeddings import MiniLMEmbeddings

            emb = MiniLMEmbeddings(precision="int8" if mode == "int8" else "fp32", documents="onnx",
                                   batch_size=batch_size, device="cpu")
            out[mode] = lambda texts, emb=emb: np.asarray(emb.embed_documents(list(texts)), dtype=np.float32)
        elif mode in ("numpy", "numpy1"):  # rag.models.minilm_numpy: all CPUs, or one worker thread
            from rag.models.embeddings import numpy_minilm

            workers = 1 if mode == "numpy1" else None
            out[mode] = lambda texts, w=workers: numpy_minilm().encode(list(texts), batch_size=batch_size, workers=w)
    return out


def word_pieces(texts: Sequence[str]) -> int:
    from rag.indexing.tokens import WordPieceTokenizer

    # offsets exclude [CLS]/[SEP]; the model sees at most 256 word pieces including them
    return sum(min(len(o) + 2, 256) for o in WordPieceTokenizer().offsets(list(texts)))


def top_k(vectors: np.ndarray, k: int = 5) -> np.ndarray:
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    return np.argsort(-sims, axis=1)[:, :k]


def bench_speed(encoders: dict[str, Encoder], texts: list[str], *, rounds: int) -> dict[str, np.ndarray]:
    """Tokens/s per mode (best of `rounds`, modes interleaved) and agreement with the first mode."""
    import torch

    tokens = word_pieces(texts)
    print(f"speed: {len(texts):,} chunks, {tokens:,} word pieces (mean {tokens / len(texts):.0f}), "
          f"torch threads {torch.get_num_threads()}, {os.cpu_count()} CPUs, load {_load()}")
    best: dict[str, tuple[float, float]] = {}
    vectors: dict[str, np.ndarray] = {}
    for enc in encoders.values():
        enc(texts[:32])  # warm-up: kernels chosen, weights paged in
    first = next(iter(encoders))
    for round_ in range(rounds):
        walls = {}
        for name, enc in encoders.items():
            cpu, wall = time.process_time(), time.perf_counter()
            vectors[name] = enc(texts)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            walls[name] = wall
            old = best.get(name, (0.0, 0.0))
            best[name] = (max(old[0], tokens / wall), max(old[1], tokens / cpu))
        print(f"  round {round_ + 1}: chunks/s " + ", ".join(
            f"{name} {len(texts) / w:.1f} ({walls[first] / w:.2f}x {first})" for name, w in walls.items())
            + f"; load {_load()}", flush=True)
    base_name = next(iter(vectors))
    base, base_top = vectors[base_name], top_k(vectors[base_name])
    for name, (wall, per_cpu) in best.items():
        cos = np.sum(vectors[name] * base, axis=1)
        overlap = np.mean([len(set(a) & set(b)) / 5 for a, b in zip(base_top, top_k(vectors[name]), strict=True)])
        print(f"  {name:10s} {wall:7,.0f} tokens/s wall | {per_cpu:7,.0f} per CPU-second "
              f"({2 * per_cpu:7,.0f} per 2 cores) | vs {base_name}: cosine min {cos.min():.5f} "
              f"mean {cos.mean():.6f}, top-5 neighbours {overlap:.2%}")
    print(f"  load after: {_load()}")
    return vectors


def bench_retrieval(encoders: dict[str, Encoder], filings: Sequence[str]) -> None:
    """FinanceBench context hit@5 and MRR@10 per mode on the questions of `filings`."""
    from rag.evaluation.financebench import FinanceBenchData
    from rag.indexing.autocontext import AutoContext

    questions = [q for q in FinanceBenchData.load(DATA).questions if q.doc_name in set(filings)]
    chunks = chunks_of(filings)
    texts = AutoContext().embedding_texts(chunks)
    keys = [(Path(c.metadata["source"]).stem, int(c.metadata.get("page", -1))) for c in chunks]
    owner = np.array([k[0] for k in keys])
    print(f"retrieval: {len(questions)} questions on {len(filings)} filings, {len(chunks):,} chunks "
          f"({word_pieces(texts):,} word pieces)")
    first_hits: dict[str, list[int]] = {}
    for name, enc in encoders.items():
        start = time.perf_counter()
        docs, queries = enc(texts), enc([q.question for q in questions])
        single, ranks = 0, []
        for q, qv in zip(questions, queries, strict=True):
            ranked = np.argsort(-(docs @ qv))
            own = [i for i in ranked if owner[i] == q.doc_name]
            single += any(keys[i] in q.evidence_pages for i in own[:5])
            ranks.append(next((r for r, i in enumerate(ranked[:50]) if keys[i] in q.evidence_pages), 99))
        n, first_hits[name] = len(questions), ranks
        hits = " ".join(f"@{k} {sum(r < k for r in ranks) / n:.1%}" for k in (1, 3, 5, 10))
        mrr = sum(1 / (r + 1) for r in ranks if r < 10) / n
        print(f"  {name:10s} hit@5 own filing {single / n:.1%} | pooled hit{hits} | MRR@10 {mrr:.3f} | "
              f"{time.perf_counter() - start:.0f} s, load {_load()}")
    base = next(iter(first_hits.values()))
    for name, ranks in list(first_hits.items())[1:]:
        moved = [(q.id, a + 1, b + 1) for q, a, b in zip(questions, base, ranks, strict=True) if a != b]
        print(f"  {name}: first gold rank differs from the reference on {len(moved)} of {len(questions)} "
              f"questions: {moved}")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def docs_texts() -> list[str]:
    """The embedded texts (AutoContext header + chunk) of this project's docs/*.md, as `rag index docs` makes them."""
    from rag.indexing.autocontext import AutoContext
    from rag.indexing.chunking import TokenChunker
    from rag.indexing.loaders import load_file

    root = Path(__file__).resolve().parents[1]
    docs = [d for path in sorted((root / "docs").glob("*.md")) for d in load_file(path)]
    return AutoContext().embedding_texts(TokenChunker().split_documents(docs))


def bench_index(baseline: str, *, rounds: int, include: str) -> None:
    """`rag index docs` into a new store: the `baseline` checkout's code against this one, alternating.

    Each run is a fresh process (imports and model load included), so the ratio is what a user sees.
    """
    import re
    import subprocess

    root = Path(__file__).resolve().parents[1]
    rates: dict[str, list[float]] = {"baseline": [], "this": []}
    with tempfile.TemporaryDirectory(prefix="bench-index-") as tmp:
        for round_ in range(rounds):
            for side, code in (("baseline", baseline), ("this", str(root))):
                store = Path(tmp) / f"{side}-{round_}"
                env = {**os.environ, "PYTHONPATH": code, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
                start = time.perf_counter()
                run = subprocess.run([sys.executable, "-m", "rag.cli", "index", str(root / "docs"), "--include",
                                      include, "--collection", "docs", "--store", str(store)],
                                     capture_output=True, text=True, env=env, cwd=tmp, check=True)
                wall = time.perf_counter() - start
                chunks = int(re.search(r"(\d+) chunk\(s\) written", run.stderr).group(1))
                rates[side].append(chunks / wall)
                shown = re.search(r"(\d[\d,.]* chunks/s[^;]*)", run.stderr)
                print(f"  rag index, {side:8s} round {round_ + 1}: {chunks} chunks in {wall:.1f} s = "
                      f"{chunks / wall:.2f} chunks/s{' (it says: ' + shown.group(1) + ')' if shown else ''}; "
                      f"load {_load()}", flush=True)
    pairs = [f"{t / b:.2f}" for b, t in zip(rates["baseline"], rates["this"], strict=True)]
    print(f"  rag index chunks/s, this / baseline per round: {', '.join(pairs)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", nargs="*", default=["fp32", "default"],
                        help="modes: fp32 bf16 autocast (torch), numpy numpy1 (NumPy), onnx int8 (ONNX Runtime), "
                             "default (the default embedder's documents); the first is the reference")
    parser.add_argument("--docs", action="store_true", help="speed texts from this project's docs/ instead of "
                        "FinanceBench filings")
    parser.add_argument("--index", metavar="BASELINE", default=None,
                        help="also `rag index docs` side by side: the checkout at BASELINE (e.g. /work/main) "
                             "against this one, alternating --rounds times")
    parser.add_argument("--index-include", default="[a-m]*.md", help="docs/ files the --index runs take")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--speed-texts", type=int, default=600, help="chunks for the speed test (0: skip)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--filings", nargs="*", default=["3M_2022_10K", "CORNING_2020_10K", "MGMRESORTS_2018_10K"])
    parser.add_argument("--retrieval", action="store_true", help="FinanceBench subset retrieval per mode")
    args = parser.parse_args()
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    encoders = torch_encoders(args.modes, batch_size=args.batch_size)
    if args.speed_texts:
        from rag.indexing.autocontext import AutoContext

        texts = docs_texts() if args.docs else AutoContext().embedding_texts(chunks_of(args.filings))
        rng = np.random.default_rng(0)
        pick = sorted(rng.choice(len(texts), min(args.speed_texts, len(texts)), replace=False))
        bench_speed(encoders, [texts[i] for i in pick], rounds=args.rounds)
    if args.retrieval:
        bench_retrieval(encoders, RETRIEVAL_FILINGS)
    if args.index:
        bench_index(args.index, rounds=args.rounds, include=args.index_include)


if __name__ == "__main__":
    main()
