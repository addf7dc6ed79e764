"""HTML to text for indexing: the page's main content as a reader sees it, in linear time.

The page is read by libxml2's HTML parser (through lxml) in streaming mode: the parser calls
`_TextTarget` for each start tag, end tag and run of text, and nothing else is built, so the
time and memory grow linearly with the file whatever it holds (200,000 `<`, unclosed comments,
attributes that never end, 100,000 nested tags).

What is kept, and how:

- what a reader sees: elements hidden from readers are dropped with all they hold (the `hidden`
  attribute, `aria-hidden="true"`, an inline style with `display:none`, `visibility:hidden` or
  `collapse`, `opacity:0` or a zero `font-size`), the classic carrier of hidden prompt injection;
  hiding by a style sheet's class is not evaluated (no CSS engine);
- the main content only: when the page marks it (`<main>`, `role="main"`, `<article>`, Sphinx's
  `div.body`) and the marked regions hold the page's text, the text inside them; they hold it when
  what lies outside them (furniture dropped) is less than half of their text and no run of prose
  outside them is `_PROSE_CHARS` long or more. So one comment marked up as `<article>`,
  `role="main"` or `class="body"` never makes the page's own text disappear: the whole page is read.
  Everywhere, page furniture is dropped: `<nav>`, the page's
  `<header>` and `<footer>` (not those inside the main content), `<aside>`, landmark roles (navigation, banner, contentinfo, complementary, search)
  and blocks whose class or id names navigation (`sphinxsidebar`, `related`, `navheader`,
  `navfooter`, `toc`, `breadcrumbs`, ...; `_FURNITURE`), `<script>`, `<style>`, `<template>`, `<head>`
  (except the `<title>`), and permalink marks (`a.headerlink`, a trailing "¶" in headings);
- headings `<h1>`-`<h6>` as markdown `#` lines;
- `<pre>` blocks whole, as fenced code with their line breaks and indentation (a `#` comment in
  code is never a heading for the chunker);
- tables as tables: one line per row, cells joined with " | "; a row of one cell (a reference table's
  entry: "gcd ( numeric_type, numeric_type ) → numeric_type Greatest common divisor ...") is a block of its own;
- definition lists (`<dl>`) in the Markdown definition-list form, each term tied to its description:
  the term on a line of its own (several `<dt>` of one `<dd>` joined with ", "), the description directly
  under it after ": ", then a blank line (`rag.indexing.definitions` reads them into chunk metadata).

Example:
    >>> page = ('<title>Guide</title><nav>Home | Next</nav><h2>Install<a class="headerlink">¶</a></h2>'
    ...         '<p>Run <b>pip</b>:</p><pre># comment\\n  pip install x</pre>')
    >>> text, title = html_to_text(page)
    >>> text.splitlines(), title
    (['## Install', '', 'Run pip:', '', '```', '# comment', '  pip install x', '```'], 'Guide')
"""

from __future__ import annotations

import re
from typing import Any

from lxml import etree

__all__ = ["html_to_text"]

_DROPPED = frozenset({"script", "style", "head", "template", "noscript", "nav", "header", "footer", "aside",
                      "button", "form", "select"})
_SECTION_HEADS = frozenset({"header", "footer"})
_LANDMARKS = frozenset({"navigation", "banner", "contentinfo", "complementary", "search"})
_FURNITURE = frozenset({
    "sphinxsidebar", "sphinxsidebarwrapper", "related", "headerlink", "navheader", "navfooter", "toc", "breadcrumb",
    "breadcrumbs", "navbar", "sidebar", "footer", "skip-link", "searchbox", "wy-nav-side", "rst-footer-buttons",
    "bd-sidebar", "bd-sidebar-primary", "bd-sidebar-secondary", "bd-header", "bd-footer", "prev-next-area", "bd-toc",
    "copybtn", "edit-this-page", "navigation", "menu", "nav", "this-page-menu", "toc-drawer", "sidebar-drawer",
})
_MAIN_CLASSES = frozenset({"body", "main-content", "bd-article"})
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_CELLS = frozenset({"td", "th"})
_BREAKS = frozenset({"br", "p", "div", "li", "tr", "table", "ul", "ol", "pre", "blockquote", "section",
                     "article", "dd", "dt", "hr", "dl", "caption", "figure", "main"})
_PERMALINK = "¶\uf0c1🔗"
_MIN_MAIN_CHARS = 20  # a main region with less text is a marker, not the page: the whole page is kept
_PROSE_CHARS = 40     # a run of text outside the main regions this long (no block break) is the page's own text
_HIDDEN_STYLE = re.compile(r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*(?:hidden|collapse)"
                           r"|opacity\s*:\s*0*\.?0+\s*%?|font-size\s*:\s*0*\.?0+\s*(?:[a-z]+|%)?)\s*(?:!\s*important\s*)?(?:;|$)",
                           re.IGNORECASE)


