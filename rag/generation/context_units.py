"""The quotable units of retrieved chunks: whole sentences and labelled table rows.

An extractive answer quotes context, so what it may quote decides whether it reads well. A chunk
is split into units here, and what is not a statement is left out:

- code: fenced blocks (also a chunk that starts or ends inside one), doctest and shell lines, and
  "sentences" that are mostly symbols (`0.00}, ) chain.invoke(...)`);
- sentences cut by the chunk's edges: the first one when the chunk starts mid-sentence (a lower-case
  or punctuation start), the last one when a chunker cut the text before its full stop; and the
  halves of a sentence a code block interrupts (an unfinished line before it, a lower-case start after);
- headings, table rules and run-on text longer than `MAX_WORDS`; a sentence that only introduces
  a code block ("From the command line:", "the score is") is quoted with the block's first line,
  which is what it tells the reader: "... add your models: `register_price("my-model", ...)`".

Table rows are units of their own kind (`"row"`), quoted with their label and column header: a
Markdown row as `label (header: cell; header: cell)`; a row the loaders print as cells joined with
" | " (PDF and HTML tables) the same way, its columns named by the header lines above it (cells
joined with " | ", or a line of years: "2022 2021 2020"; a header with fewer cells spans the columns
under it: "Fiscal 2024 | Fiscal 2023" over eight columns); a PDF row (a label then numbers, one row per
line) followed by the nearest header line above it in brackets. The answerer quotes rows only when
the question asks for a value. `drop_near_duplicates` removes the copies overlapping chunks make.

Example:
    >>> units = context_units(["| year | rate |\\n|---|---|\\n| 2020 | 1.5% |\\n\\nRates fell in 2020."])
    >>> [(u.kind, u.text) for u in units]
    [('row', '2020 (rate: 1.5%)'), ('sentence', 'Rates fell in 2020.')]
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.documents import Document

from rag.base.text import split_sentences, tokenize
from rag.generation.entry_terms import ENTRY_PARAGRAPHS, api_term, name_term, option_term
from rag.generation.line_kinds import (
    SENTENCE_END,
    first_code_line,
    is_code_like,
    mostly_numbers,
    prose_lines,
    title_line,
)
from rag.generation.table_rows import is_pdf_row, is_row, names_under, nearest_header, row_cells, row_context

__all__ = ["ENTRY_PARAGRAPHS", "MAX_WORDS", "Unit", "context_units", "drop_near_duplicates", "is_code_like",
           "units_of_chunk"]

_SHORT_CHUNK = 300  # characters: a section this short was not cut by a chunk size limit
MAX_WORDS = 80  # longer "sentences" are run-on PDF text or lists flattened into one line
_MIN_WORDS = 3
_TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}")
_BULLET = re.compile(r"^(?:[-*•]|\d{1,3}[.)])\s+")
_ALNUM = re.compile(r"[^\W_]")
_PARAM = re.compile(r"^[A-Za-z_]\w* \([^()]*\) [–—-] \S")   # a Sphinx parameter entry: "code (int) – the ..."
_FIELD = re.compile(r"^[A-Z][\w-]*: \S")  # "License: MIT." is a statement of two words
_WORD = re.compile(r"[^\W\d_]{2,}")
_FIELD_CELL = re.compile(r"^[A-Z][\w-]*(?: [\w-]+){0,2}:$")   # a key-value table's label cell: "Default:"
_INTRO = re.compile(r":\s*$")  # "From the command line:" introduces a block; it states nothing
_CODE_START = re.compile(r"(?<=[.!?])\s+(?=`)")  # a sentence starting with inline code


@dataclass(frozen=True)
class Unit:
    """One quotable piece of the context.

    Attributes:
        text: what an answer quotes.
        source: the 1-based number of the context document (the `[n]` it is cited as).
        kind: "sentence" or "row".
        terms: extra text matched against the question but not quoted (a row's header).
        position: order within its document, for stable ties.
        lead: the first sentence of a reference entry's description ("-E: Don't use a saved environment ..."):
            what the entry is, before what else it says.
    """

    text: str
    source: int
    kind: str = "sentence"
    terms: str = ""
    position: int = 0
    lead: bool = False
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


class _Splitter:
    """Walks one chunk's lines and collects its units (see the module docstring)."""

    def __init__(self, source: int, metadata: Mapping[str, Any]) -> None:
        self.source = source
        self.metadata = metadata
        self.units: list[Unit] = []
        self.paragraph: list[str] = []
        self.table_header: list[str] | None = None
        self.table_rows: list[list[str]] = []
        self.recent: list[str] = []  # prose lines since the last blank, for PDF row headers
        self.first_paragraph = True
        self.starts_cut = False
        self.bullet = False  # the paragraph is a list item
        self.after_code = False  # the paragraph follows a code block
        self.terms: list[str] = []  # option names of a definition list, waiting for their description
        self.code = ""  # the first line of the code block an intro sentence ("... add your models:") leads to
        self.heading = ""  # the last Markdown heading of the chunk, for a field line under it ("Default: 8.")
        self.described: list[str] = []  # the first sentences under that heading
        self.api = ""  # the API entry ("werkzeug.utils.redirect()") whose parameter entries follow
        self.entry, self.entry_left = "", 0   # the entry term over the description being read, paragraphs left
        # a table chunk (`chunk_type="table"`): the header lines its reader found above it (as the chunker kept
        # them), the caption of a row with no short caption line of its own ("Total Stores at End of Quarter")
        self.caption = str(metadata.get("section") or "").replace(" / ", " ") if metadata.get("chunk_type") == "table" \
            else ""

    def add(self, text: str, kind: str, terms: str = "", lead: bool = False) -> None:
        self.units.append(Unit(text=text, source=self.source, kind=kind, terms=terms, position=len(self.units),
                               lead=lead, metadata=self.metadata))

    def flush(self, *, cut_end: bool = False, before_row: bool = False) -> None:
        """Turn the paragraph into sentences. `cut_end`: it stops where the chunk or a code block
        cut it, so a last sentence without its full stop is a fragment."""
        if not self.paragraph:
            return
        bullet, self.bullet = self.bullet, False
        if len(self.paragraph) == 1 and not cut_end and self._term(self.paragraph[0]):
            self.paragraph.pop()
            self.first_paragraph = False   # a chunk starting with a term ("work_mem (integer)") is not cut mid-sentence
            return
        terms, self.terms = self.terms, []
        if len(self.paragraph) == 1 and not SENTENCE_END.search(self.paragraph[0]):
            self.entry_left = 0   # a label line ("Example", "Notes") ends the entry's description
        entry = self.entry if self.entry_left > 0 else ""   # an entry's description (its first sentence quotes it)
        self.entry_left -= 1
        if len(self.paragraph) == 1 and title_line(self.paragraph[0]) and not terms:
            self.paragraph.clear()   # a heading or a table of contents' entry ("Converting Documents from Emacs")
            return
        if before_row and not SENTENCE_END.search(self.paragraph[-1]):
            self.paragraph.clear()  # a table's title or column headers, not a statement
            self.first_paragraph = False
            return
        sentences = [part for s in split_sentences(" ".join(self.paragraph)) for part in _CODE_START.split(s)]
        self.paragraph.clear()
        # The first sentence is a fragment when the chunk starts mid-sentence, or when a paragraph
        # right after code starts in lower case: the rest of a sentence the code interrupted.
        after_code, self.after_code = self.after_code, False
        if sentences and ((self.first_paragraph and self.starts_cut) or
                          (after_code and not bullet and sentences[0][0].islower())):
            sentences = sentences[1:]
        self.first_paragraph = False
        if cut_end and sentences and not SENTENCE_END.search(sentences[-1]):
            sentences = sentences[:-1]
        code, self.code = self.code, ""
        for i, sentence in enumerate(sentences):
            words = len(sentence.split())
            if code and i == len(sentences) - 1 and (_INTRO.search(sentence) or not SENTENCE_END.search(sentence)) \
                    and words >= _MIN_WORDS and not is_code_like(sentence):
                self.add(f"{sentence} {code}", "sentence")   # "... add your models: `register_price(...)`"
                continue
            if (_MIN_WORDS <= words or (words == 2 and _FIELD.match(sentence))) and words <= MAX_WORDS \
                    and not (is_code_like(sentence) and not (words <= 8 and _FIELD.match(sentence))) \
                    and not _INTRO.search(sentence):   # a short field line is a statement ("Default: warning (2).")
                # the description's first sentence is quoted with its option names ("-N, --new-file: If ...")
                label = f"{', '.join(terms)}: " if terms and i == 0 else ""
                # ... and matched with the rest of its description ("--hard: Resets the index and working
                # tree." answers "... discarding changes" from the sentence after it)
                rest = " ".join([t.replace(".", " ") for t in terms] + sentences[1:4]) if label else ""   # a.b: a, b
                field = "" if label else self._entry_label(sentence, words)
                if field:   # a field line under a heading is matched with what the heading's entry says first
                    label, rest = field, " ".join(self.described[:3])
                if not label and entry:   # "The default is 4MB." in work_mem's description answers for work_mem
                    rest = f"{rest} {entry}".strip()
                    if terms and entry.lower() not in sentence.lower():   # the term's own paragraph: quoted with it
                        label = f"{entry}: "
                self.add(label + sentence, "row" if mostly_numbers(sentence) else "sentence", terms=rest,
                         lead=bool(terms) and i == 0)
                if not field and len(self.described) < 3:
                    self.described.append(sentence)

    def _term(self, line: str) -> bool:
        """Take a definition's term line: options ("-N", "--new-file", several lines of them), an API entry
        ("requests.get(url)"), a setting or parameter name ("work_mem (integer)"); the description follows."""
        if option_term(line):
            self.terms.append(line)   # "--new-file" above "If one file is missing, ..."
            self.entry = ", ".join(self.terms)
        elif api := api_term(line):
            self.terms, self.api, self.entry = [api], api, api   # "requests.get()" above "Sends a GET request."
        elif not self.terms and (name := name_term(line)):
            self.terms, self.entry = [name], name   # "work_mem (integer)" above "Sets the base maximum amount ..."
        else:
            return False
        self.entry_left = ENTRY_PARAGRAPHS
        return True

    def _entry_label(self, sentence: str, words: int) -> str:
        """The label of a line that does not say whose it is: an API entry's parameter ("code (int) – the status
        code.", of `redirect()`), or a reference entry's field line ("Default: 8.", "Type: int.") quoted with the
        heading it is under ("tab_width: Default: 8.")."""
        if self.api and _PARAM.match(sentence):
            return f"{self.api}: "
        heading = self._under()
        if not heading or words > 6 or not _FIELD.match(sentence) or len(heading.split()) > 8 \
                or heading.lower() in sentence.lower():
            return ""
        return f"{heading}: "

    def field_row(self, label: str, value: str) -> None:
        """A key-value table's row ("Default: | KeepAliveTimeout 5") is the field line it prints, quoted with the
        heading it is under when it does not name it ("KeepAliveTimeout Directive: Context: server config")."""
        self.flush()
        text = f"{label} {value}"   # a field naming only the entry it is under ('Directive Type: "image"') says nothing
        if (words := len(text.split())) <= MAX_WORDS and value.strip("\"'`“”‘’").lower() != self._under().lower():
            field = self._entry_label(text, words)
            self.add(field + text, "sentence", terms=" ".join(self.described[:3]) if field else "")
            if not field and len(self.described) < 3:
                self.described.append(text)

    def _under(self) -> str:
        """The heading the current line is under (the chunk's last Markdown heading, else its section's last part)."""
        return self.heading or str(self.metadata.get("section") or "").rsplit(" / ", 1)[-1].strip()

    def markdown_row(self, line: str) -> None:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not any(cells):
            return
        self.table_rows.append(cells)

    def close_table(self) -> None:
        for cells in self.table_rows:
            label, rest = cells[0], cells[1:]
            header = self.table_header or []
            pairs = [f"{header[i + 1]}: {cell}" if i + 1 < len(header) and header[i + 1] else cell
                     for i, cell in enumerate(rest) if cell]
            text = f"{label} ({'; '.join(pairs)})" if pairs else label
            if len(text.split()) <= MAX_WORDS and label:
                self.add(text, "row", terms=" ".join(header[:1]))
        self.table_rows.clear()
        self.table_header = None

    def pipe_row(self, cells: list[str]) -> None:
        """A row printed as "label | cell | cell": quoted as `label (column: cell; ...)`, cells under one
        spanning header grouped ("2023: 2,018, 1,608"), else with the nearest header line in brackets."""
        self.flush(before_row=True)
        label, values = cells[0], cells[1:]
        names = names_under(len(values), self.recent, label, values)
        groups: list[tuple[str, list[str]]] = []
        for name, value in zip(names, values):
            if groups and groups[-1][0] == name:
                groups[-1][1].append(value)
            else:
                groups.append((name, [value]))
        named = "; ".join(f"{name}: {', '.join(vals)}" for name, vals in groups)
        text, terms = f"{label} ({named})", " ".join(dict.fromkeys(names))
        if not names or len(text.split()) > MAX_WORDS:
            terms = nearest_header(self.recent)
            text = " | ".join(cells) + (f" ({terms})" if terms else "")
        if len(text.split()) <= MAX_WORDS:   # the period and caption above count as its headers
            self.add(text, "row", terms=row_context(self.recent, terms, self.caption))

    def pdf_row(self, line: str) -> None:
        if self.paragraph and line[:1].islower():  # the label began on the line above
            line = f"{self.paragraph.pop()} {line}"
            if self.recent:
                self.recent.pop()
        self.flush(before_row=True)
        header = nearest_header(self.recent)
        self.add(f"{line} ({header})" if header else line, "row", terms=row_context(self.recent, header, self.caption))


def units_of_chunk(text: str, source: int = 1, metadata: Mapping[str, Any] | None = None,
                   entry: tuple[str, int] = ("", 0)) -> list[Unit]:
    """The units of one chunk's text (`source` is its context number; `entry`: the reference entry whose
    description the chunk starts inside, and how many paragraphs of it are left)."""
    return _split(text, source, metadata or {}, entry).units


def _split(text: str, source: int, metadata: Mapping[str, Any], entry: tuple[str, int]) -> _Splitter:
    splitter = _Splitter(source, metadata)
    splitter.entry, splitter.entry_left = entry
    lines = prose_lines(text)
    first = next((line for line in lines if line), "")
    splitter.starts_cut = bool(first) and not (first[0].isupper() or first[0].isdigit() or first[0] in "#|*-•\"'“(['$")
    for n, line in enumerate(lines):
        if line is None or not (_ALNUM.search(line) or line.startswith("|")):  # code, blank, a rule (____)
            last = splitter.paragraph[-1] if splitter.paragraph else ""
            if last and (last.endswith(":") or not SENTENCE_END.search(last)):
                m = next((m for m in range(n, len(lines)) if lines[m] != ""), len(lines))   # an intro: code next?
                splitter.code = first_code_line(text.splitlines()[m:]) if m < len(lines) and lines[m] is None else ""
            splitter.flush(cut_end=line is None)
            splitter.after_code = line is None or (splitter.after_code and not line)
            splitter.close_table()
            splitter.recent.clear()
            continue
        if line.startswith("|"):
            splitter.flush()
            if _TABLE_RULE.match(line):
                if splitter.table_rows:
                    splitter.table_header = splitter.table_rows.pop()
            else:
                splitter.markdown_row(line)
            continue
        splitter.close_table()
        if line.startswith("#") or _TABLE_RULE.match(line):
            splitter.flush()
            if line.startswith("#"):
                splitter.heading, splitter.described, splitter.api = line.lstrip("#").strip(), [], ""
                splitter.entry_left = 0
            continue
        if " | " in line:   # a row of a PDF or HTML table as the loaders print it, or its header
            cells = row_cells(line)
            if is_row(cells):
                splitter.pipe_row(cells)
                continue
            if len(cells) == 2 and _FIELD_CELL.match(cells[0]) and _WORD.search(cells[1]):
                splitter.field_row(*cells)
                continue
            splitter.flush(before_row=True)
            splitter.recent.append(line)
            continue
        if is_pdf_row(line):
            splitter.pdf_row(line)
            continue
        splitter.recent.append(line)
        bullet = _BULLET.match(line)
        if bullet:
            splitter.flush()
            splitter.bullet = True
            line = line[bullet.end():]
        splitter.paragraph.append(line)
    # a chunker's piece may stop mid-sentence; a short one that is a whole section (it starts with
    # its heading) ended where the section did ("## NAME\n\ngit-clean - Remove untracked files")
    whole_section = len(text) < _SHORT_CHUNK and text.lstrip().startswith("#")
    splitter.flush(cut_end="chunk_index" in metadata and not whole_section)
    splitter.close_table()
    return splitter


def context_units(docs: Iterable[Any]) -> list[Unit]:
    """The units of every context document (Documents or plain strings), numbered from 1.

    A chunk whose predecessor in its document (`chunk_index` one less, same `doc_id` or source) is in the context
    too continues it: a reference entry's description that runs over into it keeps its term ("listen_addresses
    (string)" a chunk up is matched with "The default value is localhost ..."). Chunks are read in document order for
    that, and their units returned in context order."""
    docs = [Document(page_content=d) if isinstance(d, str) else d for d in docs]
    order = sorted(range(len(docs)), key=lambda i: (str(_document(docs[i].metadata)), _chunk_index(docs[i]), i))
    ends: dict[tuple[str, int], tuple[str, int]] = {}   # (document, chunk index) -> the entry open at its end
    per_doc: dict[int, list[Unit]] = {}
    for i in order:
        doc, at = _document(docs[i].metadata), _chunk_index(docs[i])
        carried = ends.get((str(doc), at - 1), ("", 0)) if doc and at > 0 else ("", 0)
        splitter = _split(docs[i].page_content, i + 1, docs[i].metadata or {}, carried)
        per_doc[i] = splitter.units
        ends[(str(doc), at)] = (splitter.entry, splitter.entry_left) if splitter.entry_left > 0 else ("", 0)
    return [unit for i in range(len(docs)) for unit in per_doc[i]]


def _chunk_index(doc: Any) -> int:
    value = (doc.metadata or {}).get("chunk_index")
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _key(text: str) -> str:
    return " ".join(tokenize(text, stem=False, stop_words=False))


def _document(metadata: Mapping[str, Any]) -> Any:
    """Which document a chunk is part of; chunks without an id or source count as one document."""
    return metadata.get("doc_id") or metadata.get("source")


def drop_near_duplicates(units: Sequence[Unit], *, threshold: float = 0.85) -> list[Unit]:
    """Units without the copies overlapping chunks make: a unit whose words are contained in another
    unit of the same document, or share `threshold` of their distinct words with it, goes; the
    longer one (then the earlier one) stays. The same words in two documents are two statements.
    """
    keys = [_key(u.text) for u in units]
    words = [set(k.split()) for k in keys]
    docs = [_document(u.metadata) for u in units]
    order = sorted(range(len(units)), key=lambda i: (-len(keys[i]), i))
    kept: dict[Any, list[int]] = {}   # per document: only units of the same document are compared
    for i in order:
        if not keys[i]:
            continue
        same = kept.setdefault(docs[i], [])
        if not any(keys[i] in keys[j] or len(words[i] & words[j]) / max(len(words[i] | words[j]), 1) >= threshold
                   for j in same):
            same.append(i)
    return [units[i] for i in sorted(i for same in kept.values() for i in same)]
