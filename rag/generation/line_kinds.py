"""What a line of a chunk is, before it is quoted: code, a heading, or a run of figures.

`rag.generation.context_units` leaves code and headings out of the quotable units and makes a line of
mostly figures a table row.

Example:
    >>> is_code_like('0.00}, ) chain.invoke({"question": q})'), is_code_like("Call `rag.chain()` to ask.")
    (True, False)
    >>> title_line("Converting Documents from Emacs"), title_line("git-clean - Remove untracked files")
    (True, False)
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["FENCE", "SENTENCE_END", "first_code_line", "is_code_like", "mostly_numbers", "prose_lines", "title_line"]

_PROMPT = re.compile(r"^\s*(>>>|\.\.\.\s|\$ |% |In \[\d+\]:)")   # doctest and shell prompts

_INLINE_CODE = re.compile(r"`[^`]*`")
_CODE_CHARS = set("{}[]()=<>;|\\_`#@")
_CALL = re.compile(r"[A-Za-z_]\w*(?:\.\w+)*\([^)]*\)")
_ASSIGN = re.compile(r"^\W*[A-Za-z_][\w.\[\]]*\s=\s|[;(]\s*\w+\s=\s")   # "x = 1", not "precision = a / b"
#: a line that ends as a sentence does (a full stop, a colon, a closing quote or bracket after one)
SENTENCE_END = re.compile(r"[.!?:;…][\"'”’)\]]*$")
#: a fence line of a code block ("```python", "~~~"); group 2 is its info string
FENCE = re.compile(r"^\s*(```|~~~)\s*(\S*)")
_SMALL_WORDS = frozenset("a an the and or of in on for to from with by at as vs".split())


def is_code_like(text: str) -> bool:
    """True for text that reads as code rather than prose (symbols, calls, assignments).

    Inline code in backticks inside a prose sentence counts as one word; a sentence that is mostly
    inline code (a list of names) is code.

    Example:
        >>> is_code_like('0.00}, ) chain.invoke({"question": q})'), is_code_like("Call `rag.chain()` to ask.")
        (True, False)
    """
    prose = _INLINE_CODE.sub("x", text)
    chars = [c for c in prose if not c.isspace()]
    if not chars:
        return False
    if sum(len(m) for m in _INLINE_CODE.findall(text)) > 0.5 * len(text):  # a list of identifiers
        return True
    symbols = sum(c in _CODE_CHARS for c in chars) / len(chars)
    words = prose.split()
    calls = len(_CALL.findall(prose))
    identifiers = sum(1 for w in words if re.search(r"[a-z]_[a-z]|[a-z]\.[a-z_]+\(|^[a-z]+[A-Z]\w*$", w))
    return symbols >= 0.08 or (calls and (calls + identifiers) / max(len(words), 1) >= 0.2) or bool(_ASSIGN.search(prose))


def title_line(line: str) -> bool:
    """A line in title case without a full stop: a heading, not a statement."""
    words = [w for w in line.split() if w[:1].isalpha() and w.lower() not in _SMALL_WORDS]
    return not SENTENCE_END.search(line) and " - " not in line and 2 <= len(words) <= 10 and \
        sum(w[0].isupper() for w in words) >= 0.75 * len(words) and not line.isupper()


def mostly_numbers(text: str) -> bool:
    """A run of figures ("retrieve: hybrid + RSE; 8.4; 11.5"), not a statement: a table fragment."""
    words = text.split()
    return sum(any(c.isdigit() for c in w) for w in words) >= 0.4 * len(words)


def first_code_line(lines: Sequence[str]) -> str:
    """The first lines of a code block, as code spans: an import (it names what to use) and the first line
    that does something (not a comment): "`from rag.generation.pricing import register_price` `register_price(...)`"."""
    spans: list[str] = []
    for raw in lines[1:] if lines and FENCE.match(lines[0]) else lines:
        line = re.sub(r"^(?:>>>|\$|%)\s", "", raw.strip())
        if FENCE.match(raw) or len(spans) == 2:
            break
        importing = bool(re.match(r"(?:from|import)\s", line))
        if line and not line.startswith("#") and len(line) <= 120 and (importing and not spans or not importing):
            spans.append(f"`{line}`")
            if not importing:
                break
    return " ".join(spans)


def _fence_start_inside(lines: Sequence[str]) -> bool:
    """Whether the chunk starts inside a fenced block: its first fence closes one.

    A fence with an info string (```python) always opens a block, so a bare first fence closes one
    when there is an odd number of fences or the next fence opens with an info string.
    """
    fences = [m for line in lines if (m := FENCE.match(line))]
    if not fences or fences[0].group(2):
        return False
    return len(fences) % 2 == 1 or (len(fences) > 1 and bool(fences[1].group(2)))


def prose_lines(text: str) -> list[str | None]:
    """The chunk's lines with code lines replaced by None (fences, doctest and shell prompts)."""
    lines = text.splitlines()
    in_code = _fence_start_inside(lines)
    out: list[str | None] = []
    for raw in lines:
        fence = FENCE.match(raw)
        if fence:
            in_code = not in_code if not fence.group(2) else True
            out.append(None)
        elif in_code or _PROMPT.match(raw):
            out.append(None)
        else:
            out.append(" ".join(raw.split()))
    return out
