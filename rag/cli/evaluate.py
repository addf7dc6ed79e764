"""`rag eval qa` and `rag eval financebench`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rag.base.errors import ConfigError
from rag.base.text import terminal_safe
from rag.cli.request import backend_opener, store_args
from rag.cli.store import store_rag


def _add_eval_qa(sub: Any) -> None:
    p = sub.add_parser("qa", help="generate QA items from an indexed store and score retrieval, support and citations")
    p.add_argument("--evals", default=None,
                   help="JSONL of QA items; read if it exists, else generated and written there "
                        "(default: OUT/evals.jsonl)")
    p.add_argument("--n", type=int, default=20, help="items to generate when there is no evals file (default: %(default)s)")
    p.add_argument("--k", type=int, default=5,
                   help="at most this many chunks in each answer's context, as rag ask --k, and the metric cut-off "
                        "(default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the chunk sample (default: %(default)s)")
    p.add_argument("--lexical-support", action="store_true",
                   help="score support lexically only (no embedding model)")
    p.add_argument("--out", default="eval-report", help="report directory (default: %(default)s, in .gitignore)")
    store_args(p)


def _cmd_eval_qa(args: argparse.Namespace) -> int:
    from rag.evaluation.qa_evals import build_qa_evals, load_qa_evals, run_qa_evals
    from rag.evaluation.qa_report import require_chart, write_qa_report

    require_chart()  # before the store is opened and the questions are answered
    if args.n < 1 or args.k < 1:
        raise ConfigError(f"--n and --k must be positive integers, got --n {args.n} --k {args.k}")
    rag = store_rag(args)   # the pipeline `rag ask` runs
    evals_path = Path(args.evals) if args.evals else Path(args.out) / "evals.jsonl"
    if evals_path.exists():
        evals = load_qa_evals(evals_path)
        print(f"read {len(evals)} QA item(s) from {evals_path}", file=sys.stderr)
    else:
        evals = build_qa_evals(rag.resources[0], n=args.n, seed=args.seed, path=evals_path)
        print(f"wrote {len(evals)} QA item(s) to {evals_path}", file=sys.stderr)
    report = run_qa_evals(rag, evals, k=args.k, embedding=None if args.lexical_support else "default")
    path = write_qa_report(report, args.out, title=f"QA evaluation of {args.store} ({args.collection})")
    for name, value in report.metrics.items():
        print(f"{name:>20}: {'n/a' if value is None else value if isinstance(value, int) else f'{value:.3f}'}")
    print(f"report: {path}")
    return 0


def _add_eval_financebench(sub: Any) -> None:
    p = sub.add_parser("financebench", help="retrieval benchmark on FinanceBench filings (context hit rate)")
    p.add_argument("--data", default=None,
                   help="data directory (default: $RAG_FINANCEBENCH_DIR or ../shared/data/financebench)")
    p.add_argument("--cache-dir", default="bench/results/cache",
                   help="the benchmark's knowledge bases and embedding cache (default: %(default)s)")
    p.add_argument("--out", default="bench/results", help="where the md/json/png go (default: %(default)s)")
    p.add_argument("--settings", default="single,shared", help="comma-separated: single, shared (default: %(default)s)")
    p.add_argument("--configs", default=None, help="comma-separated configuration names (default: all)")
    p.add_argument("--list-configs", action="store_true", help="print the configurations and exit")
    p.add_argument("--limit", type=int, default=None, help="only the first N questions")
    p.add_argument("--budget", type=int, default=4000, help="context budget in tokens (default: %(default)s)")
    p.add_argument("--chunk-size", type=int, default=1000, help="chunk size in characters (default: %(default)s)")
    p.add_argument("--no-chart", action="store_true", help="skip the PNG chart")
    p.add_argument("--backend", default=None, metavar="JSON",
                   help='the default rows\' knowledge base in another store, as `rag index --backend` takes it, e.g. '
                        '\'{"kind": "pgvector", "url_env": "RAG_PG_URL"}\' (default: Chroma in --cache-dir)')


def _cmd_eval_financebench(args: argparse.Namespace) -> int:
    from rag.evaluation.financebench_default import DESCRIPTIONS
    from rag.evaluation.financebench_pipelines import CONFIGURATIONS, run_financebench

    if args.list_configs:
        for name, (description, _) in CONFIGURATIONS.items():
            print(f"{name:24s} {description}")
        for name, description in DESCRIPTIONS.items():
            print(f"{name:24s} {description}")
        return 0
    for flag in ("limit", "budget", "chunk_size"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise ConfigError(f"--{flag.replace('_', '-')} must be a positive integer, got {value}")
    args.collection = "financebench"   # (the table or collection --backend names when it names none)
    _, paths = run_financebench(
        data_dir=args.data, cache_dir=args.cache_dir, out_dir=args.out, backend=backend_opener(args, create=True),
        settings=[s.strip() for s in args.settings.split(",") if s.strip()],
        configs=[c.strip() for c in args.configs.split(",") if c.strip()] if args.configs else None,
        limit=args.limit, budget=args.budget, chunk_size=args.chunk_size, chart=not args.no_chart,
        progress=lambda line: print(terminal_safe(line), file=sys.stderr, flush=True))
    print("wrote " + terminal_safe(", ".join(str(p) for p in paths)))
    return 0


EVALUATIONS: dict[str, tuple[Callable[[Any], None], Callable[[argparse.Namespace], int]]] = {
    "qa": (_add_eval_qa, _cmd_eval_qa),
    "financebench": (_add_eval_financebench, _cmd_eval_financebench),
}


def add_eval(p: argparse.ArgumentParser) -> None:
    evals = p.add_subparsers(dest="eval_command", required=True, metavar="EVALUATION")
    for add, _ in EVALUATIONS.values():
        add(evals)


def cmd_eval(args: argparse.Namespace) -> int:
    return EVALUATIONS[args.eval_command][1](args)
