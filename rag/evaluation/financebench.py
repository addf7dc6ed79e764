"""FinanceBench data: questions, filings, cached page texts and page-aware chunks.

The data directory holds `pdfs/{doc_name}.pdf`, `questions.jsonl` (each question with its
`doc_name` and `evidence` pages, zero-based) and `documents.jsonl` (company, doc_type,
doc_period per filing). PDFs are parsed once with pypdfium2 and their page texts cached as
JSON under a cache directory, so re-runs never parse again. Chunks never cross a page, so
every chunk has exactly one zero-based `page` to compare with the gold evidence.

Example:
    >>> data = FinanceBenchData.load("../shared/data/financebench")    # doctest: +SKIP
    >>> len(data.questions), len(data.documents)                       # doctest: +SKIP
    (92, 54)
    >>> chunks = data.chunks(cache_dir="bench/results/cache")           # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from rag.base.errors import ConfigError, InputError
from rag.indexing.headings import chunk_section, heading_spans

__all__ = [
    "DATA_ENV_VAR",
    "DEFAULT_DATA_DIR",
    "FinanceBenchData",
    "Question",
    "chunk_pages",
    "document_title",
    "resolve_data_dir",
]

DATA_ENV_VAR = "RAG_FINANCEBENCH_DIR"
#: Relative to the project root (the current directory when run from it).
DEFAULT_DATA_DIR = "../shared/data/financebench"
_PAGE_CACHE_VERSION = "pypdfium2-v1"


@dataclass(frozen=True)
class Question:
    """One benchmark question and the pages (zero-based) that hold its evidence."""

    id: str
    question: str
    doc_name: str
    evidence_pages: frozenset[tuple[str, int]]   # (doc_name, zero-based page)
    answer: str = ""
    question_type: str = ""


@dataclass
class FinanceBenchData:
    """The questions and filing metadata of a FinanceBench-format data directory."""

    root: Path
    questions: list[Question]
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)   # doc_name -> metadata

    @classmethod
    def load(cls, root: str | Path, *, limit: int | None = None) -> FinanceBenchData:
        """Read `questions.jsonl` and `documents.jsonl`; keep questions whose PDF exists.

        Raises:
            ConfigError: the directory or one of its files is missing.
        """
        root = Path(root)
        for name in ("questions.jsonl", "pdfs"):
            if not (root / name).exists():
                raise ConfigError(f"{root} is not a FinanceBench data directory: {name} is missing "
                                  f"(set --data or {DATA_ENV_VAR})")
        pdfs = {p.stem for p in (root / "pdfs").glob("*.pdf")}
        documents = {}
        if (root / "documents.jsonl").exists():
            for row in _read_jsonl(root / "documents.jsonl"):
                if row["doc_name"] in pdfs:
                    documents[row["doc_name"]] = row
        for name in sorted(pdfs - set(documents)):
            documents[name] = {"doc_name": name}
        questions = []
        for row in _read_jsonl(root / "questions.jsonl"):
            if row["doc_name"] not in pdfs:
                continue
            pages = frozenset((ev.get("doc_name", row["doc_name"]), int(ev["evidence_page_num"]))
                              for ev in row.get("evidence", []))
            if not pages:
                continue
            questions.append(Question(id=str(row.get("financebench_id", len(questions))), question=row["question"],
                                      doc_name=row["doc_name"], evidence_pages=pages,
                                      answer=str(row.get("answer", "")), question_type=row.get("question_type", "")))
        if not questions:
            raise ConfigError(f"{root}/questions.jsonl has no question whose PDF is in {root}/pdfs")
        if limit is not None:
            questions = questions[:limit]
        return cls(root=root, questions=questions, documents=documents)

    def page_texts(self, doc_name: str, *, cache_dir: str | Path | None = None) -> list[str]:
        """The text of every page of a filing (index = zero-based page), parsed once and cached."""
        pdf = self.root / "pdfs" / f"{doc_name}.pdf"
        if not pdf.exists():
            raise InputError(f"no PDF for {doc_name!r} in {self.root / 'pdfs'}")
        cache_file = None
        if cache_dir is not None:
            stat = pdf.stat()
            key = hashlib.sha256(f"{_PAGE_CACHE_VERSION}|{pdf.name}|{stat.st_size}".encode()).hexdigest()[:12]
            cache_file = Path(cache_dir) / "pages" / f"{doc_name}.{key}.json"
            if cache_file.exists():
                return json.loads(cache_file.read_text(encoding="utf-8"))
        pages = _parse_pdf(pdf)
        if cache_file is not None:
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(pages, ensure_ascii=False), encoding="utf-8")
            os.replace(tmp, cache_file)
        return pages

    def chunks(self, *, cache_dir: str | Path | None = None, chunk_size: int = 1000,
               doc_names: Iterable[str] | None = None) -> list[Document]:
        """Page-aware chunks of every filing (or of `doc_names`), in document order."""
        out: list[Document] = []
        for name in sorted(doc_names if doc_names is not None else self.documents):
            meta = {"doc_name": name, "title": document_title(self.documents.get(name, {"doc_name": name})),
                    "source": f"{name}.pdf"}
            for key in ("company", "doc_type", "doc_period"):
                if key in self.documents.get(name, {}):
                    meta[key] = self.documents[name][key]
            out.extend(chunk_pages(self.page_texts(name, cache_dir=cache_dir), metadata=meta, chunk_size=chunk_size))
        return out


def chunk_pages(pages: Sequence[str], *, metadata: dict[str, Any], chunk_size: int = 1000) -> list[Document]:
    """Split page texts into chunks of at most `chunk_size` characters that never cross a page.

    Chunks are numbered by `chunk_index` across the whole document (consecutive chunks are
    neighbours) and keep their zero-based `page` and their `section` (`rag.indexing.headings.chunk_section`:
    a heading that opens the chunk, else the one in effect where it starts; "" before the first heading). No overlap, so neighbouring chunks and
    segments can be joined without repeating text.

    Example:
        >>> docs = chunk_pages(["alpha beta. " * 30, "", "gamma"], metadata={"doc_name": "d"}, chunk_size=200)
        >>> [(d.metadata["page"], d.metadata["chunk_index"]) for d in docs]
        [(0, 0), (0, 1), (2, 2)]
    """
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    # The benchmark protocol fixes chunks in characters (the README baselines use 1,000), so it
    # uses a character splitter rather than the library's token chunker, whose sizes are word pieces.

    splitter = RecursiveCharacterTextSplitter(chunk_size=chunk_size, chunk_overlap=0)
    spans = heading_spans(pages)
    chunks = []
    for page, text in enumerate(pages):
        cursor = 0
        for piece in splitter.split_text(text):
            found = text.find(piece, cursor)
            cursor = found if found >= 0 else cursor
            chunks.append(Document(page_content=piece, metadata={
                **metadata, "doc_id": metadata["doc_name"], "page": page, "chunk_index": len(chunks),
                "section": chunk_section(spans, page, cursor, cursor + len(piece))}))
    return chunks


def document_title(meta: dict[str, Any]) -> str:
    """A human title from filing metadata: company, period and form, e.g. '3M 2022 10-K'.

    Example:
        >>> document_title({"doc_name": "X_2022_10K", "company": "Acme", "doc_type": "10k", "doc_period": 2022})
        'Acme 2022 10-K annual report'
    """
    forms = {"10k": "10-K annual report", "10q": "10-Q quarterly report", "8k": "8-K current report",
             "earnings": "earnings release"}
    if "company" not in meta:
        return str(meta.get("doc_name", "")).replace("_", " ")
    form = forms.get(str(meta.get("doc_type", "")).lower(), str(meta.get("doc_type", "")))
    return " ".join(str(p) for p in (meta["company"], meta.get("doc_period", ""), form) if str(p))


def resolve_data_dir(option: str | Path | None = None) -> Path:
    """The data directory: the option if given, else `RAG_FINANCEBENCH_DIR`, else the default."""
    return Path(option or os.environ.get(DATA_ENV_VAR) or DEFAULT_DATA_DIR)


def _parse_pdf(path: Path) -> list[str]:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(path))
    try:
        pages = []
        for index in range(len(pdf)):
            page = pdf[index]
            textpage = page.get_textpage()
            pages.append(textpage.get_text_range().replace("\r\n", "\n").replace("\r", "\n"))
            textpage.close()
            page.close()
        return pages
    finally:
        pdf.close()


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}:{n}: not valid JSON ({exc.msg})") from exc
    return rows
