"""The approximate nearest-neighbour index of a pgvector knowledge base's table, and how a search uses it.

A table rag creates (`rag.stores.pgvector.open_store(create=True)`) gets an HNSW index on its
vectors: pgvector's ``hnsw`` with the operator class of the store's distance (cosine by default) and
pgvector's own build parameters (m = 16, ef_construction = 64). Without one, PostgreSQL reads every
vector for every search: 190 ms for the 100 nearest of 36,339 MiniLM chunks of the FinanceBench
filings and 349 ms for 20 of 100,000 chunks of 384 dimensions, growing with the table; through the
index 4-13 ms at 36,339 (measured 2026-11-29, load 5-7; docs/stores.md). The index is approximate:
over the 92 FinanceBench development questions (real MiniLM vectors, the 100 nearest, as the
default pipeline's dense search asks) it returned 90.7% of the exact neighbours with a candidate
list of 100, 95.6% with 200, 97.1% with 400 and 99.6% with 800 (4.7, 4.6, 4.0 and 13 ms at the
median). 400, the least a search uses, is also what rag's Chroma collections search with
(`rag.stores.chroma.NEW_COLLECTION`, 98% of the exact top 100 on the same vectors).

Each search sets, for its own transaction only (``set_config(..., true)``):

- ``hnsw.ef_search``, the candidate list, to ``max(EF_SEARCH, k)``: the index returns at most that
  many rows, so a search for more than pgvector's default 40 would otherwise come back short;
- ``hnsw.iterative_scan = strict_order`` (pgvector 0.8 and later): a filtered search through the
  index keeps scanning until `k` rows pass the filter (up to pgvector's ``hnsw.max_scan_tuples``,
  20,000 by default), in distance order. Without it the index yields its first ``ef_search``
  candidates and the filter drops most of them: 2-5 rows of 20 for a filter on 1% of 100,000 rows.
  A filter that allows fewer rows than that scan reaches can still return fewer than `k`; an older
  pgvector runs without iterative scans.

A table made elsewhere or by an earlier version is searched as it is (an index of its own is used the
same way); ``CREATE INDEX ON <table> USING hnsw (embedding vector_cosine_ops)`` adds one (docs/stores.md).
"""

from __future__ import annotations

from typing import Any

__all__ = ["EF_SEARCH", "create_index_sql", "index_name", "search_settings", "version"]

#: the least candidate list a search asks the HNSW index for (pgvector's default is 40; see the module docstring)
EF_SEARCH = 400


def index_name(table: str) -> str:
    """The HNSW index's name for `table` (PostgreSQL keeps the first 63 bytes of a name).

    Example:
        >>> index_name("notes")
        'notes_rag_hnsw'
    """
    return f"{table}_rag_hnsw"[:63]


def create_index_sql(vs: Any) -> str:
    """``CREATE INDEX`` of the HNSW index on the vectors of the `AsyncPGVectorStore` `vs` (idempotent)."""
    table = f'"{vs.schema_name}"."{vs.table_name}"'
    return (f'CREATE INDEX IF NOT EXISTS "{index_name(vs.table_name)}" ON {table} '
            f'USING hnsw ("{vs.embedding_column}" {vs.distance_strategy.index_function})')


def version(text: str | None) -> tuple[int, ...]:
    """pgvector's ``extversion`` as numbers (``()`` when the extension is not there).

    Example:
        >>> version("0.8.5"), version(None)
        ((0, 8, 5), ())
    """
    return tuple(int(p) for p in text.split(".") if p.isdigit()) if text else ()


def search_settings(pgvector: tuple[int, ...], k: int) -> list[tuple[str, str]]:
    """The settings one search of `k` rows makes for its transaction, on pgvector version `pgvector`.

    Example:
        >>> search_settings((0, 8, 5), 20)
        [('hnsw.ef_search', '400'), ('hnsw.iterative_scan', 'strict_order')]
        >>> search_settings((0, 7, 4), 500)
        [('hnsw.ef_search', '500')]
    """
    out = [("hnsw.ef_search", str(min(max(EF_SEARCH, k), 1000)))]   # (pgvector's largest)
    if pgvector >= (0, 8):
        out.append(("hnsw.iterative_scan", "strict_order"))
    return out
