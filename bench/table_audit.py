"""An audit of how the extractive answerer names a table row's columns, on FinanceBench's development filings.

Each filing is read and chunked as `rag index` does by default (`load_file`, `TokenChunker`; nothing is written
to a store), every table chunk (`chunk_type="table"`) is split into units with `units_of_chunk`, and each row
printed as "label | cell | cell" is checked against the header lines above it. A row is flagged when its
quote looks wrong or unreliable:

- `repeated_name`: one column name for cells that are not side by side ("2017: 57,834; 2016: ...; 2017: 16,649");
- `year_spans_cells`: a name that is only a year over several cells of a row ("2023: 1,200, 8%") whose header
  line of years has fewer years than the row has cells: the other cells are a change or a share;
- `year_order`: the row's year names in another order than the header line of years above it states them;
- `percent_as_year`: a percent-change cell named by a year while the row's other cells are amounts;
- `header_is_figures`: a header line that named columns is a line of figures (a row without its label);
- `header_is_sentence`: a header line that named columns is a sentence (more than 12 words);
- `shifted_header`: a header line with one cell more than the row, whose first cell (dropped as the label
  column's) is itself a column name (a year or a period), so the names are shifted by one;
- `raw`: no header line fits, the row is quoted raw (`label | cell | cell (header)`): not wrong, counted.

Use it only to audit the reader and the unit logic (counts per class, a few examples each); no rule is read off
one filing.

Usage:
    python bench/table_audit.py                     # all 54 development filings (about two minutes)
    python bench/table_audit.py --files 5 --examples 5 --cache /tmp/chunks
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag.generation import context_units  # noqa: E402
from rag.generation.periods import kinds  # noqa: E402
from rag.generation.table_rows import header_cells, is_figure  # noqa: E402

_YEAR = re.compile(r"^(?:FY\s?)?(?:19|20)\d\d$")
_YEARS = re.compile(r"\b(?:19|20)\d\d\b")
_CLASSES = ("repeated_name", "year_spans_cells", "year_order", "percent_as_year", "header_is_figures",
            "header_is_sentence", "shifted_header", "raw")


def _chunks(pdf: Path, cache: Path | None) -> list[dict[str, Any]]:
    """The filing's chunks as `rag index` makes them (text and metadata), read from `cache` when it has them."""
    stored = cache / f"{pdf.stem}.json" if cache else None
    if stored and stored.exists():
        return json.loads(stored.read_text())
    from rag.indexing.chunking import TokenChunker
    from rag.indexing.loaders import load_file
    rows = [{"text": c.page_content, "metadata": {k: v for k, v in c.metadata.items()
                                                  if isinstance(v, (str, int, float, bool))}}
            for c in TokenChunker().split_documents(load_file(pdf))]
    if stored:
        stored.parent.mkdir(parents=True, exist_ok=True)
        stored.write_text(json.dumps(rows))
    return rows


def _fitting(count: int, recent: list[str]) -> list[tuple[str, list[str]]]:
    """The header lines above a row that name its `count` columns (as `column_names` fits them)."""
    fits = []
    for line in recent:
        cells = header_cells(line)
        if not cells:
            continue
        shown = cells[1:] if len(cells) == count + 1 and count > 1 else cells
        if not (len(shown) < 2 and count > 1 or count % len(shown)):
            fits.append((line, cells))
    return fits


def _groups(text: str, label: str) -> list[tuple[str, list[str]]]:
    """The (name, cells) groups of a named row quote `label (name: a, b; name: c)`."""
    body = text[len(label) + 2:-1]
    return [(name, cells.split(", ")) for name, _, cells in (g.rpartition(": ") for g in body.split("; "))]


def _year_flags(values: list[str], groups: list[tuple[str, list[str]]], fits: list[tuple[str, list[str]]]) -> set[str]:
    flags = set()
    for line, _cells in fits:
        years = _YEARS.findall(line)
        if years and all(_YEAR.match(c) for c in header_cells(line)) and len(years) < len(values) and \
                any(len(cells) > 1 and _YEAR.match(name) for name, cells in groups):
            flags.add("year_spans_cells")
        if len(years) == len(values) and all(_YEAR.match(c) for c in header_cells(line)):
            named = [y for name, cells in groups for y in _YEARS.findall(name)[-1:] * len(cells)]
            if len(named) == len(values) and named != years:
                flags.add("year_order")
    percents = [v.endswith("%") or v.endswith("%)") for v in values]
    named_years = [bool(_YEARS.search(name)) for name, cells in groups for _ in cells]
    if any(p and y for p, y in zip(percents, named_years)) and not all(percents) and percents[-1] and \
            sum(percents) == 1 and len(values) >= 3:
        flags.add("percent_as_year")
    return flags


