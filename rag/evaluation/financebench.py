"""FinanceBench data: questions, filings, their pages and the benchmark's page-aware chunker.

The data directory holds `pdfs/{doc_name}.pdf`, `questions.jsonl` (each question with its
`doc_name` and `evidence` pages, zero-based) and `documents.jsonl` (company, doc_type,
doc_period per filing). A filing's pages are read by the library's PDF loader
(`rag.indexing.loaders.load_file`, pages as plain text: no table detection, no OCR), and chunked by
`PageChunker`, a `rag.indexing.formats.Chunker` the benchmark's knowledge base is given
(`rag.evaluation.financebench_corpus`). Chunks never cross a page, so every chunk has exactly one
zero-based `page` to compare with the gold evidence.

Example:
    >>> data = FinanceBenchData.load("../shared/data/financebench")    # doctest: +SKIP
    >>> len(data.questions), len(data.documents)                       # doctest: +SKIP
    (92, 54)
    >>> chunks = data.chunks(doc_names=["3M_2018_10K"])                # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from rag.base.errors import ConfigError, InputError
from rag.indexing.headings import chunk_section, heading_spans
from rag.indexing.loaders import load_file
from rag.indexing.pdf import LoadLimits

__all__ = [
    "DATA_ENV_VAR",
    "DEFAULT_DATA_DIR",
    "PAGE_LIMITS",
    "FinanceBenchData",
    "PageChunker",
    "Question",
    "chunk_pages",
    "document_title",
    "page_list",
    "resolve_data_dir",
]

DATA_ENV_VAR = "RAG_FINANCEBENCH_DIR"
#: Relative to the project root (the current directory when run from it).
DEFAULT_DATA_DIR = "../shared/data/financebench"
#: how the benchmark reads a filing: each page's text layer as it is (tables stay in the page text; no OCR)
PAGE_LIMITS = LoadLimits(tables=False, ocr=False)


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

    def pages(self, doc_name: str) -> list[Document]:
        """A filing's pages with text, read by the library's PDF loader (`PAGE_LIMITS`), with the filing's
        metadata: `doc_name`, `title` (`document_title`), `source` (``"{doc_name}.pdf"``), `company`,
        `doc_type`, `doc_period`, and each page's zero-based `page`."""
        pdf = self.root / "pdfs" / f"{doc_name}.pdf"
        if not pdf.exists():
            raise InputError(f"no PDF for {doc_name!r} in {self.root / 'pdfs'}")
        known = self.documents.get(doc_name, {"doc_name": doc_name})
        meta = {"doc_name": doc_name, "title": document_title(known), "source": f"{doc_name}.pdf",
                **{key: known[key] for key in ("company", "doc_type", "doc_period") if key in known}}
        return [Document(page_content=d.page_content, metadata={**d.metadata, **meta})
                for d in load_file(pdf, limits=PAGE_LIMITS)]

    def page_texts(self, doc_name: str) -> list[str]:
        """The text of every page of a filing (index = zero-based page; "" for a page without text)."""
        return page_list(self.pages(doc_name))

    def chunks(self, *, chunk_size: int = 1000, doc_names: Iterable[str] | None = None) -> list[Document]:
        """`PageChunker` chunks of every filing (or of `doc_names`), in document order (no knowledge base)."""
        chunker = PageChunker(chunk_size=chunk_size)
        return [c for name in sorted(doc_names if doc_names is not None else self.documents)
                for c in chunker.split_documents(self.pages(name))]


class PageChunker:
    """The benchmark's chunker: at most `chunk_size` characters, never across a page (`chunk_pages`).

    A `rag.indexing.formats.Chunker`: it splits each document (its pages, grouped by `doc_id`, else
    `doc_name`) on its own and numbers its chunks; a knowledge base records its `settings()`.

    Example:
        >>> pages = [Document(page_content="alpha beta. " * 30, metadata={"doc_id": "d", "page": 0}),
        ...          Document(page_content="gamma", metadata={"doc_id": "d", "page": 2})]
        >>> [(c.metadata["page"], c.metadata["chunk_index"]) for c in PageChunker(chunk_size=200).split_documents(pages)]
        [(0, 0), (0, 1), (2, 2)]
    """

    def __init__(self, chunk_size: int = 1000) -> None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ConfigError(f"chunk_size must be a positive number of characters, got {chunk_size!r}")
        self.chunk_size = chunk_size

    def settings(self) -> dict[str, Any]:
        """The settings as data."""
        return {"type": "financebench-pages", "chunk_size": self.chunk_size}

    def split_documents(self, docs: Sequence[Document]) -> list[Document]:
        """Each document's chunks, documents in the order given."""
        by_doc: dict[str, list[Document]] = {}
        for doc in docs:
            by_doc.setdefault(str(doc.metadata.get("doc_id", doc.metadata.get("doc_name", ""))), []).append(doc)
        out: list[Document] = []
        for doc_id, pages in by_doc.items():
            meta = {k: v for k, v in pages[0].metadata.items() if k not in ("page", "chunk_index", "section")}
            out += chunk_pages(page_list(pages), metadata={**meta, "doc_id": doc_id}, chunk_size=self.chunk_size)
        return out


def page_list(pages: Sequence[Document]) -> list[str]:
    """Page texts by zero-based `page` ("" for a page the loader left out: it had no text)."""
    texts = [""] * (1 + max((int(p.metadata.get("page", 0)) for p in pages), default=-1))
    for page in pages:
        index = int(page.metadata.get("page", 0))
        texts[index] = texts[index] + "\n" + page.page_content if texts[index] else page.page_content
    return texts


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
                **metadata, "doc_id": metadata.get("doc_id", metadata.get("doc_name")), "page": page, "chunk_index": len(chunks),
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


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}:{n}: not valid JSON ({exc.msg})") from exc
    return rows
