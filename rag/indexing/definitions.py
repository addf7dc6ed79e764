"""Definition lists as structure: each chunk's terms with their descriptions, kept in its metadata.

A definition list pairs a term (an option, a setting, a function's signature) with its description.
The HTML loader prints `<dl><dt>term</dt><dd>description</dd></dl>` in the Markdown definition-list
form (PHP Markdown Extra, Pandoc): the term on its own line, the description's first block directly
under it after ": " (several `<dt>` of one `<dd>` joined with ", "), and Markdown files written that
way read the same:

    --depth <depth>
    : Create a shallow clone with a history truncated to the given number of commits.

So the text the embedding and the lexical index see holds the term and its description together,
and the chunker does not end a chunk between them when it can end it elsewhere (`joins`). The
chunker reads the definitions once, here, at indexing, and stores them in the chunk's metadata under
`DEFINITIONS_KEY` (`"definitions"`) as a JSON string (store metadata must be scalar):

    [{"term": "--depth <depth>", "description": "Create a shallow clone ...", "lines": ["--depth <depth>", ": Create ..."]}]

one object per definition with a part in the chunk: its term (also when the term line is in the
chunk before: a description cut over several chunks gives every part its term), the part of its
description in the chunk, and the chunk's lines of it as printed (`lines`, verbatim chunk text,
stripped). Bounded: a term at most `MAX_TERM_CHARS` characters, a description at most
`MAX_DESCRIPTION_CHARS`, at most `MAX_DEFINITIONS` definitions a chunk. No answer-time code parses
"term / : description" text; it reads `definitions(metadata)`.

Example:
    >>> text = "Options:\\n\\n-q, --quiet\\n: Print nothing.\\n\\n-v\\n: Print more.\\nAnd more.\\n"
    >>> found = chunk_definitions(piece_definitions(text), text, 0, len(text))
    >>> [(d["term"], d["description"]) for d in definitions({"definitions": found})]
    [('-q, --quiet', 'Print nothing.'), ('-v', 'Print more. And more.')]
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rag.indexing.json_meta import json_list

__all__ = ["DEFINITIONS_KEY", "MAX_DEFINITIONS", "MAX_DESCRIPTION_CHARS", "MAX_TERM_CHARS", "Definition",
           "chunk_definitions", "definitions", "piece_definitions"]

DEFINITIONS_KEY = "definitions"
MAX_TERM_CHARS = 200          # a longer term (a long signature) is kept cut, ending in "…"
MAX_DESCRIPTION_CHARS = 2_000  # more than a chunk holds by default (1,600 characters)
MAX_DEFINITIONS = 64          # per chunk
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class Definition:
    """One definition of a piece of text: its term line's span and its description's span (offsets in the piece)."""

    term: str
    term_start: int
    start: int      # the description line's start (its ": ")
    end: int        # the end of the description's block (a blank line, a fence or the piece's end)


def _flat(text: str) -> str:
    return " ".join(text.split())


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def piece_definitions(text: str) -> list[Definition]:
    """The definitions of one piece of text: a line starting ": " (or a line ":" alone) directly under a
    non-blank line, outside code fences, starts a description of that line (the term) running to the next
    blank line; a term may have several descriptions, each its own ": " line."""
    out: list[Definition] = []
    offset, in_fence = 0, False
    term: tuple[str, int] | None = None       # the term in effect and its line's start
    previous: tuple[str, int] | None = None   # the line before, when not blank
    open_at: int | None = None                # the open description's start
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        fence = _FENCE.match(line) is not None
        in_fence = in_fence != fence
        blank = not stripped or in_fence or fence
        opener = not blank and (stripped.startswith(": ") or stripped == ":")
        closed = open_at is not None and (blank or opener)
        if closed and term is not None and open_at is not None:
            out.append(Definition(term[0], term[1], open_at, offset))
        if closed:
            open_at = None
        if opener:
            if not closed:   # a new term: the line above (none after a blank line)
                term = previous if previous is not None and not previous[0].startswith(":") else None
            open_at = offset + len(line) - len(line.lstrip()) if term is not None else None
        previous = None if blank else (stripped, offset)
        offset += len(line)
    if open_at is not None and term is not None:
        out.append(Definition(term[0], term[1], open_at, offset))
    return out


def chunk_definitions(found: list[Definition], text: str, start: int, end: int) -> str | None:
    """The `DEFINITIONS_KEY` value of the chunk covering `[start, end)` of the piece `text` (None: no
    description in it)."""
    out = []
    for item in found:
        a, b = max(item.start, start), min(item.end, end)
        if a >= b:
            continue
        part = text[a:b]
        lines = [line.strip() for line in part.splitlines() if line.strip()]
        if a == item.start:   # the description's first line: its ": " is the list's mark, not text
            part = re.sub(r"^\s*:[ \t]?", "", part)
            if item.term_start >= start:
                lines.insert(0, item.term)
        description = _flat(part)
        if not description:
            continue
        out.append({"term": _cut(_flat(item.term), MAX_TERM_CHARS),
                    "description": _cut(description, MAX_DESCRIPTION_CHARS), "lines": lines})
        if len(out) >= MAX_DEFINITIONS:
            break
    return json.dumps(out, ensure_ascii=False) if out else None


def definitions(metadata: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The definitions of a chunk's metadata (`[]` when it has none, or the value is not what indexing writes)."""
    return [d for d in json_list(metadata, DEFINITIONS_KEY)[:MAX_DEFINITIONS]
            if isinstance(d, dict) and isinstance(d.get("term"), str)
            and isinstance(d.get("description"), str) and isinstance(d.get("lines"), list)
            and all(isinstance(line, str) for line in d["lines"])]


def joins(found: list[Definition]) -> list[int]:
    """Offsets (in the piece) where a chunk should not end: before each description's line, after its term."""
    return [d.start for d in found]
