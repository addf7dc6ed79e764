"""The `rag` command line: `rag index PATH...`, `rag ask "question"`, `rag eval qa`, `rag serve`, `rag mcp`.

Each subcommand is a pair of functions, `add_<name>(subparsers)` and `cmd_<name>(args)`, in a
module of this package (`ask`: index and ask; `evaluate`; `serve`: serve and mcp; `store`: how a
command finds its knowledge base), registered in `COMMANDS`. User mistakes (missing store, bad JSON filter, empty directory)
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
import sys
from collections.abc import Callable, Sequence
from typing import Any

from rag.base.errors import RagError
from rag.base.text import terminal_safe
from rag.cli.ask import add_ask, add_index, cmd_ask, cmd_index
from rag.cli.evaluate import add_eval, cmd_eval
from rag.cli.serve import add_mcp, add_serve, cmd_mcp, cmd_serve
from rag.cli.store import DEFAULT_COLLECTION, DEFAULT_STORE, open_store_resource, store_rag

__all__ = ["DEFAULT_COLLECTION", "DEFAULT_STORE", "build_parser", "main", "open_store_resource", "store_rag"]

COMMANDS: dict[str, tuple[Callable[[Any], None], Callable[[argparse.Namespace], int]]] = {
    "index": (add_index, cmd_index),
    "ask": (add_ask, cmd_ask),
    "eval": (add_eval, cmd_eval),
    "serve": (add_serve, cmd_serve),
    "mcp": (add_mcp, cmd_mcp),
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

