"""Scanned copies of PDFs: every page rendered to an image and placed in a new PDF without a text layer.

For tests and benchmarks of OCR (`rag.indexing.ocr`): the copy looks like its original to a reader
and holds no text for a text extractor, as a scan or a fax does.

Example:
    >>> scanned_copy("filing.pdf", "filing-scan.pdf", pages=[0, 1], dpi=150)   # doctest: +SKIP
    2
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = ["scanned_copy"]


def scanned_copy(src: str | Path, dst: str | Path, *, pages: Sequence[int] | None = None, dpi: int = 150) -> int:
    """Write an image-only copy of `src` (all pages, or the zero-based `pages`) to `dst`; the page count.

    Pages are rendered in grey at `dpi` and keep their size in points.
    """
    import pypdfium2 as pdfium

    source = pdfium.PdfDocument(str(src))
    out = pdfium.PdfDocument.new()
    try:
        for index in range(len(source)) if pages is None else pages:
            page = source[index]
            width, height = page.get_size()
            bitmap = page.render(scale=dpi / 72, grayscale=True)
            page.close()
            new = out.new_page(width, height)
            image = pdfium.PdfImage.new(out)
            image.set_bitmap(bitmap)
            image.set_matrix(pdfium.PdfMatrix().scale(width, height))
            new.insert_obj(image)
            new.gen_content()
            new.close()
        out.save(str(dst))
        return len(out)
    finally:
        out.close()
        source.close()
