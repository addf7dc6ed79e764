"""`LanceLexical`: a LanceDB knowledge base's lexical index in its own table, as LanceDB's full-text index.

A table that rag creates for a knowledge base (`rag.stores.lancedb.open_store(create=True)`) has a
column `TOKENS` beside the text: each row's chunk tokenised by `rag.base.text.tokenize` (title and
section first, the tokens every lexical index of rag uses), joined by spaces, written in the same
row write as the vector, so a chunk and its tokens never part. LanceDB's native full-text index
(`create_fts_index`, its whitespace tokenizer, with no lower-casing, stemming, stop words or length
limit of its own: the tokens are rag's) ranks them by Okapi BM25 (k1 = 1.2, b = 0.75, idf ``ln(1 + (N -
n + 0.5) / (n + 0.5))``, the mean length over the indexed rows: the scores the tests compute), and a
search is one LanceDB query: ``search(tokens, query_type="fts")`` with the caller's filter as the
same SQL `where` the dense search uses (`rag.stores.lancedb.where_clause`), applied before ranking
(``prefilter=True``).

**Freshness.** LanceDB indexes rows in batches: rows written after the index was last updated are
searched too (read without the index) but scored with their own statistics, not the index's, until
the index is updated (`Table.optimize`). Updating it re-reads the index, so it is not done after
every write: the knowledge base's writes update it when the rows not yet indexed exceed
`STALE_SHARE` of those indexed (at least `STALE_ROWS`), and a search creates it when the table has
none. Between two updates a new chunk is found but may rank a little differently than it will
after (the engine's behaviour; docs/stores.md). Nothing is read whole and nothing is rebuilt in a
process: every client of the table, on any machine that reaches its URI, searches the same index.

A table made elsewhere, without `TOKENS`, keeps an SQLite FTS5 index beside its knowledge base's
records instead (`rag.stores.lexical_chunks.lexical_beside`).

Example:
    >>> import tempfile
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from rag.stores.lancedb import LanceChunks, open_store
    >>> chunks = LanceChunks(open_store("notes", DeterministicFakeEmbedding(size=4), uri=tempfile.mkdtemp(),
    ...                                 create=True))
    >>> chunks.add(["a" * 32, "b" * 32], [[1.0, 0, 0, 0]] * 2, ["Paris is in France.", "Rome is in Italy."],
    ...            [{"doc_id": "d1"}, {"doc_id": "d2"}])
    >>> lexical = LanceLexical(chunks)
    >>> [d.page_content for d, _ in lexical.search("paris")]
    ['Paris is in France.']
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document

from rag.base.filters import validate_filter
from rag.base.portable import check_k
from rag.base.text import tokenize
from rag.stores.in_store_lexical import InStoreLexical
from rag.stores.lancedb import TOKENS, LanceChunks, column, where_clause

__all__ = ["STALE_ROWS", "STALE_SHARE", "LanceLexical", "has_lexical_column"]

#: the index is updated after a write once the rows it has not indexed exceed this share of those it has ...
STALE_SHARE = 0.05
#: ... and at least this many rows
STALE_ROWS = 1000
_INDEX = f"{TOKENS}_idx"
_BATCH = 1000


def has_lexical_column(store: Any) -> bool:
    """Whether the `LanceStore` `store` writes each chunk's tokens (a table rag created, or one that has `TOKENS`)."""
    return bool(getattr(store, "lexical", False))


