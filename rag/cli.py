"""The `rag` command line: `rag index PATH...`, `rag ask "question"`, `rag eval qa`, `rag serve`, `rag mcp`.

Each subcommand is a pair of functions, `_add_<name>(subparsers)` and `_cmd_<name>(args)`,
registered in `COMMANDS`. User mistakes (missing store, bad JSON filter, empty directory)
print one line to stderr and exit 2; no traceback.

The subcommands import what they run inside their `_cmd_` function: the command line is the top
floor (it may import anything), and a command must not pay for another's imports at start-up
(`rag index` never imports the answerer, `rag ask` never the server).

Example:
    $ rag index docs/ --collection docs
    $ rag ask "How do I filter by year?" --k 4 --filter '{"year": {"$gt": 2024}}'
    $ rag eval qa --n 20 --out eval-report/
    $ rag eval financebench --settings single --limit 10
    $ rag serve --store .rag --collection docs --port 8000     (or --config FILE; rag mcp takes both too)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rag.base.errors import ConfigError, FilterError, RagError, StoreError, short_repr
from rag.base.filters import MAX_FILTER_DEPTH
from rag.base.text import terminal_safe

__all__ = ["main"]

DEFAULT_STORE = ".rag"
DEFAULT_COLLECTION = "docs"


def _store_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--collection", default=DEFAULT_COLLECTION, help="collection name (default: %(default)s)")
    parser.add_argument("--store", default=DEFAULT_STORE, help="store directory (default: %(default)s)")
    parser.add_argument("--backend", default=None, metavar="JSON",
                        help='keep the chunks in another store: its config block as JSON, e.g. '
                             '\'{"kind": "pgvector", "url_env": "RAG_PG_URL"}\' (docs/stores.md); the manifest and '
                             'records stay in --store (default: Chroma in --store)')


def backend_opener(args: argparse.Namespace, *, create: bool) -> Callable[[Any], Any] | None:
    """The `--backend` block, validated now, as a function opening that store with an embedding model.

    `create`: make the table or collection when it is missing (indexing); asking never creates.
    """
    if not args.backend:
        return None
    from rag.core.config_knowledge_base import store_config
    from rag.core.config_yaml import load_yaml_text

    # the config's own strict parser (JSON is YAML): a key written twice, deep nesting, aliases refused
    spec = load_yaml_text(args.backend, source="--backend")
    if not isinstance(spec, dict):
        raise ConfigError(f"--backend must be a JSON object such as {{\"kind\": \"pgvector\", \"url_env\": "
                          f"\"RAG_PG_URL\"}}; got {short_repr(args.backend)}")
    return store_config({**spec, "create": create}, args.collection).open


# --------------------------------------------------------------------------- index
def _add_index(sub: Any) -> None:
    from rag.indexing.index_options import add_index_arguments

    p = sub.add_parser("index", help="index files or directories into a persistent knowledge base")
    add_index_arguments(p)
    _store_args(p)


def _cmd_index(args: argparse.Namespace) -> int:
    from rag.indexing.index_command import run_index

    args.open_backend = backend_opener(args, create=True)
    return run_index(args)


# --------------------------------------------------------------------------- ask
def _add_ask(sub: Any) -> None:
    p = sub.add_parser("ask", help="answer a question from an indexed store")
    p.add_argument("question")
    p.add_argument("--search", default="hybrid", choices=("hybrid", "dense", "bm25"),
                   help="how a knowledge base is searched (default: %(default)s: dense + BM25 fused)")
    p.add_argument("--k", type=int, default=None,
                   help="at most this many chunks in the context (default: as many as the token budget holds)")
    p.add_argument("--max-tokens", type=int, default=None,
                   help="the context budget in tokens (default: the recommended pipeline's 4000)")
    p.add_argument("--filter", default=None, help='metadata filter as JSON, e.g. \'{"page": {"$lt": 3}}\'')
    p.add_argument("--json", action="store_true", help="print the whole output as JSON")
    _store_args(p)


def open_store_resource(store: str, collection: str, *, search: str = "hybrid",
                        backend: Callable[[Any], Any] | None = None) -> Any:
    """A `Resource` over an existing knowledge base or persistent collection; a clear error when missing.

    `backend` (from `backend_opener`) opens the store a knowledge base keeps its chunks in, when not Chroma.
    """
    from rag.core.knowledge_base import KnowledgeBase
    from rag.core.resource import Resource
    from rag.indexing.knowledge_base import list_knowledge_bases
    from rag.models.embeddings import default_embeddings
    from rag.stores.chroma import collection_name, new_chroma, open_client

    if backend is not None:   # the knowledge base's manifest and records are in `store`, its chunks elsewhere
        if collection not in list_knowledge_bases(store):
            KnowledgeBase.open(collection, store)   # raises: no such knowledge base, listing those that exist
        return KnowledgeBase.open(collection, store, store=backend(default_embeddings())).as_resource(search=search)
    if collection in list_knowledge_bases(store):   # (one on another backend says how to open it)
        return KnowledgeBase.open(collection, store).as_resource(search=search)
    # Asking never creates: no directory, or a directory without a Chroma store, is an error (not an empty store).
    if not Path(store).is_dir() or not (Path(store) / "chroma.sqlite3").is_file():
        what = "no such directory" if not Path(store).is_dir() else "the directory holds no rag store"
        raise StoreError(f"no store at {store!r} ({what}); create one with: rag index PATH --store {store}")
    client = open_client(store)
    names = [c if isinstance(c, str) else c.name for c in client.list_collections()]
    if collection_name(collection) not in names:
        raise StoreError(f"no collection {collection!r} in {store!r}; available: {', '.join(names) or '(none)'}")
    return Resource.from_vectorstore(collection, new_chroma(collection, default_embeddings(), client=client))


def store_rag(args: argparse.Namespace) -> Any:
    """The `RAG` of `rag ask`, `rag eval qa`, `rag mcp --store` and `rag serve --store`: the store's one chain."""
    from rag.core.generator import RAG
    resource = open_store_resource(args.store, args.collection, search=getattr(args, "search", "hybrid"),
                                   backend=backend_opener(args, create=False))
    return RAG(resources=[resource])


