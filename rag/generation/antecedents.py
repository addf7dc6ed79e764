"""What a quoted unit needs in front of it to name what the question asks for.

An identifier question ("Which adapter ...?", "Which command ...?") is answered by a name. The unit
that answers best may not state it:

- its page is about the name: "The command saves your local modifications away" on git-stash(1) is
  quoted as "git-stash(1): The command saves ..." (the title's name in front);
- it refers back to the sentence before it: "Requests ships with a single Transport Adapter, the
  HTTPAdapter. This adapter provides the default Requests interaction with HTTP and HTTPS ..." — a unit
  starting with "This / These / It / They / Such" that states no name of the kind asked for is quoted
  with the sentence before it in the same chunk, when that sentence states one.

Example:
    >>> from rag.generation.context_units import units_of_chunk
    >>> chunk = "Requests ships with one adapter, the HTTPAdapter. This adapter provides HTTP and HTTPS."
    >>> unit = units_of_chunk(chunk)[1]
    >>> named_unit(unit, "identifier", "Which adapter provides HTTP and HTTPS?", [chunk], {})
    'Requests ships with one adapter, the HTTPAdapter. This adapter provides HTTP and HTTPS.'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rag.generation.context_units import Unit, units_of_chunk
from rag.generation.question_types import has_answer_of_type, title_name

__all__ = ["named_unit"]

_REFERS_BACK = re.compile(r"^(?:This|These|That|Those|It|They|Such)\b")


def _title(unit: Unit) -> str:
    return str(unit.metadata.get("title") or "")


def _before(unit: Unit, docs: Sequence[Any], cache: dict[int, list[Unit]]) -> str:
    """The sentence before `unit` in its chunk ("" for the first)."""
    if unit.source not in cache:
        doc = docs[unit.source - 1] if 0 < unit.source <= len(docs) else ""
        text, meta = (doc, {}) if isinstance(doc, str) else (doc.page_content, doc.metadata)
        cache[unit.source] = units_of_chunk(text, unit.source, meta)
    units = cache[unit.source]
    at = next((i for i, u in enumerate(units) if u.text == unit.text), 0)
    return units[at - 1].text if at > 0 and units[at - 1].kind == "sentence" else ""


def named_unit(unit: Unit, qtype: str, question: str, docs: Sequence[Any], cache: dict[int, list[Unit]]) -> str:
    """The unit's text, with what names the answer in front of it when the question asks for a name the
    unit does not state: the sentence it refers back to, else its page's title name."""
    if qtype != "identifier" or has_answer_of_type(unit.text, qtype, question):
        return unit.text
    if _REFERS_BACK.match(unit.text):
        before = _before(unit, docs, cache)
        if before and has_answer_of_type(before, qtype, question):
            return f"{before} {unit.text}"
    name = title_name(_title(unit))
    if not name or name.split("(")[0].lower() in unit.text.lower():
        return unit.text
    return f"{name}: {unit.text}"
