"""`rag serve` (HTTP) and `rag mcp` (MCP over stdio), on a `--config` file or a `--store`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rag.base.errors import ConfigError
from rag.cli.request import DEFAULT_COLLECTION, DEFAULT_STORE
from rag.cli.store import store_rag

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def served_args(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--config", default=None, help=f"YAML config file to {what} (default: configs/default.yaml)")
    p.add_argument("--store", default=None, help=f"or {what} a knowledge base made by `rag index`, as `rag ask` does")
    p.add_argument("--collection", default=DEFAULT_COLLECTION, help="the --store collection (default: %(default)s)")
    p.add_argument("--backend", default=None, metavar="JSON", help="with --store: as for `rag ask`")


def _served(args: argparse.Namespace, default_config: str | None) -> tuple[Any, Any, str, Any]:
    """`(rag, server settings, title, source roots)` of `--config` or `--store` (the RAG `rag ask` builds)."""
    from rag.config.models import ServerConfig
    if args.config and args.store:
        raise ConfigError("give --config FILE or --store DIR, not both")
    config_path = args.config or (None if args.store else default_config)
    if config_path is None:
        args.store = args.store or DEFAULT_STORE
        print(f"rag {args.command}: opening {args.collection!r} in {args.store} ...", file=sys.stderr)
        return store_rag(args), ServerConfig(), f"rag: {args.collection}", None
    from rag.compose.generator import RAG
    from rag.config.rag_config import load_config
    from rag.server.app import source_roots
    config = load_config(config_path)
    print(f"rag {args.command}: building {config_path} ...", file=sys.stderr)
    built = RAG.from_config(config)
    args.built_config = config   # (its knowledge bases, for the scheduled source syncs of rag serve)
    return built, config.server, f"rag: {Path(config_path).stem}", source_roots(config)


def add_serve(p: argparse.ArgumentParser) -> None:
    served_args(p, "serve")
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


def cmd_serve(args: argparse.Namespace) -> int:
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
    from rag.server.sync_schedule import SyncScheduler, scheduled_syncs

    jobs = scheduled_syncs(getattr(args, "built_config", None))
    syncs = SyncScheduler(jobs) if jobs else None
    app = create_app(rag, settings=settings, title=title, source_roots=roots, syncs=syncs)
    configure_otlp_export()  # when RAG_TRACING or the config's tracing section switched traces on
    print(f"rag serve: http://{args.host}:{args.port}/ (API docs at /docs, MCP at /mcp with the mcp extra)"
          + (f"; syncing {len(jobs)} scheduled source(s) in the background" if jobs else ""), file=sys.stderr)
    print(f"rag serve: answers come from {rag.describe_answerer()}", file=sys.stderr)
    if syncs is not None:
        syncs.start()
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    finally:
        if syncs is not None:
            syncs.stop()
    return 0


def add_mcp(p: argparse.ArgumentParser) -> None:
    served_args(p, "serve")


def cmd_mcp(args: argparse.Namespace) -> int:
    from rag.server.mcp_server import create_mcp_server
    rag, settings, _, roots = _served(args, None)
    create_mcp_server(rag, settings=settings, source_roots=roots).run("stdio")
    return 0
