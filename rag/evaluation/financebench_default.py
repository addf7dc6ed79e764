"""The FinanceBench row `default`: exactly what `rag index` + `rag ask` do, scored like the other rows.

The filings are indexed the way `rag index PDFS --store STORE --collection financebench` indexes
them: one `KnowledgeBase` with its own defaults (its chunker, table detection, AutoContext, the
default embedding model), kept in the cache directory so a second run only checks that nothing
changed. Each question is then retrieved the way `rag ask` retrieves: the knowledge base's
`as_resource()` (hybrid search) and the recommended pipeline (`rag.compose.defaults.RECOMMENDED`),
with two settings of the benchmark instead of the command's: the context budget is the table's
(4,000 tokens counted as characters / 4, the same counter as every other row), and in the
single-document setting the question's filing is selected by a `source` filter.

Example:
    >>> config = DefaultConfiguration.build(data, cache_dir="/work/cache/financebench")   # doctest: +SKIP
    >>> config.retrieve("What was 3M's FY2018 capex?", doc_name="3M_2018_10K").context    # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from rag.compose.defaults import RECOMMENDED
from rag.compose.knowledge_base import KnowledgeBase
from rag.compose.resource import Resource
from rag.compose.retrieve import retrieve
from rag.evaluation.financebench import FinanceBenchData
from rag.evaluation.financebench_run import DEFAULT_BUDGET, Retrieval, ranked_documents
from rag.models.embeddings import default_embeddings
from rag.stores.registry import chunks_of
from rag.indexing.loaders import load_file, path_text
from rag.retrieval.budget import CharTokenCounter

__all__ = ["DEFAULT_NAME", "DESCRIPTIONS", "NO_TABLES_NAME", "DefaultConfiguration"]

DEFAULT_NAME = "default"
#: the same without table detection: PDF pages read as plain text (`load_file(path, tables=False)`)
NO_TABLES_NAME = "default-notables"
#: name -> description of the rows built on a `rag index` knowledge base
DESCRIPTIONS = {
    DEFAULT_NAME: "exactly `rag index PDFS` + `rag ask`: the knowledge base's own chunking (table chunks, AutoContext), "
                  "hybrid search and the recommended pipeline (RRF, page-diverse packing); the context budget "
                  "counted as characters / 4 like every row",
    NO_TABLES_NAME: "`default` with PDF pages read as plain text (no table detection): what table chunks add",
}
_COLLECTION = "financebench"


class DefaultConfiguration:
    """`rag ask` over a knowledge base built by `rag index` from the filings (see the module docstring)."""

    def __init__(self, resource: Resource, pdf_dir: Path, *, budget: int = DEFAULT_BUDGET,
                 token_counter: Any = None, index_stats: dict[str, Any] | None = None, tables: bool = True) -> None:
        self.name = DEFAULT_NAME if tables else NO_TABLES_NAME
        self.description = DESCRIPTIONS[self.name]
        self.resource, self.pdf_dir, self.budget = resource, pdf_dir, budget
        self.index_stats = index_stats or {}
        # the table's counter (chars / 4); "auto" is `rag ask`'s own (the embedding model's word pieces)
        self.token_counter = CharTokenCounter() if token_counter is None else token_counter

    @classmethod
    def build(cls, data: FinanceBenchData, *, cache_dir: str | Path | None, budget: int = DEFAULT_BUDGET,
              token_counter: Any = None, tables: bool = True, backend: Callable[[Any], Any] | None = None,
              progress: Callable[[str], None] | None = None) -> DefaultConfiguration:
        """Index (or bring up to date) the filings' knowledge base under `cache_dir` and bind `rag ask`'s retrieval to it.

        With `cache_dir=None` the knowledge base is built in memory (and not kept). `tables=False`
        builds the `default-notables` variant: the filings' pages loaded as plain text, then the
        same knowledge base defaults. `backend` opens another store for its chunks with an embedding model
        (`rag index --backend`; the knowledge base's folder is then `default-kb-<backend>`, its embedding cache
        its own).
        """
        pdf_dir = (data.root / "pdfs").resolve()
        # one store directory for both rows: they share its embedding cache, so the chunks of pages without
        # tables, the same in both, are embedded once
        name = _COLLECTION if tables else f"{_COLLECTION}-notables"
        if backend is None:
            store = None if cache_dir is None else Path(cache_dir) / "default-kb"
            kb = KnowledgeBase(name, store)
        else:
            chunks = backend(default_embeddings())
            backend_name = chunks_of(chunks).backend
            kb = KnowledgeBase(name, None if cache_dir is None else Path(cache_dir) / f"default-kb-{backend_name}",
                               store=chunks)
        started = time.perf_counter()
        pdfs = sorted(pdf_dir / f"{name}.pdf" for name in data.documents)
        if tables:
            report = kb.add_documents([str(p) for p in pdfs])
        else:
            known = {r.source for r in kb.list_documents()} if kb.exists else set()   # skip filings already in
            report = kb.add_documents([doc for p in pdfs if path_text(p) not in known
                                       for doc in load_file(p, tables=False)])
        seconds = time.perf_counter() - started
        if progress is not None:
            progress(f"{DEFAULT_NAME if tables else NO_TABLES_NAME}: knowledge base: {report.summary()}")
        chunks = kb.count()
        stats = {"index_seconds": round(seconds, 1), "index_changed": bool(report.changed), "chunks": chunks,
                 "table_chunks": _table_chunks(kb)}
        return cls(kb.as_resource(), pdf_dir, budget=budget, token_counter=token_counter, index_stats=stats,
                   tables=tables)

    def settings(self, doc_name: str | None) -> dict[str, Any]:
        """`rag ask`'s settings (`RECOMMENDED`) with the benchmark's budget and, for one filing, its `source` filter."""
        settings = {**RECOMMENDED, "max_tokens": self.budget, "token_counter": self.token_counter}
        if doc_name is not None:
            settings["filter"] = {"source": path_text(self.pdf_dir / f"{doc_name}.pdf")}
        return settings

    def retrieve(self, question: str, *, doc_name: str | None) -> Retrieval:
        """Retrieve for `question` as `rag ask` does, from `doc_name`'s filing or from all of them."""
        result = retrieve(question, self.resource, **self.settings(doc_name))
        return Retrieval(ranked=[_named(d) for d in ranked_documents(result)],
                         context=[_named(d) for d in result.context],
                         extras={"timings": result.timings})


def _named(doc: Document) -> Document:
    """The chunk with the benchmark's `doc_name` (its file's stem); its `page` is pypdfium2's zero-based index."""
    name = Path(str(doc.metadata.get("source", ""))).stem
    return Document(page_content=doc.page_content, metadata={**doc.metadata, "doc_name": name}, id=doc.id)


def _table_chunks(kb: KnowledgeBase) -> int:
    """How many stored chunks are tables (`chunk_type == "table"`)."""
    return len(kb.get_documents({"chunk_type": "table"}))
