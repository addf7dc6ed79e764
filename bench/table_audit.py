"""An audit of how the extractive answerer names a table row's columns, on FinanceBench's development filings.

Each filing is read and chunked as `rag index` does by default (`load_file`, `TokenChunker`; nothing is written
to a store), every table chunk (`chunk_type="table"`) is split into units with `units_of_chunk`, and each row
printed as "label | cell | cell" is checked against the header lines above it. A row is flagged when its
quote looks wrong or unreliable:

- `repeated_name`: one column name for cells that are not side by side ("2017: 57,834; 2016: ...; 2017: 16,649");
- `change_as_year`: a line of years with more columns after them ("2022 2021 22 vs. 21 % change") whose years
  span a row's cells, so a change is named by a year ("2021: (394), (11)%");
- `percent_as_year`: a row's last cell, its only percent (a change), named by a year;
- `year_order`: the row's year names in another order than the header line of as many years above it;
- `header_is_figures`: the names are a line of figures (a row whose label the reader put on another line);
- `label_is_figure`: a named row whose label is a figure (its first cell, so its names are shifted by one);
- `shifted_header`: named by a header line with one cell more than the row, whose first cell (dropped as
  the label column's) is itself a year or a period;
- `not_a_period`: a name with "year(s)" that is neither a year nor a period ("years", "Year over");
- `year_spans_cells` (not wrong by itself, counted): a year over several cells of a row ("2022: 20.8%, $10.12"
  under "Percent of net sales | diluted share" is right; under "2022 2021 $ change % change" it is not);
- `named` / `raw`: rows quoted with column names, rows quoted raw (`label | cell | cell (header)`: no header
  line fits).

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
_CLASSES = ("named", "raw", "repeated_name", "change_as_year", "percent_as_year", "year_order", "header_is_figures",
            "label_is_figure", "shifted_header", "not_a_period", "year_spans_cells")


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


def _year_flags(values: list[str], expanded: list[str], fits: list[tuple[str, list[str]]]) -> set[str]:
    flags = set()
    for line, cells in fits:
        years = _YEARS.findall(line)
        if not years or not all(_YEAR.match(c) for c in cells) or " | " in line:
            continue
        spanned = len(years) < len(values) and all(_YEARS.search(n) for n in expanded)
        if spanned:
            flags.add("year_spans_cells")
        trailing = re.sub(r"\(\w\)|\*+|[,.:;\s]", "", line[list(_YEARS.finditer(line))[-1].end():])
        if spanned and trailing:
            flags.add("change_as_year")
        named = [_YEARS.findall(n)[-1] for n in expanded if _YEARS.search(n)]
        if len(years) == len(values) == len(named) and named != years:
            flags.add("year_order")
    percents = [v.endswith("%") or v.endswith("%)") for v in values]
    if len(values) >= 3 and percents[-1] and sum(percents) == 1 and _YEARS.search(expanded[-1]):
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
    expanded = [name for name, cells in groups for _ in cells]
    flags = {"named"} | ({"repeated_name"} if len(set(names)) < len(names) else set())
    if is_figure(label):
        flags.add("label_is_figure")
    if any(re.search(r"\byears?\b", n, re.I) and not _YEARS.search(n) and not kinds(n) for n in names):
        flags.add("not_a_period")
    for line, hcells in fits:
        if all(is_figure(c) for c in hcells) and any(c in " ".join(names) for c in hcells):
            flags.add("header_is_figures")
        shifted = len(hcells) == len(values) + 1 and (_YEAR.match(hcells[0]) or kinds(hcells[0]))
        if shifted and len(expanded) == len(values) and all(c in n for c, n in zip(hcells[1:], expanded)):
            flags.add("shifted_header")
    return flags | _year_flags(values, expanded, fits)


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


def audit(pdfs: list[Path], cache: Path | None, dump: list[str] | None = None
          ) -> tuple[Counter, dict[str, list[tuple[str, str, str]]], Counter]:
    """Counts per class, examples per class (filing, header lines, quote) and the filings per class; `dump`
    receives every quote (filing, quote), to compare two versions of the unit logic."""
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
                if dump is not None:
                    dump.append(f"{pdf.stem}\t{text}")
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
    parser.add_argument("--dump", default="", help="write every row's quote to this file (one per line)")
    parser.add_argument("--seed", type=int, default=0, help="which examples: every (seed+k*step)-th of a class")
    args = parser.parse_args()
    pdfs = sorted(Path(args.pdfs).glob("*.pdf"))[: args.files or None]
    dump: list[str] | None = [] if args.dump else None
    counts, examples, filings = audit(pdfs, Path(args.cache) if args.cache else None, dump)
    if dump is not None:
        Path(args.dump).write_text("\n".join(dump) + "\n")
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
