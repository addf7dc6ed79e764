"""PDF pages and image files to Documents: the text layer, tables where a page looks tabular, OCR where
there is no text, each within a stated cost.

A PDF is read with pypdfium2, one `Document` per page with a zero-based `page` (about 400 pages
a second). Then:

- a page whose text looks tabular (`rag.indexing.tables.looks_tabular`, a scan of its lines) goes
  to the table finder: by default pypdfium2's own character boxes (`rag.indexing.pdfium_tables`,
  a few milliseconds a page), or pdfplumber with `tables="pdfplumber"` (`rag.indexing.tables`,
  0.25-1 s a page); unless it holds more than `LoadLimits.table_max_chars` characters
  or `table_max_objects` drawing objects (pdfplumber's time and memory grow with them: a 3.7 KB
  PDF whose page inflates to 1 MB of rows took 232 s and 1.7 GB), or the file has already spent
  `table_seconds` in table detection; pdfplumber is also cut off on a page after
  `table_page_seconds` (`rag.indexing.page_budget`). Such a page is read as text, and the note says why.
- a page with almost no text (under `OCR_MIN_CHARS` letters or digits) that draws something is
  rendered and read by OCR (`rag.indexing.ocr`): `ocr=True`, `ocr_engine`, `ocr_confidence` in
  its metadata. Without an OCR engine such a page is left out and the note says what to install.

Notes (one line each, prefixed with the page) go to the caller's `notes` list; `rag index`
prints them with the file.

Example:
    >>> notes = []
    >>> docs = load_pdf(Path("scan.pdf"), limits=LoadLimits(), notes=notes)   # doctest: +SKIP
    >>> docs[0].metadata["ocr"], notes                                        # doctest: +SKIP
    (True, [])
"""

from __future__ import annotations

import logging
import time
from itertools import islice
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from rag.base.errors import LoaderError
from rag.indexing.limits import TABLE_FINDERS, LoadLimits
from rag.indexing.ocr import (
    ENGINE,
    OCR_MISSING,
    OCR_TIMEOUT,
    image_size_ok,
    ocr_engine,
    ocr_image,
    render_page,
)
from rag.indexing.pdfium_tables import page_segments_pdfium
from rag.indexing.tables import PageTable, find_tables, looks_tabular, page_segments
from rag.indexing.text_files import read_bytes
from rag.indexing.text_safety import clean_text, path_text

