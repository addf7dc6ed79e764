"""The quotable units of a context: its sentences, its table rows and its definitions as indexing kept them.

A chunk's sentences come from `rag.base.text.split_sentences` (headings, table rules and fenced
code left out); the lines of its table rows are taken out of the prose first, and its rows come
from its metadata (`rag.indexing.table_structure.table_rows`: header and cells, never re-parsed
from the text). A chunk's definitions (a term and its description, `rag.indexing.definitions.definitions`)
are units of their own, quoted "term: description": a description's sentences (up to `MAX_WORDS` words a
unit) after the term they describe, which is what a "which option does X?" question asks for; their lines
are taken out of the prose as rows are. Left out as well, since they are not statements a reader can take alone:

- a sentence cut by the chunk's edges: the first one when the chunk starts mid-sentence (a
  lower-case or punctuation start), the last one when the chunk ends without a sentence end;
- prompts and code lines (`>>> `, `$ `), and "sentences" of fewer than `MIN_WORDS` words, more than
  `MAX_WORDS`, or mostly symbols.

Every unit's text is context text, whitespace aside (a row is quoted as its printed line), so a
quote of it is supported by construction. A sentence found in several chunks (overlapping chunks
repeat text) is one unit citing each of them.

Example:
    >>> from langchain_core.documents import Document
    >>> docs = [Document(page_content="tail of a cut sentence. Rome is old. It has a river"),
    ...         Document(page_content="Rome is old.")]
    >>> [(u.text, u.sources) for u in context_units(docs)]
    [('Rome is old.', (1, 2))]
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.documents import Document

from rag.base.text import split_sentences
from rag.indexing.definitions import definitions
from rag.indexing.table_structure import table_rows

__all__ = ["MAX_WORDS", "MIN_WORDS", "Unit", "context_units", "shown_passage", "surrounding"]

MIN_WORDS = 3
MAX_WORDS = 80
_CODE_LINE = re.compile(r"^\s*(?:>>>|\.\.\.|\$|%|In \[\d+\]:)\s")
_END = re.compile(r"[.!?:;)\"'”’]$")
_LETTER = re.compile(r"[^\W\d_]")


@dataclass(frozen=True)
class Unit:
    """One quotable piece of the context.

    Attributes:
        text: what an answer quotes (context text, whitespace normalised).
        sources: the 1-based numbers of the context documents holding it (cited as `[n]`).
        kind: "sentence", "row" or "definition".
        terms: text matched against the question but not quoted (a row's column header).
        position: order within its first document.
        metadata: its first document's metadata (title, section, source).
        anchor: the context text the unit is found by in its chunk, when its text is not (a definition's
            description, quoted after its term).
    """

    text: str
    sources: tuple[int, ...]
    kind: str = "sentence"
    terms: str = ""
    position: int = 0
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    anchor: str = field(default="", compare=False, repr=False)

    @property
    def source(self) -> int:
        return self.sources[0]


def _statement(text: str) -> bool:
    words = text.split()
    if not MIN_WORDS <= len(words) <= MAX_WORDS:
        return False
    letters = len(_LETTER.findall(text))
    return letters >= 0.6 * len(text.replace(" ", ""))


def _prose_share(lines: list[str]) -> int:
    return sum(len(line) for line in lines if re.search(r"[.!?:]$", line.strip()) and len(line.split()) >= MIN_WORDS
               and not _CODE_LINE.match(line))


def _balanced(lines: list[str]) -> list[str]:
    """A chunk cut inside a code block has one fence too many: its text before the first fence is the end of a
    block, or its text after the last one the start of one (the side with less prose is the code)."""
    fences = [i for i, line in enumerate(lines) if line.lstrip().startswith("```")]
    if len(fences) % 2 == 0:
        return lines
    if _prose_share(lines[:fences[0]]) <= _prose_share(lines[fences[-1] + 1:]):
        return lines[fences[0] + 1:]
    return lines[:fences[-1]]


def _sentences(text: str) -> list[str]:
    """The whole sentences of one chunk's prose (see the module docstring)."""
    prose = "\n".join(line for line in _balanced(text.splitlines()) if not _CODE_LINE.match(line))
    sentences = split_sentences(prose)
    if not sentences:
        return []
    first = prose.lstrip()
    if first and not (first[0].isupper() or first[0].isdigit() or first[0] in "#`*-([\"'"):
        sentences = sentences[1:]   # the chunk starts mid-sentence
    flat = " ".join(prose.split())
    if sentences and not _END.search(sentences[-1]) and flat.endswith(sentences[-1]):
        sentences = sentences[:-1]   # the chunk ends mid-sentence
    return [s for s in sentences if _statement(s)]


def _chunk_units(n: int, doc: Document) -> list[Unit]:
    text = doc.page_content or ""
    metadata = doc.metadata or {}
    units: list[Unit] = []
    row_lines: set[str] = set()
    for table in table_rows(metadata):
        header = " ".join(str(h) for h in table.get("header") or [])
        for line in table["lines"]:
            row_lines.add(str(line))
            flat = " ".join(str(line).split())
            if len(_LETTER.findall(flat)) >= 2:
                units.append(Unit(flat, (n,), "row", header, len(units), metadata))
    for item in definitions(metadata):
        row_lines.update(item["lines"])
        group: list[str] = []
        flat = " ".join(item["description"].split())
        whole = [flat] if flat[:1].isupper() and len(flat.split()) <= MAX_WORDS else []   # "Be quiet." alone
        for sentence in [*(_sentences(flat) or whole), ""]:
            if group and (not sentence or len(" ".join([*group, sentence]).split()) > MAX_WORDS):
                said = " ".join(group)
                units.append(Unit(f"{item['term']}: {said}", (n,), "definition", "", len(units), metadata, said))
                group = []
            if sentence:
                group.append(sentence)
    if row_lines:
        text = "\n".join(line for line in text.splitlines() if line.strip() not in row_lines)
    units += [Unit(s, (n,), "sentence", "", len(units), metadata) for s in _sentences(text)]
    return units


def context_units(docs: Sequence[Document]) -> list[Unit]:
    """The units of a numbered context, in context order, each text once (citing every chunk holding it)."""
    seen: dict[str, int] = {}
    out: list[Unit] = []
    for n, doc in enumerate(docs, start=1):
        for unit in _chunk_units(n, doc):
            key = unit.text.lower()
            if key in seen:
                first = out[seen[key]]
                if n not in first.sources:
                    out[seen[key]] = Unit(first.text, (*first.sources, n), first.kind, first.terms, first.position,
                                          first.metadata, first.anchor)
                continue
            seen[key] = len(out)
            out.append(unit)
    return out


def surrounding(text: str, chunk: str, lines: int = 1) -> str:
    """`text` (a unit of `chunk`) with `lines` non-blank lines of the chunk before and after it, as the chunk
    prints them; `text` alone when it cannot be placed.

    Example:
        >>> surrounding("Use the -q option.", "## Quiet\\n\\n-q, --quiet\\nUse the -q option.\\n\\nMore.")
        '-q, --quiet\\nUse the -q option.\\nMore.'
    """
    rows = [line for line in chunk.splitlines() if line.strip()]
    flat = [" ".join(line.split()) for line in rows]
    words = text.split()
    head, tail = " ".join(words[:4]), " ".join(words[-3:])
    first = next((i for i, line in enumerate(flat) if head in line), None)
    if first is None or lines <= 0:
        return text
    last = next((i for i in range(first, len(flat)) if tail in flat[i]), first)
    return "\n".join(rows[max(0, first - lines):last + lines + 1]).strip()


def shown_passage(unit: Unit, chunk: str, lines: int = 1) -> str:
    """The passage shown for `unit` beside "not sure": `surrounding` it in `chunk`; for a definition, its term
    first when those lines do not hold it (a chunk that starts inside the term's line or below it)."""
    shown = surrounding(unit.anchor or unit.text, chunk, lines)
    term = unit.text[:-len(unit.anchor) - 2] if unit.kind == "definition" and unit.anchor else ""
    return f"{term}\n{shown}" if term and term not in " ".join(shown.split()) else shown
