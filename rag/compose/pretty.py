"""`pprint(result)` for the terminal and `to_html(result)` for notebooks and the web.

`result` is a `RAGResult` (from `airag(..., return_all=True)`) or a chain's output dict
(`rag.chain().invoke(...)`: `question`, `answer`, `context`); a dict has no support scores, so
its answer is shown as it is, with the numbered sources.

Both show the question, the answer sentence by sentence coloured by support (green: supported,
yellow: partly supported, red: unsupported, grey: "I don't know"), a `[chunk, score]` marker
after each sentence naming the best-supporting source and its score, the flags, and the sources:
those the answer cites first, then those retrieved but not used.

"Quoted from the source" and "answers the question" are two signals: a sentence the checks found
not to answer the question (`answers` false, `rag.checks.relevance`) is never shown as
supported, whatever its support score: it is shown in magenta (`rag-not-answering`) and its
marker says "does not answer".

Colours are ANSI escape codes: `color=None` colours only when the output is a terminal.
HTML uses CSS classes (`rag-supported`, `rag-partial`, `rag-unsupported`, `rag-no-answer`,
`rag-marker`, `rag-sources`) with a small default stylesheet you can leave out (`css=False`).

Example:
    >>> r = RAGResult(question="Where is Rome?", final_answer="Rome is in Italy. [1]",
    ...               support=[{"sentence": "Rome is in Italy.", "chunk": 1, "score": 0.93, "label": "supported"}],
    ...               sources=[{"n": 1, "label": "italy.txt"}])
    >>> print(to_text(r, color=False))
    Question: Where is Rome?
    Answer: Rome is in Italy. [1, 0.93]
    Sources cited:
      [1] italy.txt
"""

from __future__ import annotations

import html
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from rag.base.errors import InputError
from rag.base.result import RAGResult
from rag.base.text import terminal_safe
from rag.checks.citations import source_map
from rag.checks.sentences import parse_answer

__all__ = ["ANSI", "as_result", "pprint", "to_html", "to_text"]

ANSI = {"not_answering": "\033[35m", "supported": "\033[32m", "partial": "\033[33m", "unsupported": "\033[31m", "no_answer": "\033[90m",
        "bold": "\033[1m", "dim": "\033[2m", "reset": "\033[0m"}

_CSS = """<style>
.rag-result{font-family:system-ui,sans-serif;line-height:1.5}
.rag-supported{color:#1a7f37}.rag-partial{color:#9a6700}.rag-unsupported{color:#cf222e}
.rag-no-answer{color:#6e7781}.rag-not-answering{color:#8250df}.rag-marker{font-size:.8em;color:#6e7781}.rag-flags{color:#cf222e}
</style>"""


def as_result(result: RAGResult | Mapping[str, Any]) -> RAGResult:
    """A `RAGResult` for a chain's output dict (`question`, `answer`, `context`, extras); a result as it is.

    Raises:
        InputError: for anything else, or a dict without `question` and `answer`.

    Example:
        >>> as_result({"question": "Where?", "answer": "Paris. [1]", "context": []}).final_answer
        'Paris. [1]'
    """
    if isinstance(result, RAGResult):
        return result
    if not isinstance(result, Mapping) or "question" not in result or "answer" not in result:
        got = f"a dict with keys {sorted(map(str, result))}" if isinstance(result, Mapping) else type(result).__name__
        raise InputError(f"pprint takes a RAGResult or a chain output dict with 'question' and 'answer'; got {got}")
    context = list(result.get("context") or [])
    question = result["question"]
    if isinstance(question, Mapping):  # a chat chain's input dict
        question = question.get("question", "")
    return RAGResult(question=str(question), answer=str(result["answer"]), final_answer=str(result["answer"]),
                     context=context, sources=source_map(context),
                     standalone_question=result.get("standalone_question"))


def _marker(item: dict[str, Any]) -> str:
    if item.get("chunk") is None:
        return "[-, 0.00]"
    off = ", does not answer" if item.get("answers") is False else ""
    return f"[{item['chunk']}, {float(item.get('score', 0.0)):.2f}{off}]"


def _style(item: dict[str, Any]) -> str:
    """The sentence's display label: its support label, unless it does not answer the question."""
    if item.get("answers") is False and item.get("label") != "no_answer":
        return "not_answering"
    return item.get("label", "unsupported")


