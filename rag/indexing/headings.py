"""Where a document's sections are: its markdown headings, or the heading-like lines of plain-text pages.

`split_sections` cuts markdown at its `#` lines (html `<h1>`-`<h6>` and rst titles become such lines
in the loaders), and `heading_blocks` keeps every heading with the text it heads. PDF text loses
the markdown `#` that `split_sections` keys on, yet filings, reports and papers
still print their headings on lines of their own: short, capitalised, without a closing period
("Consolidated Statements of Cash Flows", "Item 7. Management's Discussion and Analysis",
"LIQUIDITY AND CAPITAL RESOURCES"). `heading_spans` finds such lines in every page and carries
the last one forward, so a page that starts mid-paragraph still knows the section it belongs to.
Running headers (a line printed at the top of many pages, such as "Table of Contents" or the
company name) and bare numbers are never headings.

`pdf_sections` applies it to the pages of each PDF file among a chunker's documents.
`section_at(spans, page, offset)` names the section of any position; `chunk_section` names the
section of a chunk, which AutoContext puts into the header it embeds with the chunk.

`rag.indexing.chunking.TokenChunker` cuts its chunks inside these sections, never across them.

Example:
    >>> pages = ["Results of Operations\\nSales grew 4% in 2022, driven by price.",
    ...          "and by volume in every region.\\nLiquidity and Capital Resources\\nCash was $3.6 billion."]
    >>> spans = heading_spans(pages)
    >>> section_at(spans, 1, 0), section_at(spans, 1, 40)
    ('Results of Operations', 'Liquidity and Capital Resources')
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from langchain_core.documents import Document

from rag.indexing.text_safety import clean_text

__all__ = ["chunk_section", "heading_blocks", "heading_spans", "is_heading_line", "pdf_sections", "running_headers",
           "section_at", "split_sections"]

_MAX_HEADING_CHARS = 90
_MIN_LETTERS = 4
_TOP_LINES = 3                 # a running header is printed among the first lines of a page
_RUNNING_SHARE = 0.15          # ... of at least this share of the pages (and of 3 pages or more)
_SMALL_WORDS = frozenset(["a", "an", "and", "as", "at", "by", "for", "from", "in", "of", "on", "or", "per", "the", "to", "vs", "with"])
_BOILERPLATE = re.compile(r"^(table of contents|contents|index|page \d+( of \d+)?|continued|\(continued\))$", re.IGNORECASE)
_ITEM = re.compile(r"^(item|part|note|section|schedule|exhibit)\s+[\dIVXivx]+[A-Za-z]?\b", re.IGNORECASE)
_NUMBER = re.compile(r"[\d$%(),.\-–]+")
_HEADER = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _normal(line: str) -> str:
    return " ".join(line.split())


def is_heading_line(line: str) -> bool:
    """Whether a line of plain text reads like a heading.

    A heading is short, starts with a capital (or is an "Item 7." / "Note 3" line), does not end
    like a sentence, is not a table row (two or more numbers), is mostly letters, and capitalises its significant words
    (Title Case or ALL CAPS).

    Example:
        >>> is_heading_line("Consolidated Statements of Cash Flows"), is_heading_line("Net sales 34,229 35,355")
        (True, False)
    """
    text = _normal(line)
    if not text or len(text) > _MAX_HEADING_CHARS or _BOILERPLATE.match(text):
        return False
    if text[-1] in ".,;:" and not _ITEM.match(text):
        return False
    numbers = [w for w in text.split() if _NUMBER.fullmatch(w) and any(ch.isdigit() for ch in w)]
    if len(numbers) > 1 and not _ITEM.match(text):
        return False  # a table row: "Net Income $ 8,910 $ 7,618"
    words = [w for w in text.split() if not _NUMBER.fullmatch(w)]
    letters = sum(ch.isalpha() for ch in text)
    if letters < _MIN_LETTERS or letters < 0.6 * len(text.replace(" ", "")) or not words:
        return False
    if _ITEM.match(text):
        return True
    if not words[0][0].isupper():
        return False
    significant = [w for w in words if w.lower().strip("()'\"") not in _SMALL_WORDS and w[0].isalpha()]
    if not significant:
        return False
    capitalised = sum(w[0].isupper() for w in significant)
    return capitalised == len(significant) and len(words) >= 1 and not text.isdigit()


def running_headers(pages: Sequence[str]) -> set[str]:
    """Lines printed among the first lines of many pages (page furniture, not section names).

    Example:
        >>> sorted(running_headers(["Acme Corp\\nSales", "Acme Corp\\nCosts", "Acme Corp\\nCash"]))
        ['Acme Corp']
    """
    counts: Counter[str] = Counter()
    for page in pages:
        top = [_normal(line) for line in page.splitlines() if line.strip()][:_TOP_LINES]
        counts.update(set(top))
    floor = max(3, int(_RUNNING_SHARE * len(pages)))
    return {line for line, n in counts.items() if n >= floor}


def heading_spans(pages: Sequence[str]) -> list[list[tuple[int, str]]]:
    """Per page, `(character offset, section heading)` pairs; each page starts with the section in effect.

    The first pair of a page (offset -1) is the heading carried over from earlier pages (absent
    before the first heading of the document); then one pair per heading line on the page.
    Two consecutive heading lines (a heading and its sub-heading) are joined with " / "; a third
    starts a new section (long runs are tables of contents or column headers, not one title).
    """
    furniture = running_headers(pages)
    current = ""
    out: list[list[tuple[int, str]]] = []
    for page in pages:
        spans: list[tuple[int, str]] = [(-1, current)] if current else []
        offset, previous_end = 0, -2
        for line in page.splitlines(keepends=True):
            text = _normal(line)
            if text and text not in furniture and is_heading_line(text):
                if previous_end == offset and spans and spans[-1][0] >= 0 and " / " not in spans[-1][1]:
                    start, first = spans.pop()
                    current = f"{first} / {text}"
                    spans.append((start, current))
                else:
                    current = text
                    spans.append((offset, current))
                previous_end = offset + len(line)
            elif text:
                previous_end = -2
            else:
                previous_end = offset + len(line) if previous_end == offset else previous_end
            offset += len(line)
        out.append(spans)
    return out


def section_at(spans: Sequence[Sequence[tuple[int, str]]], page: int, offset: int) -> str:
    """The section heading in effect at character `offset` of `page` ("" before the first heading).

    Example:
        >>> section_at([[(0, "Sales")], [(0, "Sales"), (10, "Cash")]], 1, 12)
        'Cash'
    """
    found = ""
    for start, heading in spans[page]:
        if start > offset:
            break
        found = heading
    return found


def chunk_section(spans: Sequence[Sequence[tuple[int, str]]], page: int, start: int, end: int, *,
                  lead: float = 0.25) -> str:
    """The section of the chunk `[start, end)` of `page`.

    When headings start in the first `lead` share of the chunk (a page that opens with "Company
    and Subsidiaries / Consolidated Balance Sheet", then "Assets"), the most descriptive of them
    (the most letters; the earliest on a tie) names the chunk; otherwise the heading in effect at
    its start does.

    Example:
        >>> spans = [[(0, "Notes"), (10, "Consolidated Balance Sheet"), (40, "Assets")]]
        >>> chunk_section(spans, 0, 5, 200), chunk_section(spans, 0, 150, 400)
        ('Consolidated Balance Sheet', 'Assets')
    """
    limit = start + max(1, int((end - start) * lead))
    leading = [heading for offset, heading in spans[page] if start <= offset < limit]
    if not leading:
        return section_at(spans, page, start)
    return max(leading, key=lambda h: (sum(ch.isalpha() for ch in h), -leading.index(h)))


def split_sections(text: str) -> list[tuple[str | None, int, int]]:
    """Markdown sections of `text` as `(heading or None, start, end)` character spans.

    Lines inside ``` fences are never headings. Text before the first heading has no heading.

    Example:
        >>> split_sections("intro\\n# A\\nbody\\n## B\\nmore")
        [(None, 0, 6), ('A', 6, 15), ('B', 15, 24)]
    """
    sections: list[tuple[str | None, int, int]] = []
    heading: str | None = None
    start = pos = 0
    in_fence = False
    for line in text.splitlines(keepends=True):
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (match := _HEADER.match(line.rstrip("\r\n"))):
            if pos > start:
                sections.append((heading, start, pos))
            heading, start = match.group(2), pos
        pos += len(line)
    if pos > start or not sections:
        sections.append((heading, start, pos))
    return sections


def heading_blocks(text: str, sections: Sequence[tuple[str | None, int, int]]
                   ) -> list[tuple[str | None, int, int, list[tuple[int, int]]]]:
    """Join markdown sections so that every heading travels with the text it heads.

    `sections` are `split_sections(text)` spans. A section holding only its heading line (a
    heading directly followed by another, as in "# Models" then "## Default") joins the next
    section, and its heading joins the section name ("Models / Default"); headings after the
    last text join the section before them. A text of headings only stays one block.

    Returns `(section, start, end, heading_spans)` per block, where `heading_spans` are the
    character spans of the block's heading lines (the chunker never ends a chunk on them alone).

    Example:
        >>> text = "# Models\\n## Default\\nMiniLM.\\n# End\\n"
        >>> [(name, text[s:e]) for name, s, e, _ in heading_blocks(text, [("Models", 0, 9), ("Default", 9, 28),
        ...                                                               ("End", 28, 34)])]
        [('Models / Default', '# Models\\n## Default\\nMiniLM.\\n# End\\n')]
    """
    blocks: list[tuple[str | None, int, int, list[tuple[int, int]]]] = []
    pending: list[tuple[str, int, int]] = []  # heading-only sections waiting for text
    for heading, start, end in sections:
        if heading is None:
            if text[start:end].strip():
                blocks.append((None, start, end, []))
            continue
        line_end = start + len(text[start:end].splitlines(keepends=True)[0])  # \r, \x85, ... end lines too
        if not text[line_end:end].strip():
            pending.append((heading, start, line_end))
            continue
        names = [name for name, _, _ in pending] + [heading]
        spans = [(s, e) for _, s, e in pending] + [(start, line_end)]
        blocks.append((" / ".join(names), pending[0][1] if pending else start, end, spans))
        pending = []
    if pending and blocks:
        name, start, _, spans = blocks[-1]
        blocks[-1] = (name, start, len(text), spans + [(s, e) for _, s, e in pending])
    elif pending:
        blocks.append((" / ".join(name for name, _, _ in pending), pending[0][1], len(text),
                       [(s, e) for _, s, e in pending]))
    return blocks


def _heading_text(doc: Document) -> str:
    if doc.metadata.get("chunk_type") == "table":
        return "\n".join(str(doc.metadata.get("section") or "").split(" / "))
    return clean_text(doc.page_content)


def pdf_sections(docs: Sequence[Document]) -> dict[int, tuple[list[list[tuple[int, str]]], int]]:
    """For each PDF page (or page part) of `docs`: the heading spans of its file and its position in them.

    PDF text has no markup, so sections come from heading-like lines (`heading_spans`),
    carried from page to page; a table counts as a page holding only its caption.
    """
    files: dict[str, list[int]] = {}
    for number, doc in enumerate(docs):
        meta = doc.metadata
        if meta.get("file_type") == "pdf" or str(meta.get("source", "")).lower().endswith(".pdf"):
            files.setdefault(str(meta.get("doc_id") or meta.get("source", "")), []).append(number)
    out: dict[int, tuple[list[list[tuple[int, str]]], int]] = {}
    for numbers in files.values():
        spans = heading_spans([_heading_text(docs[n]) for n in numbers])
        out.update({n: (spans, position) for position, n in enumerate(numbers)})
    return out
