"""`LoadLimits`: what reading one file may cost (bytes, table detection, OCR), as options with defaults.

Every door that indexes files takes them: `load_file(path, limits=...)`, `load_directory`,
`KnowledgeBase.add_documents(..., limits=...)` (a `LoadLimits` or a mapping of its fields), the
`index:` block of a YAML config (the same keys) and `rag index` (`--tables`, `--ocr/--no-ocr`,
`--table-seconds`, ...). A bad value is a `ConfigError` naming the option, the value and what is
valid. What hits a limit is read more cheaply (or left out) and reported per file (the notes of
`LoadReport` / `IndexReport`, printed by `rag index`).

A knowledge base records what a limit changed in what it read (`reading`): the settings that
decide what a PDF or image gives (table finder, per-page table limits, OCR) are part of its
record's content hash, so a run with other settings reads those files again, and text files are not
touched. The time budgets (`table_seconds`, `table_page_seconds`, `ocr_seconds`) are not recorded: what they cut
depends on the machine, so a run with a larger budget does not re-read a file by itself
(`update_document` does).

Example:
    >>> LoadLimits(tables="none").table_finder is None
    True
    >>> LoadLimits.of({"ocr": False, "table_seconds": 30}).table_seconds
    30
    >>> LoadLimits.of({"tabels": "none"})
    Traceback (most recent call last):
    ...
    rag.base.errors.ConfigError: unknown load limit 'tabels'; valid: tables, table_max_chars, table_max_objects, \
table_seconds, table_page_seconds, ocr, ocr_dpi, ocr_max_pages, ocr_seconds, max_bytes
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Union

from rag.base.errors import ConfigError
from rag.indexing.ocr import DEFAULT_OCR_DPI

__all__ = ["DEFAULT_MAX_BYTES", "LIMIT_NAMES", "TABLE_FINDERS", "TABLE_MODES", "LimitsLike", "LoadLimits"]

#: the values of `LoadLimits.tables`: True is "pdfium", False (or "none") reads every page as text
TABLE_FINDERS = ("pdfium", "pdfplumber")
TABLE_MODES = (*TABLE_FINDERS, "none")   # as `rag index --tables` and the config name them
DEFAULT_MAX_BYTES = 256 * 1024 * 1024  # larger files are skipped, not read into memory
#: the suffixes whose reading no limit but `max_bytes` changes (built-in text formats)
_TEXT_SUFFIXES = frozenset([".txt", ".md", ".markdown", ".rst", ".html", ".htm"])
#: settings that decide what a PDF or image gives, recorded with the file (the time budgets are not)
_RECORDED = ("tables", "table_max_chars", "table_max_objects", "ocr", "ocr_dpi", "ocr_max_pages")
_INTS = {"table_max_chars": (0, None), "table_max_objects": (0, None), "ocr_max_pages": (0, None),
         "ocr_dpi": (50, 600), "max_bytes": (1, None)}


@dataclass(frozen=True)
class LoadLimits:
    """What reading one file may cost; what hits a limit is read more cheaply and noted.

    Attributes:
        tables: read tables of pages that look tabular: "pdfium" (or True) with pypdfium2's character
            boxes (`rag.indexing.pdfium_tables`), "pdfplumber" with pdfplumber (about 100 times
            slower), False or "none": all pages as text.
        table_max_chars: a page with more characters gets no table detection (a dense filing
            page holds 3,000-8,000).
        table_max_objects: likewise for the page's drawing objects (text runs, paths, images).
        table_seconds: table detection time per file; pages after it is spent are read as text.
        table_page_seconds: table detection time per page with pdfplumber (whose time is not linear
            in a page); a page that takes longer is cut off and read as text (the default finder is
            linear in a page's words and is bounded by `table_max_chars`).
        ocr: read pages without text and image files by OCR when an engine is installed.
        ocr_dpi: resolution pages are rendered at for OCR (50-600).
        ocr_max_pages: pages per file read by OCR (about 1-2 s each); the rest are left out, noted.
        ocr_seconds: OCR time per file (pages and image files); the pages after it is spent are left
            out, noted, and no page or image gets longer than what is left (nor more than 120 s).
        max_bytes: larger files are skipped without being read.

    Example:
        >>> LoadLimits(table_seconds=30).table_max_chars
        20000
    """

    tables: bool | str = "pdfium"
    table_max_chars: int = 20_000
    table_max_objects: int = 20_000
    table_seconds: float = 120.0
    table_page_seconds: float = 10.0
    ocr: bool = True
    ocr_dpi: int = DEFAULT_OCR_DPI
    ocr_max_pages: int = 2_000
    ocr_seconds: float = 900.0
    max_bytes: int = DEFAULT_MAX_BYTES

    def __post_init__(self) -> None:
        if self.tables is True or self.tables == "none":   # (one value per meaning: equal limits compare equal)
            object.__setattr__(self, "tables", "pdfium" if self.tables is True else False)
        if not (isinstance(self.tables, bool) or (isinstance(self.tables, str) and self.tables in TABLE_FINDERS)):
            raise ConfigError(f"tables={self.tables!r}; valid: {', '.join(map(repr, TABLE_MODES))}, True (= 'pdfium') "
                              "or False (= 'none')")
        if not isinstance(self.ocr, bool):
            raise ConfigError(f"ocr={self.ocr!r}; valid: True or False")
        for name, (low, high) in _INTS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low or (high and value > high):
                valid = f"an integer from {low:,} to {high:,}" if high else f"an integer of {low:,} or more"
                raise ConfigError(f"{name}={value!r}; valid: {valid}")
        for name in ("table_seconds", "table_page_seconds", "ocr_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
                zero = "no OCR" if name == "ocr_seconds" else "no table detection"
                raise ConfigError(f"{name}={value!r}; valid: a number of seconds, 0 or more (0: {zero})")

    @property
    def table_finder(self) -> str | None:
        """"pdfium", "pdfplumber", or None (no table detection)."""
        return self.tables or None

    @classmethod
    def of(cls, value: LoadLimits | Mapping[str, Any] | None) -> LoadLimits:
        """A `LoadLimits` from one, from a mapping of its fields (unknown keys refused), or None (the defaults)."""
        if value is None:
            return cls()
        if isinstance(value, LoadLimits):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"limits must be a LoadLimits or a mapping of {', '.join(LIMIT_NAMES)}; "
                              f"got {type(value).__name__}")
        for key in value:
            if key not in LIMIT_NAMES:
                raise ConfigError(f"unknown load limit {key!r}; valid: {', '.join(LIMIT_NAMES)}")
        return cls(**value)

    def settings(self) -> dict[str, Any]:
        """The limits as data (JSON), e.g. for Ray workers; `LoadLimits(**settings)` gives them back."""
        return asdict(self)

    def reading(self, suffix: str) -> str:
        """What these limits change in what a file of `suffix` gives, as a short tag ("" for the defaults, and
        for text files, which no limit but `max_bytes` changes).

        A knowledge base appends it to the file's content hash, so other settings re-read exactly the
        files they change.

        Example:
            >>> LoadLimits().reading(".pdf"), LoadLimits(tables=False).reading(".txt")
            ('', '')
            >>> LoadLimits(tables=False).reading(".pdf")
            '+read:tables=none'
        """
        if suffix.lower() in _TEXT_SUFFIXES:
            return ""
        mine, default = self._recorded(), LoadLimits()._recorded()
        changed = {name: value for name, value in mine.items() if value != default[name]}
        if not changed:
            return ""
        text = ",".join(f"{k}={v}" for k, v in changed.items())
        return f"+read:{text}" if len(text) <= 60 else \
            "+read:" + hashlib.sha256(json.dumps(changed, sort_keys=True).encode()).hexdigest()[:16]

    def _recorded(self) -> dict[str, Any]:
        return {name: (self.table_finder or "none") if name == "tables" else getattr(self, name) for name in _RECORDED}


LIMIT_NAMES = tuple(f.name for f in fields(LoadLimits))


#: what `LoadLimits.of` reads: `LoadLimits`, a mapping of its fields, or None (the defaults)
LimitsLike = Union[LoadLimits, Mapping[str, Any], None]  # noqa: UP007 - a runtime alias
