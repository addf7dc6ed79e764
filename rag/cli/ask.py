"""`rag index PATH...` and `rag ask QUESTION` (its arguments and request: `rag.cli.request`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rag.base.errors import short_repr
from rag.base.text import terminal_safe
from rag.cli.request import AskRequest, backend_opener, store_args
from rag.cli.store import store_rag


def add_index(p: argparse.ArgumentParser) -> None:
    from rag.indexing.index_options import add_index_arguments

    add_index_arguments(p)
    store_args(p)


def cmd_index(args: argparse.Namespace) -> int:
    from rag.indexing.index_command import run_index

    args.open_backend = backend_opener(args, create=True)
    return run_index(args)


def cmd_ask(request: AskRequest) -> int:
    """Answer `request` (resolved once at the door, `rag.cli.request.ask_request`): open its store, build the
    chain once, run it with the request's settings, print."""
    from rag.base.answer import as_answer, flag_notes
    from rag.generation.prompts import source_label

    # the chain every door runs; the flags are its per-request settings
    rag = store_rag(request.store)
    out = rag.chain().invoke(request.question, config={"configurable": dict(request.settings)})
    answer = as_answer(out["answer"])
    empty = _nothing_found(request, rag) if not out["context"] else None
    if empty:
        print(f"rag ask: {terminal_safe(empty)}", file=sys.stderr)
    # file names and document text may hold escape codes and newlines: nothing reaches the terminal raw
    if request.json:
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


def _nothing_found(request: AskRequest, rag: Any) -> str:
    """Why `rag ask` found no chunk: the filter matched none, no chunk holds the question's words (BM25), or the
    collection is empty."""
    where = request.store
    if request.filter_text:
        return (f"no chunk in collection {where.collection!r} matches --filter {short_repr(request.filter_text)}; "
                "check the metadata keys and values (rag ask --json shows a chunk's metadata)")
    held = _chunks_held(rag)
    if held and where.search == "bm25":
        return (f"no chunk of the {held:,} in collection {where.collection!r} contains any of the question's words "
                "(--search bm25 matches words, not meanings); rephrase, or use --search hybrid")
    if held:
        return f"no chunk of the {held:,} in collection {where.collection!r} was found for the question"
    return f"collection {where.collection!r} in {where.store} has no chunks; add some with: rag index PATH"


def _chunks_held(rag: Any) -> int:
    """How many chunks the resources hold (their chunk sources' counts; 0 when none can say)."""
    from rag.compose.pipeline import chunk_source

    counts = [getattr(chunk_source(resource), "count", None) for resource in rag.resources]
    return sum(count() for count in counts if callable(count))
