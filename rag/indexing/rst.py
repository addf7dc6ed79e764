"""reStructuredText read as text, with its section titles turned into markdown `#` headings and its
definition lists in the Markdown definition-list form.

An rst title is a line underlined (and optionally overlined) with one repeated punctuation
character; the order in which adornment styles first appear gives the levels, as in docutils.
Turning titles into `#` lines lets the chunker split rst files into sections and name them,
as it does for markdown. A definition list item (a term line after a blank line, its definition
indented directly under it) becomes the term line with the definition's first paragraph under it after
": ", dedented, as the HTML loader prints `<dl>` (`rag.indexing.definitions` reads it into the chunk's
metadata). Everything else is kept as written.

Example:
    >>> text, title = rst_to_markdown("=====\\nGuide\\n=====\\n\\nIntro.\\n\\nInstall\\n-------\\n\\nRun it.\\n")
    >>> print(text)
    # Guide
    <BLANKLINE>
    Intro.
    <BLANKLINE>
    ## Install
    <BLANKLINE>
    Run it.
    <BLANKLINE>
    >>> title
    'Guide'
"""

from __future__ import annotations

import re

__all__ = ["rst_to_markdown"]

_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1{2,}\s*$")  # 3+ of one punctuation character


_NOT_A_TERM = re.compile(r"^(?:\.\.|[-*+•|:]\s|:|>>>|\d+[.)]\s|#\.\s|\(?[A-Za-z0-9]{1,3}[.)]\s)|::\s*$")


def _definition(lines: list[str], i: int, previous_blank: bool) -> int:
    """How many indented lines directly under line `i` form the first paragraph of its definition (0: not a term)."""
    line = lines[i].rstrip("\r\n")
    if not (previous_blank and line.strip() and not line[0].isspace() and not _NOT_A_TERM.search(line)):
        return 0
    count = 0
    while i + 1 + count < len(lines) and lines[i + 1 + count][:1].isspace() and lines[i + 1 + count].strip():
        count += 1
    return count


def _is_adornment(line: str) -> bool:
    return bool(_ADORNMENT.match(line))


def rst_to_markdown(text: str) -> tuple[str, str | None]:
    """The text with rst section titles as `#` lines, and the first title (None without one)."""
    lines = text.splitlines(keepends=True)
    styles: list[tuple[str, bool]] = []
    out: list[str] = []
    title: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i].rstrip("\r\n")
        over = _is_adornment(line) and i + 2 < len(lines) and lines[i + 2].rstrip("\r\n") == line
        head = lines[i + 1].rstrip("\r\n") if over else line
        under = lines[i + 2 if over else i + 1].rstrip("\r\n") if i + (2 if over else 1) < len(lines) else ""
        previous_blank = not out or not out[-1].strip()
        if (head.strip() and not head[0].isspace() and not _is_adornment(head) and _is_adornment(under)
                and previous_blank and len(under.rstrip()) >= min(len(head.strip()), 3)):
            style = (under[0], over)
            if style not in styles:
                styles.append(style)
            name = head.strip()
            title = title or name
            out.append(f"{'#' * min(styles.index(style) + 1, 6)} {name}\n")
            i += 3 if over else 2
            continue
        out.append(lines[i])
        if count := _definition(lines, i, previous_blank):
            body = [line.strip() for line in lines[i + 1:i + 1 + count]]
            out += [f": {body[0]}\n", *(f"{line}\n" for line in body[1:])]
            i += count
        i += 1
    return "".join(out), title
