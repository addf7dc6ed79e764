"""`rag index PATH...` and `rag ask QUESTION`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rag.base.errors import ConfigError, FilterError, short_repr
from rag.base.filters import MAX_FILTER_DEPTH
from rag.base.text import terminal_safe
from rag.cli.store import backend_opener, store_args, store_rag


def add_index(p: argparse.ArgumentParser) -> None:
    from rag.indexing.index_options import add_index_arguments

    add_index_arguments(p)
    store_args(p)


def cmd_index(args: argparse.Namespace) -> int:
    from rag.indexing.index_command import run_index

    args.open_backend = backend_opener(args, create=True)
    return run_index(args)


def add_ask(p: argparse.ArgumentParser) -> None:
    p.add_argument("question")
    p.add_argument("--search", default="hybrid", choices=("hybrid", "dense", "bm25"),
                   help="how a knowledge base is searched (default: %(default)s: dense + BM25 fused)")
    p.add_argument("--k", type=int, default=None,
                   help="at most this many chunks in the context (default: as many as the token budget holds)")
    p.add_argument("--max-tokens", type=int, default=None,
                   help="the context budget in tokens (default: the recommended pipeline's 4000)")
    p.add_argument("--filter", default=None, help='metadata filter as JSON, e.g. \'{"page": {"$lt": 3}}\'')
    p.add_argument("--json", action="store_true", help="print the whole output as JSON")
    store_args(p)


def cmd_ask(args: argparse.Namespace) -> int:
    from rag.base.filters import validate_filter
    from rag.base.answer import as_answer, flag_notes
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
    rag = store_rag(args)
    out = rag.chain().invoke(args.question, config={"configurable": overrides})
    answer = as_answer(out["answer"])
    empty = _nothing_found(args, rag) if not out["context"] else None
    if empty:
        print(f"rag ask: {terminal_safe(empty)}", file=sys.stderr)
    # file names and document text may hold escape codes and newlines: nothing reaches the terminal raw
    if args.json:
        extras = {k: v for k, v in out.items() if k not in ("question", "answer", "context")}
        payload = {"question": out["question"], **answer.fields(), **extras,
                   "context": [{"page_content": d.page_content, "metadata": d.metadata} for d in out["context"]]}
        print(terminal_safe(json.dumps(payload, indent=2, ensure_ascii=False, default=str), json_text=True))
        return 0
    print(terminal_safe(answer.text, newlines=True))
    if answer.passage:
        shown = answer.passage
        print(f"\nClosest passage [{shown['n']}] {terminal_safe(str(shown.get('label') or ''))}:")
        print(f"  {terminal_safe(str(shown.get('text') or ''), newlines=True)}")
    for note in flag_notes(answer):
        print(f"Note: {note}.")
    if empty:
        print(f"\nSources: none ({terminal_safe(empty)})")
    else:
        cited = set(answer.cited)
        labels = {i: terminal_safe(source_label(doc)) for i, doc in enumerate(out["context"], start=1)}
        if cited:
            print("\nSources cited:")
            print("\n".join(f"  [{n}] {labels[n]}" for n in sorted(cited)))
        rest = [n for n in labels if n not in cited]
        if rest:
            print("\nRetrieved, not used:" if cited else "\nRetrieved (none cited):")
            print("\n".join(f"  [{n}] {labels[n]}" for n in rest))
    print(f"\nAnswered by {terminal_safe(answer.answerer or rag.describe_answerer())}.")
    return 0


def _nothing_found(args: argparse.Namespace, rag: Any) -> str:
    """Why `rag ask` found no chunk: the filter matched none, no chunk holds the question's words (BM25), or the
    collection is empty."""
    if args.filter:
        return (f"no chunk in collection {args.collection!r} matches --filter {short_repr(args.filter)}; "
                "check the metadata keys and values (rag ask --json shows a chunk's metadata)")
    held = _chunks_held(rag)
    if held and getattr(args, "search", None) == "bm25":
        return (f"no chunk of the {held:,} in collection {args.collection!r} contains any of the question's words "
                "(--search bm25 matches words, not meanings); rephrase, or use --search hybrid")
    if held:
        return f"no chunk of the {held:,} in collection {args.collection!r} was found for the question"
    return f"collection {args.collection!r} in {args.store} has no chunks; add some with: rag index PATH"


def _chunks_held(rag: Any) -> int:
    """How many chunks the resources hold (their chunk sources' counts; 0 when none can say)."""
    from rag.compose.pipeline import chunk_source

    counts = [getattr(chunk_source(resource), "count", None) for resource in rag.resources]
    return sum(count() for count in counts if callable(count))