def _hidden(attrib: Any) -> bool:
    """Whether an element is hidden from readers by its own attributes."""
    if attrib.get("hidden") is not None or str(attrib.get("aria-hidden", "")).strip().lower() == "true":
        return True
    style = attrib.get("style")
    return bool(style) and _HIDDEN_STYLE.search(str(style)) is not None


class _TextTarget:
    """Parser target that collects the visible text (all of it, and the main region's), title and first `<h1>`."""

    def __init__(self) -> None:
        self.parts: list[tuple[bool, str]] = []       # (preformatted, text) of the whole page
        self.main: list[tuple[bool, str]] = []        # the same, inside main-content elements
        self.title: list[str] | None = None
        self.h1: list[str] | None = None
        self._stack: list[tuple[str, str]] = []       # (tag, role in the reading: "", drop, main, pre, ...)
        self._open: dict[str, int] = {}               # open elements per tag: O(1) "is it open?"
        self._count = {"drop": 0, "main": 0, "pre": 0, "table": 0}
        self._in_title = False
        self._heading: tuple[int, list[str]] | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._pre: list[str] | None = None
        self._term: list[str] | None = None          # the text of the open <dt>
        self._terms: list[str] = []                  # terms waiting for their <dd>
        self._lead = False                           # right after a description's ": ": blanks are layout
        self.outside = 0         # characters of text outside the main regions
        self.outside_prose = False   # a run of `_PROSE_CHARS` or more of them, without a block break
        self._run = 0

    def _kind(self, tag: str, attrib: Any) -> str:
        if tag in _DROPPED and not (tag in _SECTION_HEADS and self._count["main"]):
            return "drop"  # (an <article>'s own <header> holds its title: kept)
        if _hidden(attrib):
            return "drop"
        names = set(str(attrib.get("class", "")).split()) | {str(attrib.get("id", ""))}
        role = str(attrib.get("role", "")).lower()
        if role in _LANDMARKS or names & _FURNITURE:
            return "drop"
        if tag in ("main", "article") or role == "main" or (tag == "div" and names & _MAIN_CLASSES):
            return "main"
        if tag == "pre":
            return "pre"
        if tag == "table":
            return "table"
        return ""

    def start(self, tag: Any, attrib: Any) -> None:
        tag = str(tag).lower()
        if tag == "title" and self.title is None:
            self.title, self._in_title = [], True
        kind = self._kind(tag, attrib)
        self._stack.append((tag, kind))
        self._open[tag] = self._open.get(tag, 0) + 1
        if kind:
            self._count[kind] += 1
        if self._count["drop"]:
            return
        if kind == "pre" and self._count["pre"] == 1 and self._cell is None:
            self._pre = []
        elif kind == "table" and self._count["table"] == 1:
            self._emit("\n\n")
        elif self._count["table"] == 1 and tag == "tr":
            self._row = []
        elif self._count["table"] == 1 and tag in _CELLS and self._row is not None:
            self._cell = []
        elif tag in _HEADINGS and self._heading is None and self._cell is None and self._pre is None:
            self._heading = (_HEADINGS[tag], [])
        elif tag == "dt" and self._cell is None and self._heading is None and self._pre is None:
            self._term = self._term if self._term is not None else []
        elif tag == "dd" and self._terms and self._cell is None and self._heading is None and self._pre is None:
            terms, self._terms, self._lead = ", ".join(self._terms), [], False
            self._emit("\n\n" + terms + "\n: ")
            self._lead = True
        elif tag == "br":
            self._text("\n")

    def end(self, tag: Any) -> None:
        tag = str(tag).lower()
        if tag == "title":
            self._in_title = False
        if not self._open.get(tag):
            return  # an end tag without its start: libxml2 already ignored it
        while self._stack:
            top, kind = self._stack.pop()
            self._open[top] -= 1
            self._close(top, kind)
            if kind:
                self._count[kind] -= 1
            if top == tag:
                break

    def _close(self, tag: str, kind: str) -> None:
        if self._count["drop"]:  # inside a dropped element, or closing one
            return
        if kind == "pre" and self._count["pre"] == 1 and self._pre is not None:
            code, self._pre = "".join(self._pre), None
            self._add(True, code)
        elif kind == "table" and self._count["table"] == 1:
            self._row = self._cell = None
            self._emit("\n\n")
        elif tag in _CELLS and self._cell is not None and self._count["table"] == 1:
            text = " ".join("".join(self._cell).split()).replace("|", "/")
            self._cell = None
            if text and self._row is not None:
                self._row.append(text)
        elif tag == "tr" and self._row is not None and self._count["table"] == 1:
            row, self._row = self._row, None
            if row:   # a row of one cell is a block of its own (a reference table's entry), not a line of prose
                self._emit(" | ".join(row) + ("\n\n" if len(row) == 1 else "\n"))
        elif tag == "dt" and self._term is not None:
            term, self._term = " ".join("".join(self._term).split()).rstrip(":").rstrip(), None
            if term:
                self._terms.append(term)
        elif tag == "dd" and self._cell is None and self._heading is None and self._pre is None:
            self._flush_terms()
            self._emit("\n\n")
        elif tag == "dl":
            self._flush_terms()
            self._text("\n")
        elif tag in _HEADINGS and self._heading is not None and _HEADINGS[tag] == self._heading[0]:
            level, words = self._heading
            self._heading = None
            line = " ".join("".join(words).split()).rstrip(_PERMALINK).rstrip()
            if level == 1 and self.h1 is None:
                self.h1 = [line]
            self._emit("\n\n" + "#" * level + " " + line + "\n\n")
        elif tag in _BREAKS and tag != "br":
            self._text("\n")

    def data(self, text: str) -> None:
        if self._in_title and self.title is not None:
            self.title.append(text)
        elif not self._count["drop"]:
            self._text(text)

    def _text(self, text: str) -> None:
        if self._pre is not None:
            self._pre.append(text)
        elif self._cell is not None:
            self._cell.append(" " if text == "\n" else text)
        elif self._heading is not None:
            self._heading[1].append(text)
        elif self._term is not None:
            self._term.append(text)
        elif self._row is None and not (self._count["table"] and text.isspace()):
            self._emit(text)  # (blanks between a table's rows are layout, not text)

    def _emit(self, text: str) -> None:
        if self._lead:   # the description's text starts on its ": " line
            if text.isspace():
                return
            self._lead, text = False, text.lstrip()
        self._add(False, text)

    def _flush_terms(self) -> None:
        """Terms without a description (a `<dt>` with no `<dd>`) are a paragraph of their own."""
        self._lead = False
        if self._terms:
            terms, self._terms = ", ".join(self._terms), []
            self._emit("\n\n" + terms + "\n\n")

    def _add(self, pre: bool, text: str) -> None:
        self._lead = self._lead and not pre   # a description opening with code: its ": " line stays empty
        self.parts.append((pre, text))
        if self._count["main"]:
            self.main.append((pre, text))
            return
        lines = text.split("\n")   # (the text outside the main regions: measured, for `html_to_text`'s choice)
        for n, line in enumerate(lines):
            chars = len(line.strip())
            self.outside += chars
            self._run = self._run + chars if n == 0 else chars
            self.outside_prose = self.outside_prose or self._run >= _PROSE_CHARS

    def comment(self, text: str) -> None:  # comments are not visible text
        return None

    def close(self) -> _TextTarget:
        if self._heading is not None:  # a heading never closed: keep its text as text
            words, self._heading = self._heading[1], None
            self._emit("".join(words))
        if self._term is not None:
            self._terms.append(" ".join("".join(self._term).split()))
            self._term = None
        self._flush_terms()
        if self._pre is not None:
            code, self._pre = "".join(self._pre), None
            self._add(True, code)
        return self


