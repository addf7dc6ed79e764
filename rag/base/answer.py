"""`Answer`: what one answerer said about one question, and what the checks found.

An `Answer` *is* the answer text (a `str`), so `out["answer"]` reads, compares and serialises as
it always has; its fields say the rest:

- `cited`: the source numbers `[n]` the answer cites (dangling ones already removed);
- `refused`: the answer does not assert anything (it says it does not know, or is not sure);
- `confidence`: how sure the answerer was (0..1; None when the answerer does not say);
- `passage`: when not sure, the closest passage, with its source number, shown beside the refusal;
- `support`: one mark per answer sentence (`rag.checks.support.SentenceSupport` as a dict);
- `flags`: what the checks found (`invalid_citations`, `uncited_sentences`, `unsupported_sentences`,
  `does_not_answer`, `no_answer`, `suspected_injection`);
- `answerer`: which model or answerer wrote it, in a few words;
- `report`: the citation check (`precision`, `recall`, per-sentence `checks`) and the support `summary`.

`Answer.fields()` is the JSON shape every door returns (`rag ask --json`, `/invoke`, `/stream`'s
done event, `/v1/chat/completions`' `rag` extension, MCP `ask`), so they are equal by construction.

Example:
    >>> a = Answer("Rome is in Italy. [1]", cited=[1], confidence=0.9)
    >>> a == "Rome is in Italy. [1]", a.cited, a.refused
    (True, [1], False)
    >>> sorted(a.fields())[:4]
    ['answer', 'answerer', 'cited', 'confidence']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["NO_ANSWER", "NOT_SURE", "Answer", "as_answer", "flag_notes", "passage"]

#: What an answerer says when the context holds no answer.
NO_ANSWER = "I don't know: the retrieved context does not answer this question."
#: What the offline fallback says below its confidence threshold (the closest passage is in `Answer.passage`).
NOT_SURE = "I'm not sure the retrieved context answers this; the closest passage is shown below."


class Answer(str):
    """The answer text, with what is known about it (see the module docstring)."""

    cited: list[int]
    refused: bool
    confidence: float | None
    passage: dict[str, Any] | None
    support: list[dict[str, Any]]
    flags: list[str]
    invalid: list[int]
    answerer: str
    report: dict[str, Any]

    def __new__(cls, text: str = "", *, cited: Sequence[int] = (), refused: bool = False,
                confidence: float | None = None, passage: Mapping[str, Any] | None = None,
                support: Sequence[Mapping[str, Any]] = (), flags: Sequence[str] = (), invalid: Sequence[int] = (),
                answerer: str = "", report: Mapping[str, Any] | None = None) -> Answer:
        self = super().__new__(cls, text)
        self.cited = [int(n) for n in cited]
        self.refused = bool(refused)
        self.confidence = None if confidence is None else round(float(confidence), 4)
        self.passage = dict(passage) if passage else None
        self.support = [dict(s) for s in support]
        self.flags = list(flags)
        self.invalid = [int(n) for n in invalid]
        self.answerer = answerer
        self.report = dict(report or {})
        return self

    @property
    def text(self) -> str:
        return str(self)

    def replace(self, text: str | None = None, **fields: Any) -> Answer:
        """A copy with another text and / or other fields."""
        values = {**self._values(), **fields}
        return Answer(self.text if text is None else text, **values)

    def _values(self) -> dict[str, Any]:
        return {"cited": self.cited, "refused": self.refused, "confidence": self.confidence, "passage": self.passage,
                "support": self.support, "flags": self.flags, "invalid": self.invalid, "answerer": self.answerer,
                "report": self.report}

    def fields(self) -> dict[str, Any]:
        """The answer as JSON-ready data: `answer` (the text) and every field."""
        return {"answer": self.text, **self._values()}

    def citation_fields(self) -> dict[str, Any]:
        """The citation check as data: cited and dangling numbers, suspicious chunks, precision, recall, checks."""
        report = self.report
        return {"cited": self.cited, "invalid": self.invalid, "suspicious": report.get("suspicious", []),
                "precision": report.get("precision"), "recall": report.get("recall"), "checks": report.get("checks", [])}

    def __getnewargs__(self) -> tuple[str]:   # copy / deepcopy keep the text; the fields ride in __dict__
        return (self.text,)

    def __repr__(self) -> str:   # the text's own repr: printed outputs read as they always have; the fields: fields()
        return str.__repr__(self)


def passage(n: int, text: str, label: str = "") -> dict[str, Any]:
    """The closest passage shown beside a refusal: its source number, text and label."""
    return {"n": int(n), "text": text, "label": label}


def as_answer(value: Any, *, answerer: str = "") -> Answer:
    """Any generation output as an `Answer` (a plain string, an AI message, or an Answer)."""
    if isinstance(value, Answer):
        return value if value.answerer or not answerer else value.replace(answerer=answerer)
    content = getattr(value, "content", value)
    return Answer("" if content is None else str(content), answerer=answerer)


_FLAG_NOTES = {
    "uncited_sentences": "the answer cites no source for some of its sentences",
    "unsupported_sentences": "some sentences are not supported by the sources they cite",
    "invalid_citations": "the answer cited sources that were not retrieved (removed)",
    "does_not_answer": "the answer may not answer the question",
    "suspected_injection": "a retrieved source holds instructions aimed at the model (ignored as evidence)",
}


def flag_notes(answer: Any) -> list[str]:
    """One line per check that should make a reader wary (what `rag ask` prints under the answer)."""
    found = as_answer(answer)
    if found.refused:
        return [_FLAG_NOTES[f] for f in found.flags if f == "suspected_injection"]
    return [_FLAG_NOTES[f] for f in found.flags if f in _FLAG_NOTES]