def _cmd_ask(args: argparse.Namespace) -> int:
    from rag.base.filters import validate_filter
    from rag.generation.citations import resolve_citations
    from rag.generation.prompts import source_label

    for flag, value in (("--k", args.k), ("--max-tokens", args.max_tokens)):
        if value is not None and value < 1:
            raise ConfigError(f"{flag} must be a positive integer, got {value}")
    overrides: dict[str, Any] = {key: value for key, value in (("k", args.k), ("max_tokens", args.max_tokens))
                                 if value is not None}
    if args.filter:
        try:
            overrides["filter"] = json.loads(args.filter)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--filter is not valid JSON ({exc.msg} at column {exc.colno}): "
                              f"{short_repr(args.filter)}") from None
        except RecursionError:
            raise FilterError(f"--filter nests too deeply; the limit is {MAX_FILTER_DEPTH} levels") from None
        overrides["filter"] = validate_filter(overrides["filter"])  # reported before the store is opened
    # the chain every door runs; the flags are its per-request settings
    out = store_rag(args).chain().invoke(args.question, config={"configurable": overrides})
    empty = _nothing_found(args) if not out["context"] else None
    if empty:
        print(f"rag ask: {terminal_safe(empty)}", file=sys.stderr)
    # file names and document text may hold escape codes and newlines: nothing reaches the terminal raw
    if args.json:
        payload = {**out, "context": [{"page_content": d.page_content, "metadata": d.metadata} for d in out["context"]]}
        print(terminal_safe(json.dumps(payload, indent=2, ensure_ascii=False, default=str), json_text=True))
        return 0
    print(terminal_safe(out["answer"], newlines=True))
    if empty:
        print(f"\nSources: none ({terminal_safe(empty)})")
        return 0
    cited = set(resolve_citations(out["answer"], out["context"]).cited)
    labels = {i: terminal_safe(source_label(doc)) for i, doc in enumerate(out["context"], start=1)}
    if cited:
        print("\nSources cited:")
        print("\n".join(f"  [{n}] {labels[n]}" for n in sorted(cited)))
    rest = [n for n in labels if n not in cited]
    if rest:
        print("\nRetrieved, not used:" if cited else "\nRetrieved (none cited):")
        print("\n".join(f"  [{n}] {labels[n]}" for n in rest))
    return 0