def _normal(text: str) -> str:
    text = re.sub(r"[ \t\r\f\v]+", " ", text)  # runs of blanks first: then " *\n *" is linear
    text = re.sub(r" *\n *", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n ")


def _fenced(code: str) -> str:
    code = code.replace("\r\n", "\n").strip("\n")
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{code.rstrip()}\n{fence}" if code.strip() else ""


def _assemble(parts: list[tuple[bool, str]]) -> str:
    """Text runs normalised (blank runs collapsed), code blocks as they were, fenced."""
    blocks: list[str] = []
    run: list[str] = []
    for pre, text in parts:
        if not pre:
            run.append(text)
            continue
        blocks.append(_normal("".join(run)))
        run = []
        blocks.append(_fenced(text))
    blocks.append(_normal("".join(run)))
    return "\n\n".join(block for block in blocks if block)


def html_to_text(raw: str) -> tuple[str, str | None]:
    """The main content of an HTML page as text (headings as `#` lines, code fenced, tables as rows), and its title.

    Args:
        raw: the page as text (NUL bytes and lone surrogates already removed).

    Returns:
        The text (blank runs collapsed outside code) and the `<title>`, else the first `<h1>`, else None.
    """
    target = _TextTarget()
    parser = etree.HTMLParser(target=target, recover=True, no_network=True, huge_tree=True, remove_comments=True)
    parser.feed(raw)
    parser.close()
    title = " ".join("".join(target.title or target.h1 or []).split()).rstrip(_PERMALINK).rstrip() or None
    main = _assemble(target.main)
    holds_page = len(main) >= _MIN_MAIN_CHARS and target.outside * 2 < len(main) and not target.outside_prose
    return (main if holds_page else _assemble(target.parts)), title
