"""The `rag` command line: `rag index PATH...`, `rag ask "question"`, `rag eval qa`, `rag serve`, `rag mcp`.

Each subcommand is a pair of functions, `add_<name>(parser)` (its arguments) and `cmd_<name>(...)`,
in a module of this package (`ask`: index and ask; `evaluate`; `serve`: serve and mcp; `store`: how a
command opens its knowledge base; `request`: the store options and `rag ask`'s arguments with the typed
request they resolve to), registered in `COMMANDS` with the line `rag --help` shows for it. A command with
a typed request (`rag ask`) has it resolved and validated once, here at the door, and runs on it.
A run builds the arguments of its own subcommand only (`rag ask` never builds `rag index`'s options);
`rag --help` lists every subcommand and `rag <name> --help` is that subcommand's whole help, as when
every parser is built. User mistakes (missing store, bad JSON filter, empty directory)
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
from typing import Any, NamedTuple

from rag.base.errors import RagError
from rag.base.text import terminal_safe
from rag.cli.ask import add_index, cmd_ask, cmd_index
from rag.cli.evaluate import add_eval, cmd_eval
from rag.cli.request import DEFAULT_COLLECTION, DEFAULT_STORE, add_ask, ask_request
from rag.cli.serve import add_mcp, add_serve, cmd_mcp, cmd_serve
from rag.cli.store import open_store_resource, store_rag

__all__ = ["DEFAULT_COLLECTION", "DEFAULT_STORE", "build_parser", "main", "open_store_resource", "store_rag"]


class Command(NamedTuple):
    """A subcommand: its line in `rag --help`, the function adding its arguments, the one running it, and the
    one resolving its arguments into its typed request (run takes the request; None: run takes the arguments)."""

    help: str
    add: Callable[[argparse.ArgumentParser], None]
    run: Callable[[Any], int]
    request: Callable[[argparse.Namespace], Any] | None = None


COMMANDS: dict[str, Command] = {
    "index": Command("index files or directories into a persistent knowledge base", add_index, cmd_index),
    "ask": Command("answer a question from an indexed store", add_ask, cmd_ask, ask_request),
    "eval": Command("run an evaluation (see `rag eval -h`)", add_eval, cmd_eval),
    "serve": Command("serve a config or a store over HTTP: JSON API, streaming, MCP and a web page",
                     add_serve, cmd_serve),
    "mcp": Command("serve search, ask and list_documents as MCP tools over stdio", add_mcp, cmd_mcp),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `rag` parser: every subcommand listed with its help line; the arguments of `command` only when
    one is named (what a run parses), else of every subcommand.

    Example:
        >>> build_parser("ask").parse_args(["ask", "why?", "--k", "3"]).k
        3
    """
    parser = argparse.ArgumentParser(prog="rag", description="Retrieval-augmented generation, offline by default.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, spec in COMMANDS.items():
        subparser = sub.add_parser(name, help=spec.help)
        if command is None or name == command:
            spec.add(subparser)
    return parser


def _command(argv: Sequence[str]) -> str | None:
    """The subcommand `argv` runs: its first word, `rag`'s own parser having no option but `-h` (None when
    that is no subcommand: help, an error or `--`, which the whole parser answers)."""
    return argv[0] if argv and argv[0] in COMMANDS else None


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(_command(argv)).parse_args(argv)
    command = COMMANDS[args.command]
    try:   # the request resolved and validated once, at the door; the command runs on it
        return command.run(command.request(args) if command.request is not None else args)
    except RagError as exc:
        print(f"rag {args.command}: error: {terminal_safe(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"rag {args.command}: interrupted", file=sys.stderr)
        return 130

