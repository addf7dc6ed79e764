"""A tiny synthetic FinanceBench-format data set: real PDFs, questions and document metadata.

Used by the tests and the notebook to run the benchmark harness in seconds, offline. The layout
matches the real sample: `pdfs/{doc_name}.pdf`, `questions.jsonl` (zero-based
`evidence_page_num`), `documents.jsonl` (company, doc_type, doc_period).

Example:
    >>> import tempfile
    >>> root = write_synthetic_financebench(tempfile.mkdtemp())
    >>> sorted(p.name for p in (root / "pdfs").iterdir())[:2]
    ['ACME_2022_10K.pdf', 'ACME_2023_10K.pdf']
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["SYNTHETIC_FILINGS", "wrap_lines", "write_pdf", "write_synthetic_financebench"]

_FILLER = ("The company discusses general business conditions, employees, properties and risk factors "
           "that may affect results in future periods. ")

#: doc_name -> (company, year, pages); the page texts are what the PDFs contain.
SYNTHETIC_FILINGS: dict[str, tuple[str, int, list[str]]] = {
    "ACME_2022_10K": ("Acme Rockets", 2022, [
        "Acme Rockets annual report 2022\nForm 10-K\n" + _FILLER * 3,
        "Consolidated statement of income\nNet sales 1,200 million in 2022\nCost of sales 700 million\n" + _FILLER,
        "Consolidated statement of cash flows\nPurchases of property and equipment 95 million\n" + _FILLER,
        "Legal proceedings\nAcme Rockets is defending a patent lawsuit about guidance systems.\n" + _FILLER,
    ]),
    "ACME_2023_10K": ("Acme Rockets", 2023, [
        "Acme Rockets annual report 2023\nForm 10-K\n" + _FILLER * 3,
        "Consolidated statement of income\nNet sales 1,450 million in 2023\nCost of sales 810 million\n" + _FILLER,
        "Segment information\nLaunch services grew faster than satellites in 2023.\n" + _FILLER,
    ]),
    "GLOBEX_2023_10K": ("Globex Foods", 2023, [
        "Globex Foods annual report 2023\nForm 10-K\n" + _FILLER * 3,
        "Balance sheet\nInventories 310 million\nTotal current liabilities 980 million\n" + _FILLER,
        "Dividends\nGlobex Foods raised its quarterly dividend to 45 cents per share.\n" + _FILLER,
    ]),
}

_QUESTIONS = [
    ("syn_1", "ACME_2022_10K", "What were Acme Rockets' capital expenditures (purchases of property) in FY2022?",
     "95 million", 2),
    ("syn_2", "ACME_2023_10K", "What was Acme Rockets' net sales in FY2023?", "1,450 million", 1),
    ("syn_3", "ACME_2022_10K", "Is Acme Rockets involved in any patent lawsuit as of FY2022?", "Yes", 3),
    ("syn_4", "GLOBEX_2023_10K", "How much inventory did Globex Foods hold at the end of FY2023?", "310 million", 1),
    ("syn_5", "GLOBEX_2023_10K", "Did Globex Foods raise its dividend in 2023?", "Yes, to 45 cents", 2),
]


def write_pdf(path: str | Path, pages: list[str]) -> Path:
    """Write a minimal valid PDF with one Helvetica text page per string (lines split on newlines).

    Example:
        >>> import tempfile, pypdfium2
        >>> p = write_pdf(Path(tempfile.mkdtemp()) / "a.pdf", ["hello", "world"])
        >>> len(pypdfium2.PdfDocument(str(p)))
        2
    """
    n = len(pages)
    font = 3 + 2 * n
    bodies = [b"<< /Type /Catalog /Pages 2 0 R >>",
              ("<< /Type /Pages /Kids [%s] /Count %d >>" % (" ".join(f"{3 + 2 * i} 0 R" for i in range(n)), n)).encode()]
    for i, text in enumerate(pages):
        escaped = [line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") for line in wrap_lines(text)]
        content = ("BT /F1 10 Tf 12 TL 40 760 Td " + " ".join(f"({line}) Tj T*" for line in escaped) + " ET")
        data = content.encode("latin-1", "replace")
        bodies.append((f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 {font} 0 R "
                       f">> >> /Contents {4 + 2 * i} 0 R >>").encode())
        bodies.append(b"<< /Length " + str(len(data)).encode() + b" >>\nstream\n" + data + b"\nendstream")
    bodies.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    path = Path(path)
    path.write_bytes(pdf_bytes(bodies))
    return path


def pdf_bytes(bodies: list[bytes]) -> bytes:
    """A PDF file of numbered objects `bodies` (object 1 the catalog), with its cross-reference table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(bodies, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    start = len(out)
    out += f"xref\n0 {len(bodies) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{off:010d} 00000 n \n" for off in offsets).encode()
    out += f"trailer\n<< /Size {len(bodies) + 1} /Root 1 0 R >>\nstartxref\n{start}\n%%EOF\n".encode()
    return bytes(out)


def wrap_lines(text: str, width: int = 95) -> list[str]:
    """`text` in lines of at most `width` characters (words kept whole; a newline starts a new line)."""
    lines: list[str] = []
    for raw in text.split("\n"):
        words, line = raw.split(), ""
        for word in words:
            if line and len(line) + 1 + len(word) > width:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}".strip()
        lines.append(line)
    return lines


def write_synthetic_financebench(root: str | Path) -> Path:
    """Write the synthetic data set under `root` and return `root`."""
    root = Path(root)
    (root / "pdfs").mkdir(parents=True, exist_ok=True)
    docs = []
    for name, (company, year, pages) in SYNTHETIC_FILINGS.items():
        write_pdf(root / "pdfs" / f"{name}.pdf", pages)
        docs.append({"doc_name": name, "company": company, "doc_type": "10k", "doc_period": year})
    rows = []
    for qid, doc, question, answer, page in _QUESTIONS:
        evidence_text = SYNTHETIC_FILINGS[doc][2][page].split("\n")[1]
        rows.append({"financebench_id": qid, "doc_name": doc, "question": question, "answer": answer,
                     "question_type": "synthetic",
                     "evidence": [{"doc_name": doc, "evidence_page_num": page, "evidence_text": evidence_text}]})
    (root / "documents.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    (root / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return root