class LanceLexical(InStoreLexical):
    """The lexical index of the `LanceChunks` `chunks`, in its own table (see the module docstring).

    The tokens are written by the store with each row (title and section from `DEFAULT_FIELDS`); this
    class keeps the table's full-text index and searches it.
    """

    def __init__(self, chunks: LanceChunks) -> None:
        super().__init__(chunks)
        self.store = chunks.store
        #: how messages name it
        self.where = f"LanceDB's full-text index ({self.store.table_name}.{TOKENS})"
        self._indexed = False   # the table has its full-text index (set when seen or made)

    # ------------------------------------------------------------------ writing
    def add(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """The rows' tokens were written with them: bring the full-text index up to date when it lags too far."""
        self.refresh()

    def update_metadatas(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """The store wrote the new tokens with the new metadata."""
        self.refresh()

    def refresh(self, *, force: bool = False) -> bool:
        """Create the full-text index, or update it when the rows it lacks exceed `STALE_SHARE` (any, with
        `force`); whether it changed."""
        table = self.store.table()
        if table is None:
            return False
        stats = self._stats(table)
        if stats is None:
            return self._create(table)
        stale = stats.num_unindexed_rows
        if stale and (force or stale >= max(STALE_ROWS, STALE_SHARE * stats.num_indexed_rows)):
            table.optimize()
            return True
        return False

    def _create(self, table: Any) -> bool:
        """Create the full-text index over the table's rows (none: nothing to index yet); whether it now has one."""
        if table.count_rows() == 0:
            return False
        table.create_fts_index(TOKENS, use_tantivy=False, base_tokenizer="whitespace", lower_case=False,
                               stem=False, remove_stop_words=False, ascii_folding=False, with_position=False,
                               max_token_length=None, replace=True)
        self._indexed = True
        return True

    def _stats(self, table: Any) -> Any:
        """The index's statistics (None: the table has none yet)."""
        if _INDEX not in {i.name for i in table.list_indices()}:
            return None
        self._indexed = True
        return table.index_stats(_INDEX)

    # ------------------------------------------------------------------ reading
    def count(self) -> int:
        """How many chunks have their tokens written."""
        table = self.store.table()
        return 0 if table is None else int(table.count_rows(f"{TOKENS} IS NOT NULL"))

    def ids(self) -> list[str]:
        """The ids of the chunks that have their tokens written."""
        table = self.store.table()
        if table is None:
            return []
        rows = table.search().where(f"{TOKENS} IS NOT NULL").select(["id"]).limit(None).to_arrow()
        return [str(i) for i in rows.column("id").to_pylist()]

    def _ranked(self, query: str, *, k: int | None, canon: dict[str, Any] | None, columns: list[str]) -> list[dict]:
        table = self.store.table()
        terms = list(dict.fromkeys(tokenize(query)))
        if table is None or not terms:
            return []
        if not self._indexed and self._stats(table) is None:   # (once seen, an index stays: no lookup per search)
            self._create(table)
        search = (table.search(" ".join(terms), query_type="fts", fts_columns=TOKENS)
                  .select([*columns, "_score"]).limit(k))
        if canon is not None:
            search = search.where(where_clause(canon, set(table.schema.names)), prefilter=True)
        return search.to_list()

    def search(self, query: str, *, k: int = 4,
               filter: dict[str, Any] | None = None) -> list[tuple[Document, float]]:
        """The top-`k` chunks for `query` among those the portable `filter` allows, BM25-scored, best first;
        ``metadata["scores"] == {"bm25": score}``."""
        k = check_k(k)
        canon = validate_filter(filter)
        out = []
        for row in self._ranked(query, k=k, canon=canon, columns=["id", "text", "metadata"]):
            score = float(row["_score"])
            metadata = {**json.loads(row["metadata"]), "score": score, "scores": {"bm25": score}}
            out.append((Document(page_content=row["text"], metadata=metadata, id=row["id"]), score))
        return out

    def mentions(self, word: str) -> Counter:
        """``doc_id`` -> how many chunks hold a token of `word` (reads each matching row's `doc_id` column only)."""
        table = self.store.table()
        doc_id = column("doc_id", "s")
        if table is None or doc_id not in table.schema.names:
            return Counter()
        return Counter(row[doc_id] for row in self._ranked(word, k=None, canon=None, columns=[doc_id])
                       if row[doc_id] is not None)
