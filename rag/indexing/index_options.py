"""The options of `rag index`, apart from the command itself so that parsing them imports nothing heavy."""

from __future__ import annotations

import argparse

__all__ = ["EMBEDDING_OPTIONS", "EXECUTOR_OPTIONS", "add_index_arguments"]

EMBEDDING_OPTIONS = ("default", "fake")
EXECUTOR_OPTIONS = ("local", "ray")   # (rag.indexing.executors.EXECUTORS, without importing it)


def add_index_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `rag index` (paths, globs, cleanup, chunking, AutoContext, lock)."""
    parser.add_argument("paths", nargs="+", help="files or directories (txt, md, rst, html, pdf, images, and the types of installed "
                             "rag.loaders plugins), object store URLs (s3://bucket/prefix) or web sites "
                             "(https://site/sitemap.xml, or a page to crawl from); docs/sources.md")
    parser.add_argument("--include", "--glob", dest="include", action="append", default=None,
                        help="glob of files to take under a directory (repeatable; default: all)")
    parser.add_argument("--exclude", action="append", default=[], help="glob of files to leave out (repeatable)")
    parser.add_argument("--cleanup", choices=("incremental", "full", "none"), default="incremental",
                        help="remove documents no longer found: under the given paths (incremental, default), "
                             "anywhere in the collection (full), or never (none)")
    parser.add_argument("--chunk-size", type=int, default=None, help="tokens per chunk (default 200)")
    parser.add_argument("--chunk-overlap", type=int, default=None, help="tokens shared by neighbours (default 30)")
    parser.add_argument("--no-autocontext", action="store_true",
                        help="embed chunks alone, without the title / section / summary header")
    parser.add_argument("--tags", action="store_true", help="store keyword tags per chunk (filter on tag_<word>)")
    parser.add_argument("--follow-symlinks", action="store_true",
                        help="also index what symlinks under the folders point to outside them (default: skip "
                             "them and say so)")
    parser.add_argument("--lock-timeout", type=float, default=0.0,
                        help="seconds to wait for another writer (default: fail at once)")
    parser.add_argument("--embedding", choices=EMBEDDING_OPTIONS, default="default",
                        help="'fake' uses DeterministicFakeEmbedding(384) for tests and benchmarks")
    parser.add_argument("--precision", choices=("auto", "fp32", "bf16", "fp16", "int8"), default=None,
                        help="MiniLM precision for a new knowledge base (default: RAG_EMBEDDING_PRECISION, else "
                             "auto = fp16 on CUDA; on a CPU int8 where it has VNNI and onnxruntime is installed, "
                             "else bf16 with native bfloat16, else fp32); an existing one keeps the precision it "
                             "was built with")
    parser.add_argument("--device", default=None, metavar="DEVICE",
                        help="where MiniLM embeds: auto (default: RAG_EMBEDDING_DEVICE, else CUDA, then MPS, then "
                             "the CPU), cpu, cuda, cuda:N or mps; a device that is not there is an error")
    parser.add_argument("--executor", choices=EXECUTOR_OPTIONS, default="local",
                        help="where loading, chunking and embedding run: this process (local, default) or a Ray "
                             "cluster (ray; pip install 'rag-runnables[ray]'; docs/scale.md)")
    parser.add_argument("--ray-address", default=None,
                        help="the Ray cluster for --executor ray (default: RAY_ADDRESS, else a local Ray started "
                             "for the run with this machine's cores)")
    parser.add_argument("--ray-concurrency", type=int, default=None,
                        help="embedding actors for --executor ray (default: one per CPU of the cluster)")
    parser.add_argument("--ray-batch-size", type=int, default=None,
                        help="chunks per embedding call of an actor for --executor ray (default 256)")
    parser.add_argument("--allow-private", action="store_true",
                        help="web sources: allow loopback and private addresses (an intranet, a local server)")
    parser.add_argument("--max-pages", type=int, default=None,
                        help="web sources: pages listed at most (default 1000)")
    _add_limit_arguments(parser)


def _add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """The per-file cost limits (`rag.indexing.limits.LoadLimits`; defaults in docs/indexing.md)."""
    group = parser.add_argument_group("cost limits per file", "what reading one file may cost; what hits a limit "
                                      "is read more cheaply and printed as a note (docs/indexing.md)")
    group.add_argument("--tables", choices=("pdfium", "pdfplumber", "none"), default=None,
                       help="the table finder for PDF pages that look tabular (default pdfium; pdfplumber is about "
                            "100 times slower; none reads pages as text)")
    group.add_argument("--ocr", action=argparse.BooleanOptionalAction, default=None,
                       help="read PDF pages without text and images by OCR (default: on, when Tesseract is installed)")
    group.add_argument("--table-seconds", type=float, default=None, metavar="S",
                       help="table detection time per file; later pages are read as text (default 120)")
    group.add_argument("--table-page-seconds", type=float, default=None, metavar="S",
                       help="table detection time per page with --tables pdfplumber (default 10)")
    group.add_argument("--table-max-chars", type=int, default=None, metavar="N",
                       help="no table detection on a page with more characters (default 20000)")
    group.add_argument("--table-max-objects", type=int, default=None, metavar="N",
                       help="no table detection on a page with more drawing objects (default 20000)")
    group.add_argument("--ocr-dpi", type=int, default=None, metavar="DPI",
                       help="resolution pages are rendered at for OCR, 50-600 (default 200)")
    group.add_argument("--ocr-max-pages", type=int, default=None, metavar="N",
                       help="pages per file read by OCR; the rest are left out (default 2000)")
    group.add_argument("--ocr-seconds", type=float, default=None, metavar="S",
                       help="OCR time per file; later pages are left out (default 900)")
    group.add_argument("--max-bytes", type=int, default=None, metavar="N",
                       help="larger files are skipped unread (default 268435456, 256 MiB)")
