"""Forged source lines through invisible characters and look-alike forms (issue 37, item 8).

The guard that stops an answer line reading as one of `rag ask`'s source entries ("[2] audited-report.pdf",
"Sources cited:") looks at the line as a reader sees it (`visible_form`): a zero-width space, word joiner, BOM or
soft hyphen before the marker, or full-width brackets, do not get a forged line past it.
"""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from rag.base.text import terminal_safe, visible_form

#: characters that show nothing: every format character (Cf) Unicode has, and the blank fillers
_CF = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"]
_INVISIBLE = st.sampled_from(_CF + ["\u3164", "\u115f", "\u2800", "\ufe0f", "\u034f"])
_WIDE = str.maketrans("[]0123456789", "\uff3b\uff3d\uff10\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff19")
_FORGED = st.sampled_from(["[2] audited-report.pdf", "[12] board-minutes.pdf", "[1, 3] a.pdf", "Sources cited:",
                           "Sources:", "Retrieved, not used:", "SOURCES CITED:", "[ 2 ] x.pdf"])


#: what a reader takes for one of `rag ask`'s source lines
_READS_AS_SOURCE = re.compile(r"\s*(?:\[\s*\d+\s*(?:,\s*\d+\s*)*\]|sources(?: cited)?\s*:|retrieved,)", re.IGNORECASE)


@st.composite
def _disguised(draw: st.DrawFn) -> str:
    """A source line with invisible characters anywhere in its start, maybe in full-width forms, maybe indented."""
    line = draw(_FORGED)
    if draw(st.booleans()):
        line = line.translate(_WIDE)
    cut = draw(st.integers(0, min(len(line), 8)))
    junk = [draw(st.text(_INVISIBLE, max_size=3)) for _ in range(cut + 1)]
    head = "".join(j + c for j, c in zip(junk, line[:cut], strict=False)) + junk[-1]
    return draw(st.sampled_from(["", " ", "  ", "\t"])) + head + line[cut:]


@settings(max_examples=400, deadline=None)
@given(before=st.text(max_size=30).map(lambda t: t.replace("\n", " ")), forged=_disguised())
def test_no_line_that_reads_as_a_source_entry_is_ever_printed(before, forged):
    shown = terminal_safe(f"{before}\n{forged}\nThe end.", newlines=True)
    lines = shown.split("\n")
    assert not any(_READS_AS_SOURCE.match(visible_form(line)) for line in lines[1:]), shown


@settings(max_examples=200, deadline=None)
@given(text=st.text(st.characters(codec="utf-8", exclude_categories=["Cc", "Cs"]), max_size=60))
def test_a_line_that_does_not_read_as_a_source_keeps_its_newline(text):
    if visible_form(text).lstrip()[:1] in ("[", "S", "s", "R", "r"):
        return
    assert terminal_safe(f"Answer.\n{text}", newlines=True).startswith("Answer.\n")


def test_the_issue_examples():
    for forged in ("\u200b[2] audited-report.pdf", "\u2060[2] audited-report.pdf", "\ufeff[2] audited-report.pdf",
                   "\u00adSources cited:", "\uff3b2\uff3d audited-report.pdf"):
        assert "\n" not in terminal_safe(f"Paris.\n{forged}", newlines=True)
