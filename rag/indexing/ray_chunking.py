"""What a Ray sync's load-and-chunk tasks run (`rag.indexing.ray_executor`): the components from their settings,
and `chunk_files`, one row per chunk.

The driver describes the chunker, AutoContext, tagger and load limits as JSON (`component_settings`);
each worker process builds them once (`components`). `chunk_files` loads each file of its batch,
prepares it as the local executor does (`rag.indexing.ingest.prepare`) and returns frames of one row
per chunk; a file with `STREAM_CHARS` or more characters is prepared in slices
(`rag.indexing.ingest.prepare_stream`), a frame each, so no task holds all of a large file's chunks
and Ray Data streams the slices to the embedding actors as they are made.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from rag.base.errors import ConfigError
from rag.indexing.access import AccessRules
from rag.indexing.autocontext import AutoContext
from rag.indexing.ingest import (
    STREAM_BATCH,
    STREAM_CHARS,
    Components,
    Done,
    Item,
    Prepared,
    done_of,
    load_item,
    prepare,
    prepare_stream,
    streams,
)
from rag.indexing.kb_parts import IndexTarget
from rag.indexing.limits import LoadLimits
from rag.indexing.manifest import autocontext_kwargs, chunker_from
from rag.indexing.tags import KeywordTagger

__all__ = ["chunk_files", "component_settings", "components"]


def component_settings(target: IndexTarget) -> str:
    """The chunker, AutoContext, tagger and load limits as JSON data, from which each worker builds its own.

    Raises:
        ConfigError: a component its settings do not rebuild exactly (an AutoContext summarising with an LLM, a
            custom tokenizer), or a tagger whose tags depend on how documents are batched."""
    tagger, parts = target.components.tagger, target.components
    if tagger is not None and getattr(tagger, "vocabulary", True) is None:
        raise ConfigError("a KeywordTagger without a vocabulary scores words against the whole batch of chunks, so "
                          "its tags depend on how documents are grouped; give it a vocabulary, or index with the "
                          "local executor")
    settings = json.dumps(_settings_of(parts), sort_keys=True)
    if json.dumps(_settings_of(components(settings)), sort_keys=True) != settings:
        raise ConfigError("the Ray executor builds the chunker, AutoContext and tagger on each worker from their "
                          f"settings, and {settings} does not rebuild as it is (an AutoContext summarising with an "
                          "LLM, or a custom tokenizer); index with the local executor")
    return settings


def _settings_of(parts: Components) -> dict[str, Any]:
    return {"chunking": parts.chunker.settings(), "autocontext": parts.autocontext.settings(),
            "tagger": parts.tagger.settings() if parts.tagger is not None else None, "limits": parts.limits.settings(),
            "access": parts.access.settings()}


@functools.lru_cache(maxsize=4)
def components(settings: str) -> Components:
    """The components that `component_settings` describes (built once per worker process)."""
    data = json.loads(settings)
    tagger = data["tagger"]
    return Components(chunker_from(data["chunking"]),
                      None if tagger is None else KeywordTagger(**{k: v for k, v in tagger.items() if k != "type"}),
                      AutoContext(**autocontext_kwargs(data["autocontext"])), LoadLimits(**data["limits"]),
                      AccessRules.from_settings(data.get("access")))


def chunk_files(batch: Any, *, settings: str, stream: tuple[int, int] = (STREAM_CHARS, STREAM_BATCH)) -> Iterator[Any]:
    """Ray task: load and prepare each file of `batch` (a pandas frame of input rows); frames of one row per chunk.

    A file of `stream[0]` characters or more (and a chunker that can stream) is prepared in slices of `stream[1]`
    chunks, a frame each; its facts (all its chunk ids) ride on its last slice."""
    parts = components(settings)
    out: list[dict[str, Any]] = []
    streamed = False
    for row in batch.to_dict("records"):
        item = Item(row["key"], row["display"], row["doc_id"], "", -1, -1, None, "added",
                    path=Path(row["path"]) if row["path"] else None)
        if row["pages"]:
            item.docs = [Document(page_content=text, metadata=meta) for text, meta in json.loads(row["pages"])]
        base = {"n": row["n"], "id": "", "text": "", "content": "", "metadata": "", "todo": False, "info": "",
                "error": ""}
        if (reason := load_item(item, parts.limits)) is not None:
            out.append({**base, "error": reason})
            continue
        existing = set(json.loads(row["existing"]))
        if streams(parts, item, stream[0]):
            if out:
                yield _frame(out)
                out = []
            yield from _slices(parts, item, base, existing, stream[1])
            streamed = True
            continue
        prepared = prepare(parts, [item])
        out += _rows(base, prepared, existing, _facts(done_of(prepared)[0]))
    if out or not streamed:
        yield _frame(out)


def _slices(parts: Components, item: Item, base: dict[str, Any], existing: set[str], size: int) -> Iterator[Any]:
    """The frames of one streamed file: each slice is yielded once the next is ready; the last carries the facts."""
    held: tuple[Done, list[dict[str, Any]]] | None = None
    ids: list[str] = []
    title: str | None = None
    for prepared in prepare_stream(parts, item, batch=size):
        if held is not None:
            yield _frame(held[1])
        done = done_of(prepared)[0]   # (this slice's ids, the title of its first chunk, the summary)
        title = done.title if title is None else title
        ids += done.chunk_ids
        held = (done, _rows(base, prepared, existing, ""))
    assert held is not None, "prepare_stream yields at least one slice"
    rows = held[1] or [dict(base)]
    rows[0]["info"] = _facts(replace(held[0], chunk_ids=ids, title=title or ""))
    yield _frame(rows)


def _facts(done: Done) -> str:
    """A document's facts for the driver (JSON): chunk ids in order, pages, load-limit notes, title, summary."""
    return json.dumps({"chunk_ids": done.chunk_ids, "pages": done.pages, "notes": done.item.notes,
                       "title": done.title, "summary": done.summary})


def _rows(base: dict[str, Any], prepared: Prepared, existing: set[str], info: str) -> list[dict[str, Any]]:
    """One row per prepared chunk; `info` (the document's facts, or "") on the first (a row of its own if none)."""
    if not prepared.ids:
        return [{**base, "info": info}] if info else []
    return [{**base, "id": cid, "text": text, "content": chunk.page_content,
             "metadata": json.dumps(meta, ensure_ascii=False), "todo": cid not in existing,
             "info": info if k == 0 else ""}
            for k, (cid, text, chunk, meta) in enumerate(zip(prepared.ids, prepared.texts, prepared.chunks,
                                                             prepared.metas, strict=True))]


def _frame(rows: list[dict[str, Any]]) -> Any:
    import pandas as pd

    return pd.DataFrame(rows, columns=["n", "id", "text", "content", "metadata", "todo", "info", "error"])
