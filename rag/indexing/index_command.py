"""The `rag index` command: index files into a `KnowledgeBase` with live Rich progress.

Shows files, PDF pages, chunks and embeddings with their rate and the time left while it runs (a
live line in a terminal, a line every few seconds when piped: `rag.indexing.progress`), then one summary
(documents added / updated / unchanged / deleted / skipped, with the reasons for skipped
files). Re-running on an unchanged folder embeds and writes nothing.

Arguments that are URLs are sources (`rag.sources`): `s3://bucket/prefix` (any fsspec object store) and
`https://site/sitemap.xml` (a sitemap, or any other page to crawl from); each is synced: what it no
longer lists is deleted, what did not change is not even fetched.

Example:
    $ rag index ../shared/data/financebench/pdfs --collection financebench
    $ rag index s3://bucket/reports https://docs.example.org/sitemap.xml
    $ rag index docs/ --include '**/*.md' --exclude 'drafts/*' --cleanup full
"""

from __future__ import annotations

import argparse
from typing import Any

from rag.base.errors import ConfigError
from rag.base.text import terminal_safe
from rag.base.tracing_export import configure_otlp_export
from rag.indexing.autocontext import AutoContext
from rag.indexing.chunking import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    TokenChunker,
)
from rag.indexing.executors import RayExecutor
from rag.indexing.kb_parts import IndexTarget
from rag.indexing.limits import LIMIT_NAMES, LoadLimits
from rag.indexing.loaders import iter_files, supported_suffixes, unsupported_reason
from rag.indexing.progress import IndexProgress, lines
from rag.indexing.tags import KeywordTagger
from rag.indexing.write_path import index_sources, sync_source
from rag.models.embeddings import default_embeddings
from rag.sources.specs import is_source_url, source_from

__all__ = ["run_index"]

def _embedding(choice: str, precision: str | None = None, device: str | None = None) -> Any:
    if choice == "fake":
        from langchain_core.embeddings import DeterministicFakeEmbedding

        return DeterministicFakeEmbedding(size=384)
    if precision is not None or device is not None:
        # an explicit precision: a knowledge base built with another is a ConfigError; a device alone keeps
        # the knowledge base's precision (rag.indexing.manifest.recorded_precision)
        from rag.models.embeddings import MiniLMEmbeddings

        return MiniLMEmbeddings(precision=precision, device=device)  # loads nothing until a chunk is embedded
    return None  # the manifest's model, or the default for a new knowledge base


def _open(args: argparse.Namespace) -> IndexTarget:

    chunker = None
    if args.chunk_size is not None or args.chunk_overlap is not None:
        chunker = TokenChunker(chunk_size=args.chunk_size or DEFAULT_CHUNK_SIZE,
                               chunk_overlap=DEFAULT_CHUNK_OVERLAP if args.chunk_overlap is None else args.chunk_overlap)
    embedding = _embedding(args.embedding, getattr(args, "precision", None), getattr(args, "device", None))
    opener = getattr(args, "open_backend", None)   # `--backend`: the chunks in another store (rag.cli)
    store = opener(embedding or default_embeddings()) if opener is not None else None
    return IndexTarget(args.collection, args.store, embedding=embedding, chunker=chunker, store=store,
                       autocontext=AutoContext(enabled=False) if args.no_autocontext else None,
                       tagger=KeywordTagger() if args.tags else None, lock_timeout=args.lock_timeout)


def run_index(args: argparse.Namespace) -> int:
    """Run `rag index` (see the module docstring); returns the exit code."""
    from rich.console import Console

    console = Console(stderr=True)
    configure_otlp_export()  # spans of this run, when RAG_TRACING is set
    include = args.include or "**/*"
    follow = getattr(args, "follow_symlinks", False)
    limits = LoadLimits.of({k: getattr(args, k) for k in LIMIT_NAMES if getattr(args, k, None) is not None})
    urls = [p for p in args.paths if is_source_url(p)]
    paths = [p for p in args.paths if not is_source_url(p)]
    sources = [_source(url, args) for url in urls]   # (a bad URL or option fails before anything is opened)
    if paths:
        _check_readable(paths, args.exclude, include, follow)
    executor = _executor(args)
    kb = _open(args)
    reports = []
    if paths:
        reports.append((", ".join(paths), _with_progress(console, lambda on_event: index_sources(
            kb, paths, include=include, exclude=args.exclude,
            cleanup=None if args.cleanup == "none" else args.cleanup, progress=on_event, follow_symlinks=follow,
            executor=executor, limits=limits))))
    for url, source in zip(urls, sources, strict=True):
        try:
            reports.append((url, _with_progress(console, lambda on_event, source=source: sync_source(
                kb, source, progress=on_event, executor=executor, limits=limits))))
        finally:
            source.close()
    total = _print_summaries(console, args, kb, reports, named=bool(urls))
    if all(r.skipped and not (r.added or r.updated or r.unchanged) for _, r in reports) and not total:
        raise ConfigError(f"no readable documents found in {', '.join(args.paths)}: all were skipped")
    return 0