def _answer_parts(result: RAGResult) -> list[tuple[str, str, str]]:
    """(label, sentence, marker) per sentence; falls back to the bare answer without annotations."""
    if result.support:
        return [(_style(s), s.get("sentence", ""), _marker(s)) for s in result.support]
    answer = result.final_answer or result.answer or ""
    return [("plain", answer, "")] if answer else []


def to_text(result: RAGResult | Mapping[str, Any], *, color: bool = True) -> str:
    """The text `pprint` prints (with ANSI colours when `color`)."""
    result = as_result(result)
    def paint(text: str, style: str) -> str:
        return f"{ANSI[style]}{text}{ANSI['reset']}" if color and style in ANSI else text

    safe = terminal_safe   # text from documents and file names: no escape codes or forged lines reach the terminal
    lines = [f"{paint('Question:', 'bold')} {safe(result.question)}"]
    if result.standalone_question and result.standalone_question != result.question:
        lines.append(f"{paint('Standalone question:', 'bold')} {safe(result.standalone_question)}")
    parts = [f"{paint(safe(sentence, newlines=True), label)} {paint(marker, 'dim')}".rstrip()
             for label, sentence, marker in _answer_parts(result)]
    lines.append(f"{paint('Answer:', 'bold')} {' '.join(parts)}")
    if result.flags:
        lines.append(f"{paint('Flags:', 'bold')} {paint(', '.join(result.flags), 'unsupported')}")
    cited, rest = _split_sources(result)
    for title, group in (("Sources cited:", cited), ("Retrieved, not used:" if cited else "Sources:", rest)):
        if group:
            lines.append(paint(title, "bold"))
            lines.extend(f"  [{s['n']}] {safe(s.get('label') or s.get('source') or '?')}" for s in group)
    return "\n".join(lines)


def _split_sources(result: RAGResult) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(sources the answer cites, sources retrieved but not used), each in number order."""
    cited = set((result.citations or {}).get("cited") or [])
    if not cited:
        cited = {n for part in parse_answer(result.final_answer or result.answer or "") for n in part.citations}
    return [s for s in result.sources if s["n"] in cited], [s for s in result.sources if s["n"] not in cited]


def pprint(result: RAGResult | Mapping[str, Any], *, file: TextIO | None = None, color: bool | None = None) -> None:
    """Print the question, the support-coloured answer with `[chunk, score]` markers, and the sources.

    Args:
        result: a `RAGResult` from `airag(..., return_all=True)`, or a chain's output dict
            (`rag.chain().invoke(...)`), whose answer is printed without support colours.
        file: where to print (default: stdout).
        color: ANSI colours on or off; None: on when `file` is a terminal.
    """
    file = file or sys.stdout
    if color is None:
        color = bool(getattr(file, "isatty", lambda: False)())
    print(to_text(result, color=color), file=file)


def to_html(result: RAGResult | Mapping[str, Any], *, css: bool = True) -> str:
    """The same view as HTML; sentences carry `rag-<label>` classes and a `title` with the scores."""
    result = as_result(result)
    e = html.escape
    out = [_CSS] if css else []
    out.append('<div class="rag-result">')
    out.append(f'<p class="rag-question"><b>Question:</b> {e(result.question)}</p>')
    if result.standalone_question and result.standalone_question != result.question:
        out.append(f'<p class="rag-standalone"><b>Standalone question:</b> {e(result.standalone_question)}</p>')
    spans = []
    for label, sentence, marker in _answer_parts(result):
        css_class = "rag-" + label.replace("_", "-")
        mark = f' <span class="rag-marker">{e(marker)}</span>' if marker else ""
        spans.append(f'<span class="{css_class}" title="{e(label)}">{e(sentence)}</span>{mark}')
    out.append(f'<p class="rag-answer"><b>Answer:</b> {" ".join(spans)}</p>')
    if result.flags:
        out.append(f'<p class="rag-flags"><b>Flags:</b> {e(", ".join(result.flags))}</p>')
    cited, rest = _split_sources(result)
    for title, css_class, group in (("Sources cited", "rag-sources", cited),
                                    ("Retrieved, not used" if cited else "Sources", "rag-sources rag-unused", rest)):
        if group:
            items = "".join(f'<li value="{int(s["n"])}">{e(str(s.get("label") or s.get("source") or "?"))}</li>'
                            for s in group)
            out.append(f'<p><b>{title}:</b></p><ol class="{css_class}">{items}</ol>')
    out.append("</div>")
    return "\n".join(out)