def _nothing_found(args: argparse.Namespace) -> str:
    """Why `rag ask` found no chunk: the filter matched none, or the collection is empty."""
    if args.filter:
        return (f"no chunk in collection {args.collection!r} matches --filter {short_repr(args.filter)}; "
                "check the metadata keys and values (rag ask --json shows a chunk's metadata)")
    return f"collection {args.collection!r} in {args.store} has no chunks; add some with: rag index PATH"


# --------------------------------------------------------------------------- eval
def _add_eval_qa(sub: Any) -> None:
    p = sub.add_parser("qa", help="generate QA items from an indexed store and score retrieval, support and citations")
    p.add_argument("--evals", default=None,
                   help="JSONL of QA items; read if it exists, else generated and written there "
                        "(default: OUT/evals.jsonl)")
    p.add_argument("--n", type=int, default=20, help="items to generate when there is no evals file (default: %(default)s)")
    p.add_argument("--k", type=int, default=5, help="chunks to retrieve and metric cut-off (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the chunk sample (default: %(default)s)")
    p.add_argument("--lexical-support", action="store_true",
                   help="score support lexically only (no embedding model)")
    p.add_argument("--out", default="eval-report", help="report directory (default: %(default)s, in .gitignore)")
    _store_args(p)


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
                   help="page texts and embeddings cache (default: %(default)s)")
    p.add_argument("--out", default="bench/results", help="where the md/json/png go (default: %(default)s)")
    p.add_argument("--settings", default="single,shared", help="comma-separated: single, shared (default: %(default)s)")
    p.add_argument("--configs", default=None, help="comma-separated configuration names (default: all)")
    p.add_argument("--list-configs", action="store_true", help="print the configurations and exit")
    p.add_argument("--limit", type=int, default=None, help="only the first N questions")
    p.add_argument("--budget", type=int, default=4000, help="context budget in tokens (default: %(default)s)")
    p.add_argument("--chunk-size", type=int, default=1000, help="chunk size in characters (default: %(default)s)")
    p.add_argument("--no-chart", action="store_true", help="skip the PNG chart")


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
    _, paths = run_financebench(
        data_dir=args.data, cache_dir=args.cache_dir, out_dir=args.out,
        settings=[s.strip() for s in args.settings.split(",") if s.strip()],
        configs=[c.strip() for c in args.configs.split(",") if c.strip()] if args.configs else None,
        limit=args.limit, budget=args.budget, chunk_size=args.chunk_size, chart=not args.no_chart,
        progress=lambda line: print(terminal_safe(line), file=sys.stderr, flush=True))
    print("wrote " + terminal_safe(", ".join(str(p) for p in paths)))
    return 0


#: `rag eval <name>`: each evaluation is an `(_add, _cmd)` pair like the top-level commands.
EVALUATIONS: dict[str, tuple[Callable[[Any], None], Callable[[argparse.Namespace], int]]] = {
    "qa": (_add_eval_qa, _cmd_eval_qa),
    "financebench": (_add_eval_financebench, _cmd_eval_financebench),
}


def _add_eval(sub: Any) -> None:
    p = sub.add_parser("eval", help="run an evaluation (see `rag eval -h`)")
    evals = p.add_subparsers(dest="eval_command", required=True, metavar="EVALUATION")
    for add, _ in EVALUATIONS.values():
        add(evals)


def _cmd_eval(args: argparse.Namespace) -> int:
    return EVALUATIONS[args.eval_command][1](args)


