"""HTML to text for indexing: visible text, headings as markdown `#` lines, in linear time.

The page is read by libxml2's HTML parser (through lxml) in streaming mode: the parser calls
`_TextTarget` for each start tag, end tag and run of text, and nothing else is built, so the
time and memory grow linearly with the file whatever it holds (200,000 `<`, unclosed comments,
attributes that never end, 100,000 nested tags). `<script>`, `<style>`, `<template>` and
`<head>` content is dropped, except the `<title>`.

Example:
    >>> text, title = html_to_text("<title>Guide</title><h2>Install</h2><p>Run <b>pip</b>.</p>")
    >>> text.splitlines(), title
    (['## Install', '', 'Run pip.'], 'Guide')
"""

from __future__ import annotations

import re
from typing import Any

from lxml import etree

__all__ = ["html_to_text"]

_DROPPED = frozenset({"script", "style", "head", "template", "noscript"})
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_BREAKS = frozenset({"br", "p", "div", "li", "tr", "table", "ul", "ol", "pre", "blockquote", "section",
                     "article", "dd", "dt", "hr"})


class _TextTarget:
    """Parser target that collects visible text, the `<title>` and the first `<h1>`."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.title: list[str] | None = None  # text of the first <title>, once it opened
        self.h1: list[str] | None = None  # text of the first <h1>
        self._dropping = 0  # depth inside dropped elements
        self._in_title = False
        self._heading: tuple[int, list[str]] | None = None  # level, text so far

    def start(self, tag: Any, attrib: Any) -> None:
        tag = str(tag).lower()
        if tag == "title" and self.title is None:
            self.title, self._in_title = [], True
        elif tag in _DROPPED:
            self._dropping += 1
        elif tag in _HEADINGS and self._heading is None and not self._dropping:
            self._heading = (_HEADINGS[tag], [])
        elif tag == "br":
            self._text("\n")

    def end(self, tag: Any) -> None:
        tag = str(tag).lower()
        if tag == "title":
            self._in_title = False
        elif tag in _DROPPED:
            self._dropping = max(0, self._dropping - 1)
        elif tag in _HEADINGS and self._heading is not None and _HEADINGS[tag] == self._heading[0]:
            level, words = self._heading
            self._heading = None
            line = " ".join("".join(words).split())
            if level == 1 and self.h1 is None:
                self.h1 = [line]
            self.parts.append("\n\n" + "#" * level + " " + line + "\n\n")
        elif tag in _BREAKS and tag != "br":
            self._text("\n")

    def data(self, text: str) -> None:
        if self._in_title and self.title is not None:
            self.title.append(text)
        elif not self._dropping:
            self._text(text)

    def _text(self, text: str) -> None:
        (self._heading[1] if self._heading is not None else self.parts).append(text)

    def comment(self, text: str) -> None:  # comments are not visible text
        return None

    def close(self) -> _TextTarget:
        if self._heading is not None:  # a heading never closed: keep its text as text
            self.parts.append("".join(self._heading[1]))
            self._heading = None
        return self


def html_to_text(raw: str) -> tuple[str, str | None]:
    """Visible text of an HTML page with headings turned into markdown `#` lines, and its title.

    Args:
        raw: the page as text (NUL bytes and lone surrogates already removed).

    Returns:
        The text (blank runs collapsed) and the `<title>`, else the first `<h1>`, else None.
    """
    target = _TextTarget()
    parser = etree.HTMLParser(target=target, recover=True, no_network=True, huge_tree=True, remove_comments=True)
    parser.feed(raw)
    parser.close()
    title = " ".join("".join(target.title or target.h1 or []).split()) or None
    text = "".join(target.parts)
    text = re.sub(r"[ \t\r\f\v]+", " ", text)  # runs of blanks first: then " *\n *" is linear
    text = re.sub(r" *\n *", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip(), title