def _flags(cells: list[str], recent: list[str], text: str) -> set[str]:
    """The classes a row's quote `text` falls in (see the module docstring)."""
    label, values = cells[0], cells[1:]
    if text.startswith(" | ".join(cells)):
        return {"raw"}
    fits = _fitting(len(values), recent)
    groups = _groups(text, label)
    names = [name for name, _ in groups]
    flags = {"repeated_name"} if len(set(names)) < len(names) else set()
    for line, hcells in fits:
        if all(is_figure(c) for c in hcells):
            flags.add("header_is_figures")
        if len(line.split()) > 12 and " | " not in line and not _YEARS.search(line) and not kinds(line):
            flags.add("header_is_sentence")
        if len(hcells) == len(values) + 1 and len(values) > 1 and (_YEAR.match(hcells[0]) or kinds(hcells[0])):
            flags.add("shifted_header")
    return flags | _year_flags(values, groups, fits)


class _Tap:
    """Records each row `_Splitter.pipe_row` quotes: its cells, the lines above it and its unit's text."""

    def __init__(self) -> None:
        self.rows: list[tuple[list[str], list[str], str]] = []
        original = context_units._Splitter.pipe_row
        tap = self

        def pipe_row(splitter: Any, cells: list[str]) -> None:
            before = len(splitter.units)
            original(splitter, cells)
            if len(splitter.units) > before:
                tap.rows.append((list(cells), list(splitter.recent), splitter.units[-1].text))
        context_units._Splitter.pipe_row = pipe_row


def audit(pdfs: list[Path], cache: Path | None) -> tuple[Counter, dict[str, list[tuple[str, str, str]]], Counter]:
    """Counts per class, examples per class (filing, header lines, quote) and the filings per class."""
    tap = _Tap()
    counts: Counter = Counter()
    examples: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    filings: dict[str, set[str]] = defaultdict(set)
    for pdf in pdfs:
        for chunk in _chunks(pdf, cache):
            if chunk["metadata"].get("chunk_type") != "table":
                continue
            tap.rows.clear()
            context_units.units_of_chunk(chunk["text"], 1, chunk["metadata"])
            for cells, recent, text in tap.rows:
                counts["rows"] += 1
                for flag in _flags(cells, recent, text):
                    counts[flag] += 1
                    filings[flag].add(pdf.stem)
                    examples[flag].append((pdf.stem, " / ".join(recent[-3:]), text))
    return counts, examples, Counter({k: len(v) for k, v in filings.items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pdfs", default="/work/shared/data/financebench/pdfs", help="the filings' directory")
    parser.add_argument("--files", type=int, default=0, help="only the first N filings (0: all)")
    parser.add_argument("--examples", type=int, default=3, help="examples printed per class")
    parser.add_argument("--cache", default="", help="a directory keeping each filing's chunks as JSON (re-runs)")
    parser.add_argument("--seed", type=int, default=0, help="which examples: every (seed+k*step)-th of a class")
    args = parser.parse_args()
    pdfs = sorted(Path(args.pdfs).glob("*.pdf"))[: args.files or None]
    counts, examples, filings = audit(pdfs, Path(args.cache) if args.cache else None)
    print(f"{len(pdfs)} filings, {counts['rows']} table rows quoted by `pipe_row`")
    print(f"{'class':20} {'rows':>6} {'filings':>8}")
    for name in _CLASSES:
        print(f"{name:20} {counts[name]:>6} {filings[name]:>8}")
    for name in _CLASSES:
        found = examples.get(name, [])
        step = max(len(found) // max(args.examples, 1), 1)
        for filing, recent, text in found[args.seed::step][: args.examples]:
            print(f"\n[{name}] {filing}\n  above: {recent[:300]}\n  quote: {text[:300]}")


if __name__ == "__main__":
    main()