# --------------------------------------------------------------------------- serve
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _served_args(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--config", default=None, help=f"YAML config file to {what} (default: configs/default.yaml)")
    p.add_argument("--store", default=None, help=f"or {what} a knowledge base made by `rag index`, as `rag ask` does")
    p.add_argument("--collection", default=DEFAULT_COLLECTION, help="the --store collection (default: %(default)s)")
    p.add_argument("--backend", default=None, metavar="JSON", help="with --store: as for `rag ask`")


def _served(args: argparse.Namespace, default_config: str | None) -> tuple[Any, Any, str, Any]:
    """`(rag, server settings, title, source roots)` of `--config` or `--store` (the RAG `rag ask` builds)."""
    from rag.core.config_models import ServerConfig
    if args.config and args.store:
        raise ConfigError("give --config FILE or --store DIR, not both")
    config_path = args.config or (None if args.store else default_config)
    if config_path is None:
        args.store = args.store or DEFAULT_STORE
        print(f"rag {args.command}: opening {args.collection!r} in {args.store} ...", file=sys.stderr)
        return store_rag(args), ServerConfig(), f"rag: {args.collection}", None
    from rag.core.config import load_config
    from rag.core.generator import RAG
    from rag.server.app import source_roots
    config = load_config(config_path)
    print(f"rag {args.command}: building {config_path} ...", file=sys.stderr)
    return RAG.from_config(config), config.server, f"rag: {Path(config_path).stem}", source_roots(config)


def _add_serve(sub: Any) -> None:
    p = sub.add_parser("serve", help="serve a config or a store over HTTP: JSON API, streaming, MCP and a web page")
    _served_args(p, "serve")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default: %(default)s, loopback only)")
    p.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])


def _allow_bound_host(server: Any, host: str) -> None:
    """Answer the address the server is bound to; say so when clients' names must be configured."""
    allowed = server.allowed_hosts
    if "*" in allowed:
        return
    if host in ("0.0.0.0", "::", ""):
        print(f"rag serve: note: only requests addressed to {', '.join(allowed)} are answered (DNS rebinding "
              "protection); list the names clients use in server.allowed_hosts", file=sys.stderr)
    elif host.lower().strip("[]") not in allowed:
        allowed.append(host.lower().strip("[]"))


def _cmd_serve(args: argparse.Namespace) -> int:
    import os

    try:
        import uvicorn
    except ImportError as exc:
        from rag.base.errors import MissingDependencyError

        raise MissingDependencyError.for_extra("uvicorn", "server", "rag serve") from exc
    from rag.base.tracing_export import configure_otlp_export
    from rag.server.app import create_app

    if not 0 < args.port < 65536:
        raise ConfigError(f"--port must be in 1..65535, got {args.port}")
    rag, settings, title, roots = _served(args, "configs/default.yaml")
    if args.host not in _LOOPBACK and not os.environ.get(settings.auth_token_env):
        print(f"rag serve: warning: listening on {args.host} without a token; set {settings.auth_token_env} "
              "to require 'Authorization: Bearer <token>'", file=sys.stderr)
    _allow_bound_host(settings, args.host)
    app = create_app(rag, settings=settings, title=title, source_roots=roots)
    configure_otlp_export()  # when RAG_TRACING or the config's tracing section switched traces on
    print(f"rag serve: http://{args.host}:{args.port}/ (API docs at /docs, MCP at /mcp with the mcp extra)",
          file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


# --------------------------------------------------------------------------- mcp
def _add_mcp(sub: Any) -> None:
    _served_args(sub.add_parser("mcp", help="serve search, ask and list_documents as MCP tools over stdio"), "serve")


def _cmd_mcp(args: argparse.Namespace) -> int:
    from rag.server.mcp_server import create_mcp_server
    rag, settings, _, roots = _served(args, None)
    create_mcp_server(rag, settings=settings, source_roots=roots).run("stdio")
    return 0


COMMANDS: dict[str, tuple[Callable[[Any], None], Callable[[argparse.Namespace], int]]] = {
    "index": (_add_index, _cmd_index),
    "ask": (_add_ask, _cmd_ask),
    "eval": (_add_eval, _cmd_eval),
    "serve": (_add_serve, _cmd_serve),
    "mcp": (_add_mcp, _cmd_mcp),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rag", description="Retrieval-augmented generation, offline by default.")
    sub = parser.add_subparsers(dest="command", required=True)
    for add, _ in COMMANDS.values():
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command][1](args)
    except RagError as exc:
        print(f"rag {args.command}: error: {terminal_safe(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"rag {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
