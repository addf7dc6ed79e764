"""Tables as structure: each chunk's table rows, kept as rows in its metadata.

The loaders print a table one row per line, cells joined with " | " (HTML and PDF tables; a cell's
own "|" is printed "/", so the split is exact), and Markdown tables are `| a | b |` lines over a
`|---|` rule. That is text for the embedding and for a reader; an answerer wants rows. So the
chunker reads the rows once, here, at indexing, and stores them in the chunk's metadata under
`TABLE_ROWS_KEY` (`"table_rows"`) as a JSON string (store metadata must be scalar):

    [{"header": ["Setting", "Default"], "rows": [["timeout", "30"], ...], "lines": ["timeout | 30", ...]}]

one object per table with a row in the chunk: its column header (the row above a Markdown rule, the
first line of a run of " | " lines, a PDF table's last header line) and the chunk's rows of it, each
also as the line it is printed as (`lines`, verbatim chunk text). A table cut over several chunks
gives every part its header. No answer-time code parses `a | b` text; it reads `table_rows(metadata)`.

Example:
    >>> text = "Intro.\\n\\nName | Default\\ntimeout | 30\\nretries | 3\\n\\nMore."
    >>> tables = chunk_tables(piece_tables(text), 0, len(text))
    >>> json.loads(tables)[0]["header"], json.loads(tables)[0]["rows"]
    (['Name', 'Default'], [['timeout', '30'], ['retries', '3']])
    >>> table_rows({"table_rows": tables})[0]["lines"]
    ['timeout | 30', 'retries | 3']
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rag.indexing.json_meta import json_list

__all__ = ["TABLE_ROWS_KEY", "PieceTable", "chunk_tables", "piece_tables", "table_rows"]

TABLE_ROWS_KEY = "table_rows"
_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


@dataclass
class PieceTable:
    """One table of a piece of text: its header and its rows as `(offset, line, cells)`."""

    header: list[str]
    rows: list[tuple[int, str, list[str]]] = field(default_factory=list)


def _cells(line: str) -> list[str] | None:
    """The cells of a printed row, or None when the line is not one."""
    stripped = line.strip()
    if stripped.startswith("|") and stripped.endswith("|") and len(stripped) > 2:
        return [c.strip() for c in stripped[1:-1].split("|")]
    if " | " in stripped:
        return [c.strip() for c in stripped.split(" | ")]
    return None


def piece_tables(text: str, header_lines: int | None = None) -> list[PieceTable]:
    """The tables of one piece of text. `header_lines`: the piece is one PDF table whose first lines
    are its header (title, period, columns), the last of them the column header."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    if header_lines is not None:
        head = [line.strip() for line in lines[:header_lines] if line.strip()]
        table = PieceTable(header=_cells(head[-1]) or [head[-1]] if head else [])
        table.rows = [(offsets[i], lines[i].strip(), _cells(lines[i]) or [lines[i].strip()])
                      for i in range(header_lines, len(lines)) if lines[i].strip()]
        return [table] if table.rows else []
    tables: list[PieceTable] = []
    run: list[tuple[int, str, list[str]]] = []
    markdown_header: list[str] | None = None

    def close() -> None:
        nonlocal run, markdown_header
        if markdown_header is not None and run:
            tables.append(PieceTable(markdown_header, run))
        elif len(run) >= 2:   # a run of printed rows: the first is the column header
            tables.append(PieceTable(run[0][2], run[1:]))
        run, markdown_header = [], None

    for i, line in enumerate(lines):
        if _RULE.match(line.strip()) and "|" in line and len(run) == 1 and markdown_header is None:
            markdown_header, run = run[0][2], []
            continue
        cells = _cells(line)
        if cells is None:
            close()
            continue
        run.append((offsets[i], line.strip(), cells))
    close()
    return tables


def chunk_tables(tables: list[PieceTable], start: int, end: int, body: str | None = None) -> str | None:
    """The `TABLE_ROWS_KEY` value of the chunk covering `[start, end)` of the piece (None: no row in it).
    `body`: the chunk's text, when it is not that span verbatim (a table part with its header repeated)."""
    lines = None if body is None else {line.strip() for line in body.splitlines()}
    out = []
    for table in tables:
        rows = [(line, cells) for at, line, cells in table.rows
                if start <= at < end and (lines is None or line in lines)]
        if rows:
            out.append({"header": table.header, "rows": [c for _, c in rows], "lines": [line for line, _ in rows]})
    return json.dumps(out, ensure_ascii=False) if out else None


def table_rows(metadata: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tables of a chunk's metadata (`[]` when it has none, or the value is not what indexing writes)."""
    return [t for t in json_list(metadata, TABLE_ROWS_KEY) if isinstance(t, dict) and isinstance(t.get("rows"), list)
            and isinstance(t.get("lines"), list) and len(t["rows"]) == len(t["lines"])]