__all__ = ["IMAGE_SUFFIXES", "OCR_MIN_CHARS", "TABLE_FINDERS", "LoadLimits", "load_image", "load_pdf"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff")
OCR_MIN_CHARS = 16  # a page with fewer letters and digits (a page number, a stamp) is read by OCR
logger = logging.getLogger(__name__)


def _open(path: Path, data: bytes) -> Any:
    import pypdfium2 as pdfium

    try:
        return pdfium.PdfDocument(data)   # (the bytes read once from the open file, `rag.indexing.file_read`)
    except pdfium.PdfiumError as exc:
        if "password" in str(exc).lower():
            raise LoaderError(f"{path_text(path)}: the PDF is encrypted (password-protected); "
                              "remove the password to index it") from exc
        raise LoaderError(f"{path_text(path)}: cannot open PDF, it is damaged or not a PDF ({exc})") from exc


class _PdfiumTables:
    """The pdfium table finder run while the pages are read: each page's segments, within the limits."""

    def __init__(self, limits: LoadLimits, notes: list[str]) -> None:
        self.limits, self.notes = limits, notes
        self.deadline = time.monotonic() + limits.table_seconds
        self.unread: list[int] = []

    def segments(self, index: int, text: str, objects: int, textpage: Any,
                 height: float) -> list[str | PageTable] | None:
        """The page's text and tables in reading order, or None (no table, not tabular, a limit hit)."""
        if not _wants_tables(index, text, objects, self.limits, self.notes):
            return None
        if time.monotonic() > self.deadline:
            self.unread.append(index)
            return None
        try:
            return page_segments_pdfium(textpage, height, text)
        except Exception as exc:  # noqa: BLE001 - a malformed page keeps its plain text
            logger.info("page %d: table detection failed (%s)", index, exc)
            return None


def _read_pages(pdf: Any, finder: _PdfiumTables | None) -> tuple[list[str], list[int], dict[int, list[Any]]]:
    """Each page's text layer, its count of drawing objects, and the segments of the pages with tables."""
    import pypdfium2.raw as pdfium_c

    texts, objects, segments = [], [], {}
    for index in range(len(pdf)):
        page = pdf[index]
        try:
            textpage = page.get_textpage()
            try:
                texts.append(textpage.get_text_range())
                objects.append(int(pdfium_c.FPDFPage_CountObjects(page.raw)))
                found = finder and finder.segments(index, texts[-1], objects[-1], textpage, page.get_size()[1])
                if found:
                    segments[index] = found
            finally:
                textpage.close()
        finally:
            page.close()
    return texts, objects, segments


def _wants_tables(index: int, text: str, objects: int, limits: LoadLimits, notes: list[str]) -> bool:
    """A page worth a table detector: tabular-looking text within the per-page budget (a limit hit is noted)."""
    if not looks_tabular(text):
        return False
    if len(text) > limits.table_max_chars or objects > limits.table_max_objects:
        notes.append(f"page {index + 1}: tables not detected ({len(text):,} characters, {objects:,} "
                     f"objects; limits {limits.table_max_chars:,} / {limits.table_max_objects:,}); read as text")
        return False
    return True


def _needs_ocr(text: str, objects: int) -> bool:
    # counting stops at OCR_MIN_CHARS: a page of text is decided in its first words
    return objects > 0 and sum(1 for _ in islice(filter(str.isalnum, text), OCR_MIN_CHARS)) < OCR_MIN_CHARS


def _spent(pages: list[int], limits: LoadLimits) -> str:
    return f"{_pages_text(pages)}: not read by OCR (ocr_seconds={limits.ocr_seconds:g} spent on this file)"


def _ocr_pages(path: Path, pdf: Any, texts: list[str], objects: list[int], limits: LoadLimits,
               notes: list[str]) -> dict[int, tuple[str, float]]:
    """OCR text and confidence of the pages without a text layer (none without an engine, noted)."""
    pages = [i for i, text in enumerate(texts) if _needs_ocr(text, objects[i])]
    if not pages or not limits.ocr:
        return {}
    if ocr_engine() is None:
        notes.append(f"{_pages_text(pages)}: no text layer, not read: {OCR_MISSING}")
        return {}
    if len(pages) > limits.ocr_max_pages:
        notes.append(f"{_pages_text(pages[limits.ocr_max_pages:])}: not read by OCR "
                     f"(ocr_max_pages={limits.ocr_max_pages:,})")
        pages = pages[:limits.ocr_max_pages]
    out = {}
    deadline = time.monotonic() + limits.ocr_seconds
    for done, index in enumerate(pages):
        left = deadline - time.monotonic()
        if left <= 0:
            notes.append(_spent(pages[done:], limits))
            break
        page = pdf[index]
        try:
            result = ocr_image(render_page(page, dpi=limits.ocr_dpi), name=f"{path_text(path)} page {index + 1}",
                               timeout=min(OCR_TIMEOUT, left))
        except LoaderError as exc:
            if time.monotonic() >= deadline:   # cut off by what was left of the budget
                notes.append(_spent(pages[done:], limits))
                break
            notes.append(f"page {index + 1}: {exc}")
            continue
        finally:
            page.close()
        if result.text.strip():
            out[index] = (result.text, result.confidence)
    return out


def _pages_text(pages: list[int]) -> str:
    shown = ", ".join(str(p + 1) for p in pages[:10])
    return f"page{'s' if len(pages) > 1 else ''} {shown}{', ...' if len(pages) > 10 else ''}"


def load_pdf(path: Path, *, limits: LoadLimits, notes: list[str], data: bytes | None = None) -> list[Document]:
    """One document per page with text (tables as documents of their own), OCR for pages without (`data`: the
    file's bytes when already read).

    Raises:
        LoaderError: encrypted or damaged PDF.
    """
    data = read_bytes(path, max_bytes=limits.max_bytes) if data is None else data
    pdf = _open(path, data)
    try:
        finder = _PdfiumTables(limits, notes) if limits.table_finder == "pdfium" else None
        texts, objects, segments = _read_pages(pdf, finder)
        found: dict[int, list[PageTable]] = {}
        unread = finder.unread if finder else []
        if limits.table_finder == "pdfplumber":
            pages = [i for i, text in enumerate(texts) if _wants_tables(i, text, objects[i], limits, notes)]
            cut: list[int] = []
            found, unread = find_tables(data, pages, deadline=time.monotonic() + limits.table_seconds,
                                        page_seconds=limits.table_page_seconds, cut=cut)
            if cut:
                notes.append(f"{_pages_text(cut)}: tables not detected (cut off after table_page_seconds="
                             f"{limits.table_page_seconds:g}); read as text")
        if unread:
            notes.append(f"{_pages_text(unread)}: tables not detected (table_seconds={limits.table_seconds:g} "
                         "spent on this file); read as text")
        scanned = _ocr_pages(path, pdf, texts, objects, limits, notes)
        docs = []
        for index, text in enumerate(texts):
            meta: dict[str, Any] = {"source": path_text(path), "page": index, "title": path_text(path.stem),
                                    "file_type": "pdf"}
            if index in scanned:
                text, confidence = scanned[index]
                meta.update(ocr=True, ocr_engine=ENGINE, ocr_confidence=confidence)
            docs += _page_documents(pdf, index, segments.get(index) or [text], found.get(index, []), meta)
        return docs
    finally:
        pdf.close()


def _page_documents(pdf: Any, index: int, segments: list[str | PageTable], tables: list[PageTable],
                    meta: dict[str, Any]) -> list[Document]:
    """A page's documents: its text and tables in reading order (`chunk_type="table"`); `tables` (pdfplumber's)
    are placed in the page text here."""
    if tables:
        page = pdf[index]
        try:
            textpage = page.get_textpage()
            segments = page_segments(textpage, page.get_size()[1], tables)
            textpage.close()
        finally:
            page.close()
    docs = []
    for segment in segments:
        if isinstance(segment, PageTable):
            extra = {"section": segment.caption} if segment.caption else {}
            docs.append(Document(page_content=clean_text("\n".join(segment.lines)), metadata={
                **meta, **extra, "chunk_type": "table", "table_header_lines": segment.header_lines}))
            continue
        segment = clean_text(segment.replace("\r\n", "\n").replace("\r", "\n"))
        if segment.strip():
            docs.append(Document(page_content=segment, metadata=dict(meta)))
    return docs


def load_image(path: Path, data: bytes, *, limits: LoadLimits) -> list[Document]:
    """An image file (png, jpg, tiff) read by OCR: one document, `ocr=True` with the engine and confidence.

    Raises:
        LoaderError: no OCR engine (the message says what to install), OCR turned off, a bad image.
    """
    if not limits.ocr:
        raise LoaderError(f"{path_text(path)}: an image is read only by OCR, which is turned off (ocr=False)")
    if limits.ocr_seconds <= 0:
        raise LoaderError(f"{path_text(path)}: an image is read only by OCR, and ocr_seconds=0 gives it no time")
    image_size_ok(path, data, max_frames=limits.ocr_max_pages)
    result = ocr_image(data, name=path_text(path), timeout=min(OCR_TIMEOUT, limits.ocr_seconds))
    file_type = {".jpeg": "jpg", ".tif": "tiff"}.get(path.suffix.lower(), path.suffix.lower().lstrip("."))
    meta = {"source": path_text(path), "title": path_text(path.stem), "file_type": file_type,
            "ocr": True, "ocr_engine": ENGINE, "ocr_confidence": result.confidence}
    return [Document(page_content=clean_text(result.text), metadata=meta)]
