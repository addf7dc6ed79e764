"""Small files that are costly to read, for tests and benchmarks of the loaders' cost limits.

Example:
    >>> inflating_pdf("bomb.pdf", rows=40_000)   # doctest: +SKIP
    3712
"""

from __future__ import annotations

import zlib
from pathlib import Path

from rag.testing.financebench import pdf_bytes

__all__ = ["inflating_pdf"]


def inflating_pdf(path: str | Path, *, rows: int = 40_000, pages: int = 1) -> int:
    """Write a PDF whose compressed page content inflates to `rows` lines of figures per page; its size in bytes.

    Each line reads like a table row ("Item 17 1,234 5,678"), so the page looks tabular and
    would go to the table detector; 40,000 rows are about 1 MB of page content in a file of about 4 KB.
    """
    ops = ["BT /F1 2 Tf 2 TL 10 780 Td"]
    ops += ["(Net sales 1,234 5,678) Tj T*"] * rows  # the same row: it compresses to almost nothing
    ops.append("ET")
    stream = zlib.compress("\n".join(ops).encode("latin-1"), 9)
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    kids = " ".join(f"{3 + n} 0 R" for n in range(pages))
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode())
    content, font = 3 + pages, 4 + pages
    objects += [f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 {font} 0 R >> >> "
                f"/Contents {content} 0 R >>".encode() for _ in range(pages)]
    objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    data = pdf_bytes(objects)
    Path(path).write_bytes(data)
    return len(data)
