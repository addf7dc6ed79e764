"""Loaders for txt, md, html and pdf files, and a directory walk that reports what it skipped.

PDFs are read with pypdfium2, one `Document` per page with a zero-based `page`. A file that
cannot be read never stops the walk: it is listed in `LoadReport.skipped` with the reason.

Example:
    >>> report = load_directory("docs", glob="**/*.md")      # doctest: +SKIP
    >>> len(report.documents), report.skipped                 # doctest: +SKIP
    (7, [])
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

from langchain_core.documents import Document

from rag.core.errors import LoaderError

__all__ = ["SUPPORTED_SUFFIXES", "LoadReport", "Skipped", "load_directory", "load_file"]

SUPPORTED_SUFFIXES = (".txt", ".md", ".markdown", ".html", ".htm", ".pdf")


@dataclass(frozen=True)
class Skipped:
    """A file that was not loaded, and why."""

    path: str
    reason: str


@dataclass
class LoadReport:
    """What a directory walk loaded and what it skipped."""

    documents: list[Document] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    files: int = 0


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise LoaderError(f"{path}: looks like a binary file (NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return text


_TAG = re.compile(r"<[^>]+>")
_DROP = re.compile(r"<(script|style)\b.*?</\1>", re.S | re.I)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.S | re.I)


def _html_to_text(raw: str) -> tuple[str, str | None]:
    title_match = _TITLE.search(raw)
    title = html.unescape(_TAG.sub("", title_match.group(1))).strip() if title_match else None
    body = _DROP.sub(" ", raw)
    body = re.sub(r"<(br|/p|/div|/h[1-6]|/li|/tr)\b[^>]*>", "\n", body, flags=re.I)
    body = re.sub(r"<h([1-6])\b[^>]*>", lambda m: "\n" + "#" * int(m.group(1)) + " ", body, flags=re.I)
    text = html.unescape(_TAG.sub("", body))
    text = re.sub(r"[ \t]+", " ", text)
    return re.sub(r"\n\s*\n+", "\n\n", text).strip(), title


def _load_pdf(path: Path) -> list[Document]:
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        raise LoaderError(f"{path}: cannot open PDF ({exc}); it may be encrypted or corrupt") from exc
    try:
        docs = []
        for index in range(len(pdf)):
            page = pdf[index]
            textpage = page.get_textpage()
            text = textpage.get_text_range().replace("\r\n", "\n").replace("\r", "\n")
            textpage.close()
            page.close()
            if text.strip():
                docs.append(Document(page_content=text, metadata={"source": str(path), "page": index,
                                                                  "title": path.stem}))
        return docs
    finally:
        pdf.close()


def load_file(path: str | Path) -> list[Document]:
    """Load one file into Documents (one per PDF page, one for other formats).

    Raises:
        LoaderError: unsupported type, binary, empty, encrypted or corrupt file.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise LoaderError(f"{path}: unsupported file type {suffix or '(none)'}; supported: {', '.join(SUPPORTED_SUFFIXES)}")
    if suffix == ".pdf":
        docs = _load_pdf(path)
    else:
        text = _read_text(path)
        title = None
        if suffix in (".html", ".htm"):
            text, title = _html_to_text(text)
        # Lone surrogates cannot be stored or embedded; replace them instead of failing the file.
        text = text.encode("utf-8", "replace").decode("utf-8")
        docs = [Document(page_content=text, metadata={"source": str(path), "title": title or path.stem})]
    if not any(d.page_content.strip() for d in docs):
        raise LoaderError(f"{path}: no text found (empty file, or a scanned PDF without a text layer)")
    return docs


def load_directory(path: str | Path, *, glob: str = "**/*", exclude: Sequence[str] = ()) -> LoadReport:
    """Load every supported file under `path` matching `glob` and none of `exclude`."""
    root = Path(path)
    if not root.exists():
        raise LoaderError(f"{root}: no such file or directory")
    files = [root] if root.is_file() else sorted(p for p in root.glob(glob) if p.is_file())
    report = LoadReport()
    for file in files:
        rel = file.relative_to(root).as_posix() if root.is_dir() else file.name
        if any(fnmatch(rel, pattern) for pattern in exclude) or file.suffix.lower() not in SUPPORTED_SUFFIXES:
            continue
        report.files += 1
        try:
            report.documents.extend(load_file(file))
        except (LoaderError, OSError) as exc:
            report.skipped.append(Skipped(str(file), str(exc)))
    return report