def _print_summaries(console: Any, args: argparse.Namespace, kb: IndexTarget, reports: list[tuple[str, Any]], *,
                     named: bool) -> int:
    """What each run skipped, moved and deleted, its summary, and the chunks in total (returned)."""
    changed = any(report.changed for _, report in reports)
    # Unchanged store: its records know the total, and opening Chroma would double a no-op's time.
    total = kb.chunks.count() if changed else sum(len(r.chunk_ids) for r in kb.list_documents())
    for where, report in reports:
        _print_report(console, report)
        unread = f"; {len(report.unsupported)} file(s) of unsupported type not read" if report.unsupported else ""
        line = f"{where}: {report.summary()}{unread}" if named else \
            f"{args.collection!r} in {args.store}: {report.summary()}{unread}; {total:,} chunk(s) in total"
        console.print(terminal_safe(line), markup=False, highlight=False, soft_wrap=True)
    if named:
        console.print(terminal_safe(f"{args.collection!r} in {args.store}: {total:,} chunk(s) in total"),
                      markup=False, highlight=False, soft_wrap=True)
    return total


def _source(url: str, args: argparse.Namespace) -> Any:
    """The source a URL names: an object store (`s3://bucket/prefix`) or a web site (a sitemap or a start page)."""
    options: dict[str, Any] = {}
    if url.partition("://")[0].lower() in ("http", "https"):
        options = {"allow_private": bool(getattr(args, "allow_private", False))}
        if getattr(args, "max_pages", None) is not None:
            options["max_pages"] = args.max_pages
    else:
        options = {"include": args.include or "**/*", "exclude": args.exclude}
    return source_from(url, **options)


def _executor(args: argparse.Namespace) -> Any:
    """The executor `--executor` names; `--ray-*` options without `--executor ray` are a `ConfigError`."""
    options = {"address": getattr(args, "ray_address", None), "concurrency": getattr(args, "ray_concurrency", None),
               "batch_size": getattr(args, "ray_batch_size", None)}
    given = {key: value for key, value in options.items() if value is not None}
    if getattr(args, "executor", "local") != "ray":
        if given:
            flags = ", ".join("--ray-" + key.replace("_", "-") for key in given)
            raise ConfigError(f"{flags} apply to --executor ray only; add --executor ray or leave them out")
        return None
    return RayExecutor(**given)


def _with_progress(console: Any, run: Any) -> Any:
    """`run(on_event)` with a live progress line in a terminal, or a line every few seconds when piped."""
    from rich.progress import BarColumn, Progress, TextColumn
    from rich.table import Column

    progress = IndexProgress()
    if not console.is_terminal:
        report = run(lines(progress, console.file))
        print(f"indexing: {progress.line()}", file=console.file, flush=True)
        return report
    # the line is never cut: a bar only where there is room for it, and a narrow terminal wraps the line
    columns = [BarColumn(bar_width=20)] if console.width >= 110 else []
    with Progress(*columns, TextColumn("{task.fields[line]}", table_column=Column(overflow="fold")),
                  console=console, transient=False) as bar:
        task = bar.add_task("indexing", total=None, line="")

        def on_event(event: str, amount: int) -> None:
            progress.update(event, amount)
            if event == "files_total":
                bar.update(task, total=amount)
            elif event == "file":
                bar.advance(task, amount)
            bar.update(task, line=progress.line())

        report = run(on_event)
        bar.update(task, line=progress.line())
    return report


def _check_readable(paths: list[str], exclude: Any, include: str, follow: bool) -> None:
    """A `ConfigError` naming what was found when none of the paths holds a readable document."""
    links: list[Any] = []
    found = [(file, ok) for path in paths
             for file, ok in iter_files(path, include=include, exclude=exclude, follow_symlinks=follow,
                                        skipped=links)]
    if not any(ok for _, ok in found):
        types = sorted({file.suffix.lower() or "(no suffix)" for file, _ in found})
        unsupported = f": {len(found)} file(s) of unsupported type ({', '.join(types)})" if found else ""
        hint = f"; {len(links)} symlink(s) leaving the folders were not followed (--follow-symlinks)" if links else ""
        raise ConfigError(f"no readable documents found in {', '.join(paths)}{unsupported}; "
                          f"supported: {', '.join(supported_suffixes())}{hint}")


def _print_report(console: Any, report: Any) -> None:
    """One line per skipped, unsupported, moved and deleted file (no markup: paths may hold "[...]"; control
    characters escaped: a file name may hold escape codes or newlines that would forge lines)."""
    def line(*parts: Any, style: str | None = None) -> None:
        console.print(*(terminal_safe(p) for p in parts), style=style, markup=False, highlight=False, soft_wrap=True)

    for skipped in report.skipped:
        line("skipped", skipped.reason, style="yellow")
    for note in report.notes:
        line("note", f"{note.path}: {note.note}", style="yellow")
    for path in report.unsupported:
        line("skipped", unsupported_reason(path), style="yellow")
    for old, new in report.moved:
        line("moved", old, "->", new)
    for path in report.deleted:
        line("deleted", path, style="red")
