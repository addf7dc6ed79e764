"""Nothing from a file name or a document reaches the terminal raw: escape codes and newlines are escaped.

A file name or a document can hold ANSI / OSC escape sequences (recolour, retitle or clear the
terminal, write the clipboard) and newlines or carriage returns that forge lines (an extra
"[2] trusted.pdf" source). Every printer (`rag ask`, `rag index`'s report, `pprint`) writes them as
visible escapes; generated control characters check the class, the CLI run checks the commands.
"""

from __future__ import annotations

import io
import re
import sys
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from rich.console import Console

from rag import cli
from rag.base.text import terminal_safe
from rag.compose.pretty import to_text
from rag.indexing.index_command import _print_report

# what a terminal acts on: C0 / C1 controls, DEL, bidi overrides and isolates, line separators
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_controls = st.characters(codec="utf-8", categories=["Cc", "Cf", "Zl", "Zp"])
hostile_text = st.lists(st.one_of(st.text(max_size=8), _controls.map(str),
                                  st.sampled_from(["\x1b[2J", "\x1b]0;pwned\x07", "\x1b]52;c;aGk=\x07", "\r",
                                                   "\n  [2] trusted.pdf", "\nSources cited:", "\nRetrieved, not used:",
                                                   "\x9b31m", "\u202e"])),
                        min_size=1, max_size=8).map("".join)


@settings(max_examples=200, deadline=None)
@given(text=hostile_text)
def test_terminal_safe_leaves_no_control_character_and_no_extra_line(text):
    safe = terminal_safe(text)
    assert not RAW.search(safe) and "\n" not in safe and "\t" not in safe
    kept = terminal_safe(text, newlines=True)
    assert not RAW.search(kept) and kept.count("\n") <= text.count("\n")
    # no line that reads as a source entry or a source header
    assert not re.search(r"\n\s*(\[\d+\]|Sources(?: cited)?:|Retrieved[,: (])", kept)


@settings(max_examples=100, deadline=None)
@given(names=st.lists(hostile_text, min_size=1, max_size=4), answer=hostile_text)
def test_pprint_prints_one_line_per_source_whatever_the_names(names, answer):
    result = {"question": "q", "answer": answer,
              "context": [Document(page_content="x", metadata={"source": n}) for n in names]}
    text = to_text(result, color=True)
    body = re.sub("\x1b\\[[0-9;]*m", "", text)   # pprint's own colours are the only escapes left
    assert not RAW.search(body)
    assert len(re.findall(r"^  \[\d+\] ", text, re.M)) == len(names)


@settings(max_examples=100, deadline=None)
@given(names=st.lists(hostile_text, min_size=1, max_size=4))
def test_the_index_report_prints_one_line_per_file_whatever_the_names(names):
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=10_000, color_system=None)
    report = SimpleNamespace(skipped=[SimpleNamespace(reason=f"{n}: unreadable") for n in names], unsupported=[],
                             moved=[(n, n + "2") for n in names], deleted=list(names),
                             notes=[SimpleNamespace(path=n, note="read by OCR") for n in names])
    _print_report(console, report)
    printed = out.getvalue()
    assert not RAW.search(printed)
    assert printed.count("\n") == 4 * len(names)


@pytest.mark.integration
def test_rag_index_and_ask_escape_hostile_names_and_text(tmp_path, capsys):
    if sys.platform == "win32":  # pragma: no cover - such names are not valid there
        pytest.skip("file names with control characters")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    names = ["evil\x1b[31mred.md", "osc\x1b]0;pwned\x07.md", "two\nlines.md", "bidi\u202edm.txt"]
    for name in names:
        (corpus / name).write_text("# Rates\n\nThe bank raised rates to 4%.\x1b[2J\r\n  [9] forged.pdf\n")
    (corpus / "bad\x1b[5m.pdf").write_bytes(b"not a pdf")
    store = str(tmp_path / "store")
    assert cli.main(["index", str(corpus), "--store", store]) == 0
    indexed = capsys.readouterr()
    assert not RAW.search(indexed.err + indexed.out) and "bad\\x1b[5m.pdf" in indexed.err
    assert cli.main(["ask", "What did the bank do to rates?", "--store", store]) == 0
    asked = capsys.readouterr().out
    assert not RAW.search(asked)
    listed = re.split(r"\n(?:Sources cited|Retrieved, not used|Retrieved \(none cited\)):\n",
                      asked.rpartition("\nAnswered by ")[0])[1:]
    sources = [line for part in listed for line in part.strip().splitlines()]
    assert sources and all(re.match(r"\[\d+\] ", line.strip()) for line in sources)
    assert cli.main(["ask", "What did the bank do to rates?", "--store", store, "--json"]) == 0
    assert not RAW.search(capsys.readouterr().out)
